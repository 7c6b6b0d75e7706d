"""PostgreSQL and Redis servers of a drill's own, on free loopback ports, that the drill may restart: the
machine's shared servers (127.0.0.1:5432 and :6379) serve every other test and are never touched.

Both are configured as production runs them: Redis with its append-only file (the broker keeps queued tasks
across a restart, as docker-compose.yml sets it), PostgreSQL with its defaults bar fsync (a drill's data is
thrown away)."""

import os
import pwd
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

import psycopg
import redis

from tests.stack import free_port

PG_BIN = Path("/usr/lib/postgresql/15/bin")


def _pg_tool(name: str) -> str:
    found = PG_BIN / name
    return str(found) if found.exists() else (shutil.which(name) or name)


class PrivateRedis:
    def __init__(self, workdir: Path) -> None:
        self.dir = workdir / "redis"
        self.dir.mkdir(parents=True, exist_ok=True)
        self.port = free_port()
        self.url = f"redis://127.0.0.1:{self.port}/0"
        self.proc: subprocess.Popen | None = None

    def start(self) -> None:
        log = (self.dir / "redis.log").open("ab")
        self.proc = subprocess.Popen(
            [shutil.which("redis-server") or "redis-server", "--port", str(self.port), "--bind", "127.0.0.1",
             "--dir", str(self.dir), "--appendonly", "yes", "--save", "", "--protected-mode", "no"],
            stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
        )  # fmt: skip
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            try:
                if redis.Redis(port=self.port, socket_connect_timeout=1).ping():
                    return
            except redis.ConnectionError:
                time.sleep(0.1)
        raise RuntimeError(f"redis-server did not answer on {self.port}")

    def stop(self) -> None:
        """SHUTDOWN as a restart does it: clients are cut off, the append-only file is flushed."""
        if self.proc and self.proc.poll() is None:
            self.proc.terminate()
            self.proc.wait(timeout=30)

    def restart(self, down_s: float = 0.0) -> None:
        self.stop()
        time.sleep(down_s)
        self.start()


class PrivatePostgres:
    """A cluster of its own (initdb), run as the postgres user when this process is root (PostgreSQL refuses
    to run as root). Its folder is outside pytest's (which only root may enter), and removed by ``remove``."""

    def __init__(self) -> None:
        self.dir = Path(tempfile.mkdtemp(prefix="anneal-chaos-pg-"))
        self.port = free_port()
        self.admin_url = f"postgresql://postgres@127.0.0.1:{self.port}/postgres"
        self.as_user = ["runuser", "-u", "postgres", "--"] if os.geteuid() == 0 else []

    def _run(self, *args: str) -> None:
        result = subprocess.run([*self.as_user, *args], capture_output=True, text=True)
        if result.returncode != 0:
            raise RuntimeError(f"{' '.join(args)} failed:\n{result.stdout}\n{result.stderr}")

    def init(self) -> None:
        if self.as_user:
            entry = pwd.getpwnam("postgres")
            os.chown(self.dir, entry.pw_uid, entry.pw_gid)
        self._run(_pg_tool("initdb"), "-D", str(self.dir / "data"), "-U", "postgres", "-A", "trust")
        self.start()

    def _ctl(self, action: str, *extra: str) -> None:
        options = f"-p {self.port} -c listen_addresses=127.0.0.1 -k {self.dir} -c fsync=off"
        self._run(_pg_tool("pg_ctl"), "-D", str(self.dir / "data"), "-l", str(self.dir / "pg.log"), "-w",
                  "-o", options, action, *extra)  # fmt: skip

    def start(self) -> None:
        self._ctl("start")
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            try:
                with psycopg.connect(self.admin_url, connect_timeout=2):
                    return
            except psycopg.OperationalError:
                time.sleep(0.2)
        raise RuntimeError(f"PostgreSQL did not answer on {self.port}")

    def stop(self) -> None:
        """A fast shutdown, as a failover or a restart does it: every session is cut off mid-transaction."""
        self._ctl("stop", "-m", "fast")

    def restart(self, down_s: float = 0.0) -> None:
        self.stop()
        time.sleep(down_s)
        self.start()

    def remove(self) -> None:
        self._ctl("stop", "-m", "immediate")
        shutil.rmtree(self.dir, ignore_errors=True)
