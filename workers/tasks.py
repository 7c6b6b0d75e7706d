"""Celery tasks: each loads by id and calls one service or engine."""

from django.conf import settings

from anneal.datasets.housekeeping import uploads_sweep
from anneal.datasets.services import dataset_upload_ingest, dataset_upload_preview
from anneal.deployments.batch_runs import batch_run, batches_reap_stale
from anneal.deployments.services import deployments_reap_stale_prepares, replicas_reap_stale
from anneal.training.dispatch import jobs_dispatch
from anneal.training.housekeeping import jobs_reap_stale, rollouts_prune
from sandboxes.service import run_batch
from workers.celery_app import app
from workers.deploy import deployment_prepare, replica_run_supervised
from workers.job_runner import job_run_supervised


@app.task(name="datasets.ingest", bind=True)
def dataset_ingest(self, upload_id: int) -> str:
    # Redelivered (acks late) after the worker died mid-ingest: the service fails the upload, not loops on it.
    redelivered = bool((self.request.delivery_info or {}).get("redelivered"))
    return dataset_upload_ingest(upload_id=upload_id, redelivered=redelivered).state


@app.task(name="datasets.preview", bind=True)
def dataset_preview(self, upload_id: int) -> str:
    # Files are parsed here, never in the web process; redelivered: the last reading killed a worker.
    redelivered = bool((self.request.delivery_info or {}).get("redelivered"))
    return dataset_upload_preview(upload_id=upload_id, redelivered=redelivered).state


@app.task(name="training.run_job", acks_late=True)
def job_run(job_id: int) -> str:
    return job_run_supervised(job_id=job_id)


@app.task(name="sandbox.run_many", bind=True, acks_late=True, reject_on_worker_lost=True, max_retries=None)
def sandbox_run_many(
    self, requests: list[dict], backend: str | None = None, team: str | None = None
) -> list[dict]:
    # A batch re-sent after its host died (sandboxes/remote.py) may also have finished there: keep that result.
    previous = self.AsyncResult(self.request.id)
    if previous.successful():
        return previous.result
    results = run_batch(
        requests,
        backend or settings.SANDBOX_BACKEND,
        batch_id=self.request.id,
        redis=self.backend.client,  # the Redis result backend's client: heartbeats, quotas, statistics
        team=team,
        quota=settings.SANDBOX_TEAM_QUOTA,
    )
    if results is None:  # the team's quota is full: wait for its other batches, leaving this host free
        raise self.retry(countdown=0.2)
    return results


@app.task(name="housekeeping.reap_stale_jobs")
def reap_stale_jobs() -> int:
    return jobs_reap_stale(timeout_s=settings.JOB_HEARTBEAT_TIMEOUT_S)


@app.task(name="housekeeping.dispatch_jobs")
def dispatch_jobs() -> list[int]:
    # Launches, resumes and attempt ends dispatch at once; this catches what they could not (a lost message).
    return jobs_dispatch()


@app.task(name="housekeeping.sweep_uploads")
def sweep_uploads() -> dict[str, int]:
    return uploads_sweep()


@app.task(name="housekeeping.prune_rollouts")
def prune_rollouts() -> int:
    return rollouts_prune(older_than_days=settings.ROLLOUT_RETENTION_DAYS)


@app.task(name="deployments.prepare", acks_late=True)
def deployment_prepare_task(deployment_id: int) -> str:
    return deployment_prepare(deployment_id=deployment_id)


# Long-lived: the task lives as long as its replica. Acked on receipt, so the broker never re-delivers it
# while it runs; a worker that dies with it is caught by the heartbeat reaper below.
@app.task(name="serve.replica", acks_late=False)
def replica_serve_task(replica_id: int) -> str:
    return replica_run_supervised(replica_id=replica_id)


@app.task(name="deployments.run_batch", acks_late=True)
def batch_run_task(batch_id: int) -> str:
    return batch_run(batch_id=batch_id, stale_after_s=settings.DEPLOY_REPLICA_HEARTBEAT_TIMEOUT_S)


@app.task(name="deployments.reap_stale_replicas")
def reap_stale_replicas() -> int:
    # Replicas whose worker went silent, and the preparations (the regression gate) and batch runs whose did.
    timeout_s = settings.DEPLOY_REPLICA_HEARTBEAT_TIMEOUT_S
    return (
        replicas_reap_stale(timeout_s=timeout_s)
        + deployments_reap_stale_prepares(timeout_s=timeout_s)
        + batches_reap_stale(timeout_s=timeout_s)
    )
