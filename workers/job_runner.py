"""Run one training job in a child process and watch it: heartbeats, cancel, exit status.

The child gets its own process group, so cancel kills every process it started (tokenizer threads, sandbox
helpers) with one signal. Cancel is requested through the database, so it works from any host.
"""

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

from django.conf import settings
from django.db import close_old_connections
from django.utils import timezone

from anneal.training.models import Job, JobState
from anneal.training.services import job_claim, job_finish

POLL_S = 1.0
HEARTBEAT_S = 5.0
ROOT = Path(__file__).resolve().parents[1]


def job_workdir(job_id: int) -> Path:
    return settings.DATA_DIR / "runs" / f"job-{job_id}"


def _error_summary(workdir: Path, log_path: Path, returncode: int) -> str:
    error_file = workdir / "error.txt"
    if error_file.exists():
        return error_file.read_text()[-4000:]
    tail = log_path.read_text(errors="replace")[-2000:] if log_path.exists() else ""
    if returncode < 0:
        return f"the training process was killed by signal {signal.Signals(-returncode).name}\n{tail}".strip()
    return f"the training process exited with status {returncode}\n{tail}".strip()


def job_run_supervised(*, job_id: int) -> str:
    worker = f"{socket.gethostname()}:{os.getpid()}"
    if not job_claim(job_id=job_id, worker=worker):
        return "not claimed"
    workdir = job_workdir(job_id)
    workdir.mkdir(parents=True, exist_ok=True)
    (workdir / "error.txt").unlink(missing_ok=True)
    log_path = workdir / "child.log"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT / "platform"), str(ROOT)])}
    with log_path.open("ab") as log:
        child = subprocess.Popen(
            [sys.executable, "-m", "workers.job_child", str(job_id)],
            cwd=ROOT,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    Job.objects.filter(pk=job_id).update(child_pid=child.pid)
    last_beat = time.monotonic()
    while True:
        try:
            returncode = child.wait(timeout=POLL_S)
            break
        except subprocess.TimeoutExpired:
            pass
        close_old_connections()
        if Job.objects.filter(pk=job_id, state=JobState.CANCELLING).exists():
            os.killpg(child.pid, signal.SIGKILL)
            child.wait()
            job_finish(job_id=job_id, state=JobState.CANCELLED)
            return JobState.CANCELLED
        if time.monotonic() - last_beat >= HEARTBEAT_S:
            Job.objects.filter(pk=job_id).update(heartbeat_at=timezone.now())
            last_beat = time.monotonic()
    _kill_group_leftovers(child.pid)
    if Job.objects.filter(pk=job_id, state=JobState.CANCELLING).exists():
        job_finish(job_id=job_id, state=JobState.CANCELLED)
        return JobState.CANCELLED
    if returncode == 0:
        job_finish(job_id=job_id, state=JobState.SUCCEEDED)
        return JobState.SUCCEEDED
    job_finish(job_id=job_id, state=JobState.FAILED, error=_error_summary(workdir, log_path, returncode))
    return JobState.FAILED


def _kill_group_leftovers(pgid: int) -> None:
    # The child has exited; anything it left running in its group must not outlive the job.
    try:
        os.killpg(pgid, signal.SIGKILL)
    except ProcessLookupError:
        pass
