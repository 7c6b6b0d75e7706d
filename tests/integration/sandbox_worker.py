"""A real Celery sandbox worker (the project's app, workers.celery_app) on a queue of its own, for the tests
that kill or cut off a sandbox host."""

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


class Worker:
    def __init__(self, *, name: str, queue: str, redis_url: str, log: Path, pool: str = "solo") -> None:
        env = {
            **os.environ,
            "PYTHONPATH": os.pathsep.join([str(ROOT / "platform"), str(ROOT)]),
            "REDIS_URL": redis_url,
            "ANNEAL_SANDBOX_POOL_SIZE": "2",
        }
        self.name = name
        self.log = log
        self._log_file = log.open("wb")
        # solo (the default): the worker process runs the batch itself, so SIGKILL takes the whole "host"
        # down; prefork runs it in a child, as production's sandbox hosts do.
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "celery", "-A", "workers.celery_app", "worker", "-Q", queue, "-n",
             f"{name}@%h", "-P", pool, "-c", "2" if pool == "prefork" else "1", "--without-gossip", "--without-mingle", "--loglevel", "INFO"],
            cwd=ROOT, env=env, stdout=self._log_file, stderr=subprocess.STDOUT, start_new_session=True,
        )  # fmt: skip

    def wait_ready(self, timeout_s: float = 60) -> None:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"{self.name} exited:\n{self.log.read_text()[-3000:]}")
            if "ready." in self.log.read_text(errors="replace"):
                return
            time.sleep(0.2)
        raise RuntimeError(f"{self.name} did not start:\n{self.log.read_text()[-3000:]}")

    def stop(self) -> None:
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc.wait()
        self._log_file.close()
