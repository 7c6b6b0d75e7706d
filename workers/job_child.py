"""The training child process: `python -m workers.job_child JOB_ID`. Loads the job and runs gpu_jobs.grpo."""

import sys
import traceback

import workers.celery_app  # noqa: F401  (puts platform/ on sys.path and sets Django up first)

# isort: split
from django.conf import settings

from anneal.datasets.models import DatasetVersion
from anneal.datasets.storage import read_rows
from anneal.training.models import Job
from anneal.training.services import HYPER_FIELDS
from gpu_jobs.config import GRPOJobConfig
from gpu_jobs.grpo import main as grpo_main
from sandboxes.client import SandboxClient
from workers.job_runner import job_workdir
from workers.sink import DjangoCheckpointStore, DjangoEventSink


def run(job_id: int) -> None:
    job = Job.objects.select_related("dataset_version").get(pk=job_id)
    verifiers = [
        {"name": jv.name, "spec": jv.verifier_version.spec, "weight": jv.weight}
        for jv in job.job_verifiers.select_related("verifier_version").order_by("id")
    ]
    config = GRPOJobConfig(
        **{name: job.spec[name] for name in HYPER_FIELDS if name in job.spec},
        model_store=str(settings.MODEL_STORE),
        output_dir=str(job_workdir(job_id) / "trainer"),
        rows=read_rows(job.dataset_version.rows_path),
        eval_rows=_eval_rows(job),
        verifiers=verifiers,
    )
    sandbox = SandboxClient(
        mode=settings.SANDBOX_EXECUTION,
        backend=settings.SANDBOX_BACKEND,
        broker_url=settings.CELERY_BROKER_URL,
        result_backend_url=settings.CELERY_RESULT_BACKEND,
        team=str(job.team_id),  # counts against the team's sandbox quota on the sandbox hosts
        max_batch=settings.SANDBOX_TEAM_QUOTA,  # a step's checks go out in parts that fit the quota
    )
    sink = DjangoEventSink(job_id=job_id)
    summary = grpo_main(config, sink=sink, checkpoints=DjangoCheckpointStore(job=job), sandbox=sandbox)
    sink.emit("log", {"message": f"training finished: {summary}"})


def _eval_rows(job: Job) -> list[dict]:
    version_id = job.spec.get("eval_dataset_version")
    if not version_id:
        return []
    return read_rows(DatasetVersion.objects.get(pk=version_id).rows_path)


def main() -> None:
    job_id = int(sys.argv[1])
    try:
        run(job_id)
    except Exception as exc:
        traceback.print_exc()
        (job_workdir(job_id) / "error.txt").write_text(f"{type(exc).__name__}: {exc}")
        sys.exit(1)


if __name__ == "__main__":
    main()
