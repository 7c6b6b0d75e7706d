"""The platform's side of the engine interfaces: events go to the database and the job's group."""

import functools
import os
import shutil
import subprocess
import threading
from pathlib import Path

from django.conf import settings
from django.db import connection

from anneal.training.limits import alarms_that_pause
from anneal.training.models import EventKind, Job
from anneal.training.selectors import control_action, job_rollouts
from anneal.training.state import attempt_events_record, checkpoint_record
from gpu_jobs.control import JobAbandoned
from workers.db_outage import through_outage


def _attempt_of(job_id: int) -> int:
    # The worker passes the attempt it claimed; a process started by hand writes as the job's current one.
    value = os.environ.get("ANNEAL_JOB_ATTEMPT")
    return int(value) if value else Job.objects.values_list("attempt", flat=True).get(pk=job_id)


class DjangoEventSink:
    """Writes one attempt's events (anneal.training.state explains attempts).

    - Fencing: each write first locks the job row and checks it still carries this attempt; if not (the job
      was requeued while this process still ran), it raises JobAbandoned and writes nothing.
    - A resumed attempt runs again the steps after its checkpoint that an earlier attempt already reported:
      their metric events, rollouts and evaluations (an agent job's held-out episodes among them) are
      dropped, so each step is reported once.
    - Verification time (``verify_time/*`` metrics) adds up into the job's sandbox time, which is billed.
    - An alarm the job is set to pause on (spec ``pause_on_alarms``) asks the job to pause.
    - The database unreachable (a restart, a failover): writes wait for it (workers.db_outage).
    """

    def __init__(self, *, job_id: int, attempt: int | None = None) -> None:
        self.job_id = job_id
        self.attempt = _attempt_of(job_id) if attempt is None else attempt
        self.pause_on = alarms_that_pause(Job.objects.get(pk=job_id).spec)
        self._load_reported()

    def _load_reported(self) -> None:
        """What earlier attempts (or a write whose acknowledgement an outage lost) already stored."""
        job = Job.objects.get(pk=self.job_id)
        # The last step reported by an earlier attempt (-1: none yet, so step-0 metrics such as a profile pass).
        reported = job.events.filter(kind=EventKind.METRIC).exists()
        self.metric_until = self.resumed_until = job.step if reported else -1
        training = job_rollouts(job=job, held_out=False)
        rollout = training.order_by("-seq").values_list("payload", flat=True).first()
        self.rollout_until = rollout.get("step", 0) if rollout else 0
        # An agent job's held-out evaluation episodes: reported once per evaluation step, beside the training
        # rollouts of the same step (gpu_jobs.agent.training).
        self.held_out_steps = set(
            job_rollouts(job=job, held_out=True).values_list("payload__step", flat=True)
        )
        self.checkpoint_steps = set(
            job.events.filter(kind=EventKind.CHECKPOINT).values_list("payload__step", flat=True)
        )
        self.eval_steps = set(
            job.events.filter(kind=EventKind.METRIC, payload__has_key="eval/mean").values_list(
                "payload__step", flat=True
            )
        )

    def emit(self, kind: str, payload: dict) -> None:
        self.emit_many([(kind, payload)])

    def _fresh(self, kind: str, payload: dict) -> bool:
        step = payload.get("step")
        if not isinstance(step, int):
            return True
        if kind == "rollout" and payload.get("held_out"):
            return step not in self.held_out_steps
        if kind == "rollout":
            return step > self.rollout_until
        if kind == "metric" and any(key.startswith("eval/") for key in payload):
            return step not in self.eval_steps
        if kind == "metric":
            return step > self.metric_until
        if kind == "alarm":  # raised again by the re-run of a step an earlier attempt reported
            return step > self.resumed_until
        if kind == "checkpoint":
            return step not in self.checkpoint_steps
        return True

    def emit_many(self, events: list[tuple[str, dict]]) -> None:
        def write_fresh() -> list[tuple[str, dict]]:
            fresh = [(kind, payload) for kind, payload in events if self._fresh(kind, payload)]
            if fresh:
                self._write(fresh)
            return fresh

        try:
            # A database outage is waited out; before each retry the markers are read again, so a write
            # that did commit (its acknowledgement lost with the connection) is not written twice.
            events = through_outage(write_fresh, what="writing events", before_retry=self._load_reported)
        finally:
            # Rollouts are reported from TRL's reward threads, which outlive the job in a host process (a
            # test's, or any that runs jobs in-process): their database connection would stay open, idle.
            if threading.current_thread() is not threading.main_thread():
                connection.close()
        for kind, p in events:
            step = p.get("step")
            if kind == "metric" and isinstance(step, int):
                if any(key.startswith("eval/") for key in p):
                    self.eval_steps.add(step)
                self.metric_until = max(self.metric_until, step)
            elif kind == "rollout" and isinstance(step, int) and p.get("held_out"):
                self.held_out_steps.add(step)
            elif kind == "rollout" and isinstance(step, int):
                self.rollout_until = max(self.rollout_until, step)
            elif kind == "checkpoint" and isinstance(step, int):
                self.checkpoint_steps.add(step)

    def _write(self, events: list[tuple[str, dict]]) -> None:
        """One transaction (anneal.training.state.attempt_events_record): the attempt fence, the job's step and
        sandbox time, the events, alarm pauses."""
        if not attempt_events_record(
            job_id=self.job_id, attempt=self.attempt, events=events, pause_on=self.pause_on
        ):
            raise JobAbandoned(f"job {self.job_id} has moved past attempt {self.attempt}")


class DjangoJobControl:
    """gpu_jobs.control.JobControl on the job's row: pause/stop as the worker asked, "abandon" when the job
    moved to another attempt or when the worker that started this process is gone."""

    def __init__(self, *, job_id: int, attempt: int | None = None) -> None:
        self.job_id = job_id
        self.attempt = _attempt_of(job_id) if attempt is None else attempt
        self.parent = os.getppid()

    def requested(self) -> str | None:
        if os.getppid() != self.parent:
            return "abandon"
        return through_outage(
            lambda: control_action(job_id=self.job_id, attempt=self.attempt), what="reading the job's state"
        )


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
        through_outage(
            lambda: checkpoint_record(
                job=self.job, step=step, location=str(target), code_version=code_version()
            ),
            what="recording a checkpoint",
        )
        # The name inside the checkpoint store, not the server path: it goes out in events users read.
        return str(target.relative_to(settings.CHECKPOINT_DIR))
