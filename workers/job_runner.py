"""Run one attempt of a training job in a child process and watch it: heartbeats, cancel, pause, the budget
and time limit, crashes.

The child gets its own process group, so cancel kills every process it started (tokenizer threads, sandbox
helpers) with one signal. Cancel and pause are requested through the database, so they work from any host.
How an attempt ends (anneal.training.state):

- exit 0: succeeded, or paused / stopped when the child checkpointed and stopped early because it was asked;
- killed by a signal the worker did not send (SIGKILL, the OOM killer): requeued, and the next attempt resumes
  from the latest trainer checkpoint in the job's workdir; after settings.JOB_MAX_RESTARTS restarts it fails;
  the reason says memory, with the process's peak, where the kernel's OOM killer ran (workers.oom);
- any other exit: failed, with the child's error;
- the database unreachable (a restart, a failover): this process keeps watching and the child waits for it
  (workers.db_outage), up to settings.DB_OUTAGE_S;
- the worker is lost: Celery's prefork pool kills this process with its parent (PDEATHSIG), the child sees
  its parent gone within a second and kills itself and its process group (workers.parent_watch; JobControl's
  "abandon" at a step end is the slower path), the heartbeats stop and beat's reaper requeues the job. Where this process outlives the worker above it (no PDEATHSIG), it requeues the job itself.
"""

import json
import logging
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

from django.conf import settings
from django.db import InterfaceError, OperationalError, close_old_connections, connections

from anneal.training.models import TERMINAL_STATES, Job, JobState
from anneal.training.services import job_claim
from anneal.training.state import attempt_end, job_child_started, job_heartbeat, job_limits_enforce
from gpu_jobs.control import latest_checkpoint
from workers.db_outage import through_outage
from workers.oom import killed_reason, oom_kill_count, peak_rss

logger = logging.getLogger(__name__)
POLL_S = 1.0
HEARTBEAT_S = 5.0
ROOT = Path(__file__).resolve().parents[1]


def job_workdir(job_id: int) -> Path:
    return settings.DATA_DIR / "runs" / f"job-{job_id}"


def trainer_checkpoint_dir(job_id: int) -> Path:
    """Where the trainer keeps its full checkpoints: job_child's output_dir / "trainer" (see gpu_jobs.grpo)."""
    return job_workdir(job_id) / "trainer" / "trainer"


def _error_summary(workdir: Path, log_path: Path, returncode: int) -> str:
    error_file = workdir / "error.txt"
    if error_file.exists():
        return error_file.read_text()[-4000:]
    tail = log_path.read_text(errors="replace")[-2000:] if log_path.exists() else ""
    if returncode < 0:
        return f"the training process was killed by signal {signal.Signals(-returncode).name}\n{tail}".strip()
    return f"the training process exited with status {returncode}\n{tail}".strip()


