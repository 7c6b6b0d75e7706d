"""Start the real platform for integration and browser tests: its own PostgreSQL database, Daphne serving
the ASGI app, and separate Celery workers for the default, gpu and sandbox queues, as in production."""

import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
import uuid
from collections import Counter
from pathlib import Path

import httpx
import psycopg
import redis

ROOT = Path(__file__).resolve().parents[1]
PG_ADMIN_URL = "postgresql://postgres@127.0.0.1:5432/postgres"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def jsonl(rows) -> bytes:
    return "".join(json.dumps(r) + "\n" for r in rows).encode()


def wait_for(fetch, done, *, timeout_s: float, what: str = "the condition"):
    """Call ``fetch`` every 0.5 s until ``done`` holds for its value (returned); AssertionError after ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    value = None
    while time.monotonic() < deadline:
        value = fetch()
        if done(value):
            return value
        time.sleep(0.5)
    raise AssertionError(f"timed out after {timeout_s} s waiting for {what}; last: {value}")


def all_events(api, job_id: int, *, page_size: int = 500) -> list[dict]:
    """Every event of a job, through the paged events API."""
    events, after = [], 0
    while True:
        page = api.get(f"/jobs/{job_id}/events", params={"after": after, "limit": page_size}).json()[
            "results"
        ]
        if not page:
            return events
        events.extend(page)
        after = page[-1]["seq"]


def assert_each_step_once(events: list[dict], job: dict, *, rollouts_per_step: int) -> None:
    """Seqs 1..last_seq with no gap or repeat; every step's training metrics once, and each step's rollouts
    ``rollouts_per_step`` times: what a job that was interrupted (and resumed, or waited) must still show."""
    assert [e["seq"] for e in events] == list(range(1, job["last_seq"] + 1))
    steps = [
        e["payload"]["step"]
        for e in events
        if e["kind"] == "metric" and not any(k.startswith("eval/") for k in e["payload"])
    ]
    assert steps == list(range(1, job["max_steps"] + 1)), steps
    rollouts = Counter(e["payload"]["step"] for e in events if e["kind"] == "rollout")
    assert set(rollouts.values()) == {rollouts_per_step}, rollouts


def claim_redis_db() -> str:
    """A Redis database of its own for this stack: Celery queue names are fixed, so two stacks sharing one
    database (two test runs at once) would take each other's tasks. The claim expires with the run."""
    for db in range(10, 16):
        client = redis.Redis.from_url(f"redis://127.0.0.1:6379/{db}")
        if client.set("anneal-stack-claim", os.getpid(), nx=True, ex=3600):
            return f"redis://127.0.0.1:6379/{db}"
    raise RuntimeError("Redis databases 10-15 are all claimed by running test stacks")


def exit_on_sigterm(signum: int, frame: object) -> None:
    raise SystemExit(128 + signum)


