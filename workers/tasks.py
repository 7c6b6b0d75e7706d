"""Celery tasks: each loads by id and calls one service or engine."""

from django.conf import settings

from anneal.datasets.services import dataset_upload_ingest
from anneal.training.housekeeping import jobs_reap_stale, rollouts_prune
from sandboxes.service import run_many_dicts
from workers.celery_app import app
from workers.job_runner import job_run_supervised


@app.task(name="datasets.ingest")
def dataset_ingest(upload_id: int) -> str:
    return dataset_upload_ingest(upload_id=upload_id).state


@app.task(name="training.run_job", acks_late=True)
def job_run(job_id: int) -> str:
    return job_run_supervised(job_id=job_id)


@app.task(name="sandbox.run_many")
def sandbox_run_many(requests: list[dict], backend: str | None = None) -> list[dict]:
    return run_many_dicts(requests, backend or settings.SANDBOX_BACKEND)


@app.task(name="housekeeping.reap_stale_jobs")
def reap_stale_jobs() -> int:
    return jobs_reap_stale(timeout_s=settings.JOB_HEARTBEAT_TIMEOUT_S)


@app.task(name="housekeeping.prune_rollouts")
def prune_rollouts() -> int:
    return rollouts_prune(older_than_days=settings.ROLLOUT_RETENTION_DAYS)
