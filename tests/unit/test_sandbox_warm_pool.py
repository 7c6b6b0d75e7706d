"""The bubblewrap warm pool: fork-server sandboxes that behave like cold ones, recycle, and never outlive us."""

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from sandboxes.backends.bwrap import BwrapBackend
from sandboxes.registry import env_int
from sandboxes.types import Limits, RunRequest, Status
from tests.security.hostile import children_of

ROOT = Path(__file__).resolve().parents[2]


def python(code: str, **kwargs) -> RunRequest:
    return RunRequest(language="python", code=code, **kwargs)


@pytest.fixture(scope="module")
def cold():
    return BwrapBackend(pool_size=0)


@pytest.fixture
def warm():
    backend = BwrapBackend(pool_size=1, recycle_after=1000)
    yield backend
    backend.pool.close()


def bwrap_children_of(pid: int) -> list[int]:
    """bwrap processes whose session leader was started by `pid` (warm sandboxes run in their own session)."""
    found = []
    for status in Path("/proc").glob("[0-9]*/status"):
        try:
            fields = dict(line.split(":\t", 1) for line in status.read_text().splitlines() if ":\t" in line)
        except OSError:
            continue
        if fields.get("Name", "").strip() == "bwrap" and fields.get("PPid", "").strip() == str(pid):
            found.append(int(status.parent.name))
    return found


PROGRAMS = [
    python("print(6 * 7)"),
    python("import sys\nprint('err', file=sys.stderr)\nsys.exit(3)"),
    python("raise ValueError('bad input')"),
    python("import sys\nsys.exit('a message')"),
    python("print(input(), open('data/x.txt').read())", stdin="hello\n", files={"data/x.txt": "file"}),
    python("import os\nprint(os.getcwd(), sorted(os.environ), os.getuid(), __name__)"),
    python("import atexit\natexit.register(lambda: print('at exit'))\nprint('main')"),
    python(
        "import threading, time\nthreading.Thread(target=lambda: (time.sleep(0.1), print('thread'))).start()"
    ),
    python("import os\nos.kill(os.getpid(), 9)"),
    python("x = (1,\nprint(x"),
    python("def f():\n    return 1 / 0\n\nf()"),
    RunRequest(language="shell", code='read x; echo "got $x"; yes | head -n 2; exit 4', stdin="7\n"),
]


@pytest.mark.parametrize("request_", PROGRAMS, ids=range(len(PROGRAMS)))
def test_a_warm_run_reports_what_a_cold_run_does(cold, warm, request_):
    expected, got = cold.run(request_), warm.run(request_)
    assert (got.status, got.exit_code, got.stdout, got.stderr) == (
        expected.status,
        expected.exit_code,
        expected.stdout,
        expected.stderr,
    )


def test_each_run_gets_fresh_randomness(warm):
    values = {warm.run(python("import random\nprint(random.random())")).stdout for _ in range(3)}
    assert len(values) == 3


def test_sandboxes_are_recycled_after_n_runs():
    backend = BwrapBackend(pool_size=1, recycle_after=3)
    try:
        outputs = [backend.run(python(f"print({i})")).stdout for i in range(7)]
        assert outputs == [f"{i}\n" for i in range(7)]
        assert (backend.pool.stats.started, backend.pool.stats.recycled) == (3, 2)
    finally:
        backend.pool.close()


def test_a_run_that_had_to_be_killed_discards_its_sandbox(warm):
    assert warm.run(python("while True: pass", limits=Limits(wall_s=0.5))).status == Status.TIMEOUT
    assert warm.pool.stats.discarded == 1
    assert warm.run(python("print('next')")).stdout == "next\n"
    assert warm.pool.stats.started == 2


def test_a_sandbox_killed_while_idle_is_replaced_without_failing_a_run(warm):
    assert warm.run(python("print(1)")).status == Status.OK
    (pid,) = warm.pool.idle_pids()
    os.killpg(pid, signal.SIGKILL)
    time.sleep(0.1)
    result = warm.run(python("print(2)"))
    assert (result.status, result.stdout) == (Status.OK, "2\n"), result.stderr


