"""The platform's side of the engine interfaces: events go to the database and the job's group."""

import functools
import shutil
import subprocess
from pathlib import Path

from django.conf import settings
from django.db import transaction

from anneal.training.events import job_events_record
from anneal.training.models import Checkpoint, Job


class DjangoEventSink:
    def __init__(self, *, job_id: int) -> None:
        self.job_id = job_id

    def emit(self, kind: str, payload: dict) -> None:
        self.emit_many([(kind, payload)])

    def emit_many(self, events: list[tuple[str, dict]]) -> None:
        with transaction.atomic():
            steps = [p["step"] for kind, p in events if kind == "metric" and isinstance(p.get("step"), int)]
            if steps:
                Job.objects.filter(pk=self.job_id).update(step=max(steps))
            job_events_record(job_id=self.job_id, events=events)


@functools.cache
def code_version() -> str:
    try:
        out = subprocess.run(
            ["git", "describe", "--always", "--dirty"], cwd=settings.REPO_ROOT, capture_output=True, text=True
        )
        return out.stdout.strip() or "unknown"
    except OSError:
        return "unknown"


class DjangoCheckpointStore:
    def __init__(self, *, job: Job) -> None:
        self.job = job

    def save(self, *, step: int, local_dir: Path) -> str:
        target = settings.CHECKPOINT_DIR / f"job-{self.job.pk}" / f"step-{step}"
        if target.exists():
            shutil.rmtree(target)
        shutil.copytree(local_dir, target)
        lineage = {
            "base_model": self.job.spec.get("model", "tiny"),
            "dataset_version": self.job.dataset_version_id,
            "verifier_versions": [v["verifier_version"] for v in self.job.spec.get("verifiers", [])],
            "spec": self.job.spec,
            "code_version": code_version(),
        }
        Checkpoint.objects.update_or_create(
            job=self.job, step=step, defaults={"location": str(target), "lineage": lineage}
        )
        return str(target)