class Stack:
    """``pg_admin_url`` and ``redis_url``: servers of the caller's own (the chaos drills restart theirs); by
    default the machine's, with a database of the stack's own on each. ``sandbox_hosts``: sandbox workers,
    each a host of its own to the fleet. ``beat``: Celery beat too (the reapers and the dispatch safety net)."""

    def __init__(
        self,
        workdir: Path,
        *,
        pg_admin_url: str = PG_ADMIN_URL,
        redis_url: str | None = None,
        sandbox_hosts: int = 1,
        beat: bool = False,
        extra_env: dict[str, str] | None = None,
    ) -> None:
        self.workdir = workdir
        self.db_name = f"anneal_stack_{uuid.uuid4().hex[:8]}"
        self.pg_admin_url = pg_admin_url
        self.database_url = pg_admin_url.rsplit("/", 1)[0] + f"/{self.db_name}"
        self.sandbox_hosts = sandbox_hosts
        self.beat = beat
        self.port = free_port()
        self.base_url = f"http://127.0.0.1:{self.port}"
        self.processes: dict[str, subprocess.Popen] = {}
        self.commands: dict[str, list[str]] = {}
        redis_url = redis_url or os.environ.get("ANNEAL_STACK_REDIS_URL") or claim_redis_db()
        self.env = {
            **os.environ,
            "PYTHONPATH": os.pathsep.join([str(ROOT / "platform"), str(ROOT)]),
            "DATABASE_URL": self.database_url.replace("postgresql://", "postgres://", 1),
            "REDIS_URL": redis_url,
            "ANNEAL_DATA_DIR": str(workdir / "data"),
            "ANNEAL_BASE_URL": self.base_url,
            "ANNEAL_CHANNEL_PREFIX": f"stack{self.port}",
            "SANDBOX_EXECUTION": "remote",
            "SECRET_KEY": "stack-secret-key",
            "DEBUG": "false",
            "ALLOWED_HOSTS": "127.0.0.1,localhost",
            "CSRF_TRUSTED_ORIGINS": self.base_url,
            **(extra_env or {}),
        }
        self.redis_url = redis_url

    def _spawn(self, name: str, args: list[str]) -> None:
        log = (self.workdir / f"{name}.log").open("ab")
        self.commands[name] = args
        self.processes[name] = subprocess.Popen(
            args, cwd=ROOT, env=self.env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
        )

    def kill(self, name: str, sig: int = signal.SIGKILL) -> None:
        """Signal the process and every one it started (its session's group), and wait for it."""
        proc = self.processes[name]
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            pass
        proc.wait(timeout=60)

    def respawn(self, name: str) -> None:
        """Start the process again with the command it had (a container restarted by its supervisor)."""
        self._spawn(name, self.commands[name])

    def start(self) -> None:
        if threading.current_thread() is threading.main_thread() and signal.getsignal(signal.SIGTERM) in (
            signal.SIG_DFL,
            None,
        ):
            # The services run in sessions of their own, out of reach of a SIGTERM to this process: exit through
            # the caller's `finally: stack.stop()` instead of dying with them left running (a bench stopped by
            # `kill`, a CI timeout).
            signal.signal(signal.SIGTERM, exit_on_sigterm)
        with psycopg.connect(self.pg_admin_url, autocommit=True) as conn:
            conn.execute(f'CREATE DATABASE "{self.db_name}"')
        client = redis.Redis.from_url(self.redis_url)
        claim = client.get("anneal-stack-claim")
        client.flushdb()
        if claim is not None:
            client.set("anneal-stack-claim", claim, ex=3600)
        self.manage("migrate", "--noinput")
        self.manage("collectstatic", "--noinput")
        # /healthz/detail (workers per queue, the sandbox backend) is for staff: a staff token to wait on it.
        self.ops_token = self.manage(
            "anneal_member",
            "--username=stack-operator",
            "--organisation=Stack operators",
            "--team=Operators",
            "--role=viewer",
            "--staff",
            "--token=health",
        ).splitlines()[-1]
        celery = [sys.executable, "-m", "celery", "-A", "workers.celery_app", "worker", "--loglevel", "INFO"]
        self._spawn(
            "web",
            [
                sys.executable,
                "-m",
                "daphne",
                "-b",
                "127.0.0.1",
                "-p",
                str(self.port),
                "anneal.asgi:application",
            ],
        )
        self._spawn("worker", [*celery, "-Q", "default", "-n", f"default-{self.port}@%h", "-c", "1"])
        self._spawn(
            "gpu",
            [*celery, "-Q", "gpu", "-n", f"gpu-{self.port}@%h", "-c", "1", "--prefetch-multiplier", "1"],
        )
        for host in range(self.sandbox_hosts):
            name = "sandbox" if host == 0 else f"sandbox-{host}"
            self._spawn(name, [*celery, "-Q", "sandbox", "-n", f"{name}-{self.port}@%h", "-c", "2"])
        # Long-lived replica supervisors (deployments): threads, since each only waits on its serving process.
        self._spawn(
            "serve", [*celery, "-Q", "serve", "-n", f"serve-{self.port}@%h", "-P", "threads", "-c", "8"]
        )
        if self.beat:
            schedule = str(self.workdir / "celerybeat-schedule")
            self._spawn(
                "beat", [sys.executable, "-m", "celery", "-A", "workers.celery_app", "beat", "-s", schedule]
            )
        self.wait_healthy()

    def wait_healthy(self, timeout_s: float = 120) -> dict:
        deadline = time.monotonic() + timeout_s
        last = None
        while time.monotonic() < deadline:
            for name, proc in self.processes.items():
                if proc.poll() is not None:
                    raise RuntimeError(f"{name} exited with {proc.returncode}:\n{self.log_tail(name)}")
            try:
                response = httpx.get(
                    f"{self.base_url}/healthz/detail",
                    headers={"Authorization": f"Bearer {self.ops_token}"},
                    timeout=5,
                )
                last = response.json()
                if response.status_code == 200:
                    return last
            except (httpx.HTTPError, json.JSONDecodeError) as exc:
                last = repr(exc)
            time.sleep(1)
        raise RuntimeError(
            f"the stack did not become healthy in {timeout_s} s: {last}\n{self.log_tail('web')}"
        )

    def manage(self, *args: str) -> str:
        result = subprocess.run(
            [sys.executable, "manage.py", *args], cwd=ROOT, env=self.env, capture_output=True, text=True
        )
        if result.returncode != 0:
            raise RuntimeError(f"manage.py {' '.join(args)} failed:\n{result.stdout}\n{result.stderr}")
        return result.stdout.strip()

    def member(self, username: str, *, team: str, role: str = "owner", organisation: str = "Acme") -> str:
        """Create the user with a role in the team (password = username * 2) and return a new API token."""
        return self.manage(
            "anneal_member",
            f"--username={username}",
            f"--password={username * 2}",
            f"--organisation={organisation}",
            f"--team={team}",
            f"--role={role}",
            f"--token={username}-token",
        ).splitlines()[-1]

    def client(self, token: str) -> httpx.Client:
        return httpx.Client(
            base_url=f"{self.base_url}/api/v1", headers={"Authorization": f"Bearer {token}"}, timeout=30
        )

    def log_tail(self, name: str, chars: int = 4000) -> str:
        path = self.workdir / f"{name}.log"
        return path.read_text(errors="replace")[-chars:] if path.exists() else ""

    def stop(self) -> None:
        for proc in self.processes.values():
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGTERM)
        deadline = time.monotonic() + 15
        for proc in self.processes.values():
            try:
                proc.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
        with psycopg.connect(self.pg_admin_url, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{self.db_name}" WITH (FORCE)')
        redis.Redis.from_url(self.redis_url).flushdb()  # the claim with it