def test_each_run_gets_its_own_process_limit(warm):
    code = "import os\nn = 0\ntry:\n    while True:\n        if os.fork() == 0:\n            import time; time.sleep(5); os._exit(0)\n        n += 1\nexcept OSError:\n    print(n)"
    small = warm.run(python(code, limits=Limits(pids=5)))
    large = warm.run(python(code, limits=Limits(pids=20)))
    assert int(small.stdout) < 5 <= int(large.stdout) < 20, (small, large)


def test_requests_with_another_tmpfs_size_run_cold_and_still_work(warm):
    result = warm.run(python("open('f', 'wb').write(b'x' * 3 * 2**20)", limits=Limits(tmpfs_mb=2)))
    assert "No space left on device" in result.stderr
    assert warm.pool.stats.warm_runs == 0


def test_run_many_spreads_a_batch_over_the_pool_and_keeps_order():
    backend = BwrapBackend(pool_size=2)
    try:
        results = backend.run_many([python(f"print({i})") for i in range(20)])
        assert [r.stdout for r in results] == [f"{i}\n" for i in range(20)]
        assert backend.pool.stats.started == 2
    finally:
        backend.pool.close()


def test_closing_the_pool_ends_its_sandboxes():
    backend = BwrapBackend(pool_size=2)
    backend.pool.warm_up()
    pids = backend.pool.idle_pids()
    assert len(pids) == 2 and set(pids) <= set(bwrap_children_of(os.getpid()))
    backend.pool.close()
    assert set(pids) & set(bwrap_children_of(os.getpid())) == set()


def test_sandboxes_end_when_the_process_that_made_them_dies():
    script = (
        "from sandboxes.backends.bwrap import BwrapBackend\n"
        "b = BwrapBackend(pool_size=2)\nb.pool.warm_up()\nprint('ready', flush=True)\nimport time\ntime.sleep(60)"
    )
    owner = subprocess.Popen([sys.executable, "-c", script], cwd=ROOT, stdout=subprocess.PIPE, text=True)
    try:
        assert owner.stdout.readline() == "ready\n"
        sandboxes = bwrap_children_of(owner.pid)
        assert len(sandboxes) == 2
        owner.kill()
        owner.wait()
        for _ in range(100):  # the fork servers see their sockets close and end their sandboxes
            if not any(Path(f"/proc/{pid}").exists() for pid in sandboxes):
                break
            time.sleep(0.05)
        for pid in sandboxes:  # reaped by init now that the owner is gone; a zombie would still show
            assert (
                not Path(f"/proc/{pid}").exists() or "Z" in Path(f"/proc/{pid}/stat").read_text().split()[2]
            )
    finally:
        owner.kill()
        owner.stdout.close()


def test_health_reports_the_pool(warm):
    health = warm.health()
    assert health["ok"] is True
    assert "warm pool of 1" in health["detail"]


def test_pool_settings_come_from_the_environment(monkeypatch):
    monkeypatch.setenv("ANNEAL_SANDBOX_POOL_SIZE", "lots")
    with pytest.raises(ValueError, match="ANNEAL_SANDBOX_POOL_SIZE='lots': expected a whole number >= 0"):
        env_int("ANNEAL_SANDBOX_POOL_SIZE", 2, minimum=0)
    monkeypatch.setenv("ANNEAL_SANDBOX_POOL_SIZE", "3")
    assert env_int("ANNEAL_SANDBOX_POOL_SIZE", 2, minimum=0) == 3


def test_a_pool_needs_a_size_and_a_recycle_count():
    with pytest.raises(ValueError, match="recycle_after"):
        BwrapBackend(pool_size=1, recycle_after=0)


def test_a_sandbox_that_dies_mid_run_fails_that_run_and_is_replaced(warm):
    assert warm.run(python("print(1)")).status == Status.OK
    (bwrap_pid,) = warm.pool.idle_pids()
    (server_pid,) = children_of(bwrap_pid)  # the fork server: pid 1 inside, bwrap's child outside
    killer = threading.Timer(0.5, os.kill, args=(server_pid, signal.SIGKILL))
    killer.start()
    result = warm.run(python("import time\nprint('started', flush=True)\ntime.sleep(10)"))
    killer.join()
    assert result.status == Status.FAILED
    assert "fork server died" in result.stderr
    assert warm.pool.stats.discarded == 1
    assert warm.run(python("print('next')")).stdout == "next\n"