def _kill(child: subprocess.Popen) -> None:
    try:
        os.killpg(child.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    child.wait()


def job_run_supervised(*, job_id: int) -> str:
    """Run one attempt; returns the state it ended the job in ("not claimed", "superseded" if it did not)."""
    state = _run_attempt(job_id=job_id)
    if state in TERMINAL_STATES:
        # Nothing resumes a finished job: its trainer checkpoints (optimiser state: large) can go; the model
        # checkpoints stay in the checkpoint store.
        shutil.rmtree(trainer_checkpoint_dir(job_id), ignore_errors=True)
    return state


def _run_attempt(*, job_id: int) -> str:
    worker = f"{socket.gethostname()}:{os.getpid()}"
    workdir = job_workdir(job_id)
    resume = latest_checkpoint(trainer_checkpoint_dir(job_id))
    attempt = job_claim(job_id=job_id, worker=worker, resume_step=resume[1] if resume else None)
    if not attempt:
        return "not claimed"
    workdir.mkdir(parents=True, exist_ok=True)
    (workdir / "error.txt").unlink(missing_ok=True)
    outcome_path = workdir / "outcome.json"
    outcome_path.unlink(missing_ok=True)
    log_path = workdir / "child.log"
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(ROOT / "platform"), str(ROOT)]),
        "ANNEAL_JOB_ATTEMPT": str(attempt),
    }
    oom_kills_before = oom_kill_count()
    with log_path.open("ab") as log:
        log.write(f"--- attempt {attempt} on {worker}\n".encode())
        log.flush()
        child = subprocess.Popen(
            [sys.executable, "-m", "workers.job_child", str(job_id)],
            cwd=ROOT,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    job_child_started(job_id=job_id, attempt=attempt, pid=child.pid)
    parent = os.getppid()
    last_beat = time.monotonic()
    asked_at: float | None = None  # when the job was asked to pause or stop
    killed_after_grace = False
    peak: int | None = None  # the child's peak resident memory, read while it runs (gone once it died)
    while True:
        try:
            returncode = child.wait(timeout=POLL_S)
            break
        except subprocess.TimeoutExpired:
            peak = peak_rss(child.pid) or peak
        try:
            close_old_connections()
            row = Job.objects.filter(pk=job_id).values_list("state", "attempt").first()
            if row is None or row[1] != attempt:
                # The job was deleted, or requeued as presumed dead and taken by another attempt: leave it be.
                _kill(child)
                return "superseded"
            state = row[0]
            if state == JobState.CANCELLING:
                _kill(child)
                return attempt_end(job_id=job_id, attempt=attempt, state=JobState.CANCELLED)
            if os.getppid() != parent:
                _kill(child)
                return attempt_end(
                    job_id=job_id,
                    attempt=attempt,
                    state=JobState.QUEUED,
                    reason=f"the worker process above {worker} was lost",
                )
            if state == JobState.RUNNING:
                job_limits_enforce(job_id=job_id)
            elif state in (JobState.PAUSING, JobState.STOPPING):
                asked_at = asked_at or time.monotonic()
                if time.monotonic() - asked_at > settings.JOB_STOP_GRACE_S:
                    # No step boundary came in time: it pauses or stops from its latest checkpoint instead.
                    _kill(child)
                    killed_after_grace = True
                    returncode = child.returncode
                    break
            if time.monotonic() - last_beat >= HEARTBEAT_S:
                job_heartbeat(job_id=job_id, attempt=attempt)
                last_beat = time.monotonic()
        except (OperationalError, InterfaceError) as exc:
            # The database is restarting or failing over: the child waits for it too (workers.db_outage), so
            # keep watching; cancel, pause and heartbeats resume with the database.
            logger.warning(
                "job %s: database unreachable while watching the training process (%s)", job_id, exc
            )
            connections.close_all()
    _kill_group_leftovers(child.pid)
    killed = ""
    if returncode < 0:
        killed = killed_reason(signal.Signals(-returncode).name, oom_kills_before=oom_kills_before, peak=peak)
    return through_outage(
        lambda: _end(
            job_id=job_id,
            attempt=attempt,
            returncode=returncode,
            killed_after_grace=killed_after_grace,
            killed=killed,
        ),
        what="ending the attempt",
    )


def _end(
    *,
    job_id: int,
    attempt: int,
    returncode: int,
    killed_after_grace: bool,
    killed: str,
) -> str:
    """``killed``: why the process died of a signal, where it did (workers.oom: memory when the OOM killer ran)."""
    close_old_connections()
    workdir = job_workdir(job_id)
    job = Job.objects.filter(pk=job_id).only("state", "attempt", "reason").first()
    if job is None or job.attempt != attempt:
        return "superseded"
    outcome = {}
    if (workdir / "outcome.json").exists():
        try:
            outcome = json.loads((workdir / "outcome.json").read_text())
        except ValueError:
            outcome = {}
    if job.state == JobState.CANCELLING:
        return attempt_end(job_id=job_id, attempt=attempt, state=JobState.CANCELLED)
    wanted = {JobState.PAUSING: JobState.PAUSED, JobState.STOPPING: JobState.STOPPED}.get(job.state)
    if returncode == 0:
        stopped_for = outcome.get("stopped_for")
        if stopped_for in ("pause", "stop") and wanted:
            return attempt_end(job_id=job_id, attempt=attempt, state=wanted, reason=job.reason)
        return attempt_end(job_id=job_id, attempt=attempt, state=JobState.SUCCEEDED)
    if killed_after_grace and wanted:
        reason = f"{job.reason} (it did not checkpoint within {settings.JOB_STOP_GRACE_S} s and was killed)"
        return attempt_end(job_id=job_id, attempt=attempt, state=wanted, reason=reason)
    log_path = workdir / "child.log"
    if returncode < 0:
        if wanted:  # killed while asked to pause or stop: it ends so, from the latest checkpoint
            return attempt_end(job_id=job_id, attempt=attempt, state=wanted, reason=job.reason)
        return attempt_end(
            job_id=job_id,
            attempt=attempt,
            state=JobState.QUEUED,
            reason=f"{killed}; restarting from the latest checkpoint",
        )
    return attempt_end(
        job_id=job_id,
        attempt=attempt,
        state=JobState.FAILED,
        error=_error_summary(workdir, log_path, returncode),
    )


def _kill_group_leftovers(pgid: int) -> None:
    # The child has exited; anything it left running in its group must not outlive the job.
    try:
        os.killpg(pgid, signal.SIGKILL)
    except ProcessLookupError:
        pass
