"""The training child process: `python -m workers.job_child JOB_ID`. Loads the job and runs gpu_jobs.grpo."""

import json
import os
import sys
import traceback

import workers.celery_app  # noqa: F401  (puts platform/ on sys.path and sets Django up first)

# isort: split
from django.conf import settings

from anneal.datasets.models import DatasetVersion
from anneal.datasets.storage import read_rows
from anneal.errors import InputError
from anneal.training.models import Job
from anneal.training.services import job_inputs_check
from anneal.verifiers.outbound import team_outbound
from gpu_jobs.config import GRPOJobConfig, RunInputs
from gpu_jobs.grpo import main as grpo_main
from gpu_jobs.spec import TrainingSettings
from sandboxes.client import SandboxClient
from workers.job_runner import job_workdir
from workers.parent_watch import watch_parent
from workers.sink import DjangoCheckpointStore, DjangoEventSink, DjangoJobControl


def run(job_id: int) -> None:
    job = Job.objects.select_related("dataset_version", "team").get(pk=job_id)
    # The user's settings as frozen at launch, then what this worker adds to run them.
    config = GRPOJobConfig.of(TrainingSettings.from_spec(job.spec), _run_inputs(job))
    sandbox = SandboxClient(
        mode=settings.SANDBOX_EXECUTION,
        backend=settings.SANDBOX_BACKEND,
        broker_url=settings.CELERY_BROKER_URL,
        result_backend_url=settings.CELERY_RESULT_BACKEND,
        team=str(job.team_id),  # counts against the team's sandbox quota on the sandbox hosts
        max_batch=settings.SANDBOX_TEAM_QUOTA,  # a step's checks go out in parts that fit the quota
    )
    sink = DjangoEventSink(job_id=job_id)
    summary = grpo_main(
        config,
        sink=sink,
        checkpoints=DjangoCheckpointStore(job=job),
        sandbox=sandbox,
        control=DjangoJobControl(job_id=job_id),
        resume=True,  # a requeued or resumed job goes on from its latest trainer checkpoint
        # A model judge reaches only the team's allowed hosts, with its secrets, resolved here (never env vars).
        outbound=team_outbound(job.team),
    )
    # Read by the worker: whether training ended early because the job was asked to pause or stop.
    (job_workdir(job_id) / "outcome.json").write_text(json.dumps({"stopped_for": summary.get("stopped_for")}))
    sink.emit("log", {"level": "info", "message": finished_message(summary)})


def finished_message(summary: dict) -> str:
    """The run's summary in words; its model folder and checkpoint are server paths, left out."""
    parts = [f"{summary.get('steps', '?')} steps"]
    if isinstance(summary.get("reward"), int | float):
        parts.append(f"last mean reward {summary['reward']:.3f}")
    if isinstance(summary.get("train_seconds"), int | float):
        parts.append(f"{summary['train_seconds']:.0f} s of training")
    if summary.get("stopped_for"):
        parts.append(f"stopped early ({summary['stopped_for']})")
    return "training finished: " + ", ".join(parts)


def _run_inputs(job: Job) -> RunInputs:
    return RunInputs(
        model_store=str(settings.MODEL_STORE),
        output_dir=str(job_workdir(job.pk) / "trainer"),
        rows=_train_rows(job),
        eval_rows=_eval_rows(job),
        verifiers=_verifiers(job),
        domain_weights=job.spec.get("domain_weights") or {},
    )


def _verifiers(job: Job) -> list[dict]:
    """Each verifier's spec and weight; the domains it scores were frozen in the job's spec (none: all)."""
    routes = {v["name"]: v["domains"] for v in job.spec.get("verifiers", []) if v.get("domains")}
    return [
        {
            "name": jv.name,
            "spec": jv.verifier_version.spec,
            "weight": jv.weight,
            **({"domains": routes[jv.name]} if jv.name in routes else {}),
        }
        for jv in job.job_verifiers.select_related("verifier_version").order_by("id")
    ]


def _train_rows(job: Job) -> list[dict]:
    """The rows of every dataset version the job mixes, in the order they were chosen."""
    uses = list(job.job_datasets.select_related("dataset_version").order_by("position"))
    versions = [use.dataset_version for use in uses] or [job.dataset_version]
    return [row for version in versions for row in read_rows(version.rows_path)]


def _eval_rows(job: Job) -> list[dict]:
    version_id = job.spec.get("eval_dataset_version")
    if not version_id:
        return []
    version = DatasetVersion.objects.filter(pk=version_id).first()
    if version is None:  # deleted before versions in use were protected: say so, not DoesNotExist
        job_inputs_check(job=job)
    return read_rows(version.rows_path)


def main() -> None:
    job_id = int(sys.argv[1])
    watch_parent(os.getppid())
    try:
        run(job_id)
    except Exception as exc:
        traceback.print_exc()
        # A user's mistake (e.g. inputs deleted) reads as its plain message; anything else names its type.
        message = str(exc) if isinstance(exc, InputError) else f"{type(exc).__name__}: {exc}"
        (job_workdir(job_id) / "error.txt").write_text(message)
        sys.exit(1)


if __name__ == "__main__":
    main()
