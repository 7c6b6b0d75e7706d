"""A training process whose worker is lost stops at once, with what it started, not at its next step end."""

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
# The training process: a helper of its own (a sandbox, say), then a "step" far longer than the test waits.
CHILD = (
    "import os, subprocess, sys, time\n"
    "from workers.parent_watch import watch_parent\n"
    "helper = subprocess.Popen(['sleep', '120'])\n"
    "print(os.getpid(), helper.pid, flush=True)\n"
    "watch_parent(os.getppid(), every_s=0.1)\n"
    "time.sleep(120)\n"
)
# The job runner: starts it in a session of its own (as workers.job_runner does), passes its pids on, waits.
RUNNER = (
    "import subprocess, sys\n"
    "child = subprocess.Popen([sys.executable, '-c', sys.argv[1]], stdout=subprocess.PIPE, text=True, "
    "start_new_session=True)\n"
    "print(child.stdout.readline(), end='', flush=True)\n"
    "child.wait()\n"
)


def alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, ProcessLookupError):
        return False
    return state not in ("Z", "X")  # a zombie has stopped; only its exit status is left to collect


def test_the_training_process_and_its_helpers_stop_within_a_second_of_losing_the_worker():
    runner = subprocess.Popen(
        [sys.executable, "-c", RUNNER, CHILD], cwd=ROOT, stdout=subprocess.PIPE, text=True
    )
    child, helper = (int(pid) for pid in runner.stdout.readline().split())
    try:
        time.sleep(0.5)
        assert alive(child) and alive(helper)  # the watch leaves a running job alone
        os.kill(runner.pid, signal.SIGKILL)
        runner.wait()
        deadline = time.monotonic() + 5
        while (alive(child) or alive(helper)) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not alive(child) and not alive(helper)
    finally:
        for pid in (child, helper):
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
