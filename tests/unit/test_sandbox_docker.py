"""The docker backend against Podman's Docker API (make sandbox-image): warm and cold runs, labels, reaping."""

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from sandboxes.backends.docker import LABEL, DockerBackend
from sandboxes.types import Limits, RunRequest, Status

ROOT = Path(__file__).resolve().parents[2]
PROBLEM = DockerBackend().engine_problem()
pytestmark = pytest.mark.skipif(bool(PROBLEM), reason=PROBLEM or "engine available")


def python(code: str, **kwargs) -> RunRequest:
    return RunRequest(language="python", code=code, **kwargs)


@pytest.fixture(scope="module")
def warm():
    backend = DockerBackend(pool_size=1)
    yield backend
    backend.close()


def sandbox_containers(*, pid: int) -> list:
    client = DockerBackend().client()
    return client.containers.list(all=True, filters={"label": [f"{LABEL}=1", f"{LABEL}.pid={pid}"]})


def test_warm_and_cold_containers_report_the_same(warm):
    cold = DockerBackend(pool_size=0)
    for request in [
        python("print(6 * 7)"),
        python("import sys\nprint('e', file=sys.stderr)\nsys.exit(3)"),
        python("print(input(), open('d/x.txt').read())", stdin="in\n", files={"d/x.txt": "file"}),
        RunRequest(language="shell", code="echo $(id -u) $(hostname); exit 2"),
    ]:
        a, b = cold.run(request), warm.run(request)
        assert (a.status, a.exit_code, a.stdout, a.stderr) == (b.status, b.exit_code, b.stdout, b.stderr)
    assert warm.run(python("print(1)")).duration_s < cold.run(python("print(1)")).duration_s


def test_a_run_asking_for_another_process_limit_gets_a_container_of_its_own(warm):
    code = "import os\nn = 0\ntry:\n    while True:\n        if os.fork() == 0:\n            import time; time.sleep(5); os._exit(0)\n        n += 1\nexcept OSError:\n    print(n)"
    result = warm.run(python(code, limits=Limits(pids=6)))
    assert result.status == Status.OK, result.stderr
    assert int(result.stdout) < 6


def test_a_container_is_capped_at_its_runs_memory_and_refuses_kernel_surface(warm):
    warm.run(python("print(1)"))
    (short_id,) = warm.pool.idle_pids()
    (container,) = [c for c in sandbox_containers(pid=os.getpid()) if c.short_id == short_id]
    host = container.attrs["HostConfig"]
    # The run's 256 MB, its 16 MB tmpfs and the fork server's 32 MB: all its processes together.
    assert host["Memory"] == (256 + 16 + 32) << 20
    assert host["PidsLimit"] == 64 + 1
    assert host["CapDrop"] and "no-new-privileges" in " ".join(host["SecurityOpt"])
    code = "import ctypes, os\nprint(os.readlink('/proc/self/ns/ipc'), ctypes.CDLL(None).unshare(0x10000000))"
    inside = warm.run(python(code))
    ipc, unshared = inside.stdout.split()
    assert ipc != os.readlink("/proc/self/ns/ipc")  # an IPC namespace of the container's own
    assert unshared == "-1", inside.stderr  # no nested user namespace


def test_a_run_asking_for_another_memory_limit_gets_a_container_of_its_own(warm):
    started = warm.pool.stats.warm_runs
    result = warm.run(python("print(len(b'x' * (300 << 20)))", limits=Limits(memory_mb=400)))
    assert (result.status, result.stdout) == (Status.OK, f"{300 << 20}\n"), result.stderr
    assert warm.pool.stats.warm_runs == started  # the warm container is capped at 256 MB: not used


def test_containers_are_labelled_with_their_creator(warm):
    warm.run(python("print(1)"))
    (short_id,) = warm.pool.idle_pids()
    (container,) = [c for c in sandbox_containers(pid=os.getpid()) if c.short_id == short_id]
    assert container.labels[f"{LABEL}.host"]
    assert container.labels[f"{LABEL}.start"]
    assert container.attrs["HostConfig"]["NetworkMode"] == "none"
    assert container.attrs["HostConfig"]["ReadonlyRootfs"] is True


def test_containers_end_when_their_creator_dies():
    script = (
        "from sandboxes.backends.docker import DockerBackend\n"
        "b = DockerBackend(pool_size=2)\nb.pool.warm_up()\nprint(b.pool.stats.started, flush=True)\n"
        "import time\ntime.sleep(120)"
    )
    owner = subprocess.Popen([sys.executable, "-c", script], cwd=ROOT, stdout=subprocess.PIPE, text=True)
    try:
        assert owner.stdout.readline() == "2\n"
        assert len(sandbox_containers(pid=owner.pid)) == 2
        owner.send_signal(signal.SIGKILL)
        owner.wait()
        for _ in range(100):  # each fork server sees its socket close and exits; auto-remove does the rest
            if not sandbox_containers(pid=owner.pid):
                break
            time.sleep(0.1)
        assert sandbox_containers(pid=owner.pid) == []
    finally:
        owner.kill()
        owner.stdout.close()


def test_containers_left_by_a_dead_creator_are_reaped():
    backend = DockerBackend()
    client = backend.client()
    dead = subprocess.Popen(["true"])
    dead.wait()
    labels = {
        LABEL: "1",
        f"{LABEL}.host": os.uname().nodename,
        f"{LABEL}.pid": str(dead.pid),
        f"{LABEL}.start": "1",
    }
    orphan = client.containers.create(backend.image, ["true"], labels=labels, network_mode="none")
    try:
        assert backend.reap_orphans() >= 1
        assert sandbox_containers(pid=dead.pid) == []
    finally:
        try:
            orphan.remove(force=True)
        except Exception:  # noqa: BLE001 - reaped, as expected
            pass


def test_no_engine_is_a_sandbox_error_that_says_what_to_do():
    backend = DockerBackend(base_url="unix:///nonexistent/anneal.sock")
    result = backend.run(python("print(1)"))
    assert result.status == Status.SANDBOX_ERROR
    assert "make sandbox-image" in result.stderr
    assert backend.health()["ok"] is False


def test_a_missing_image_is_named():
    backend = DockerBackend(image="localhost/anneal-no-such-image:1")
    result = backend.run(python("print(1)"))
    assert result.status == Status.SANDBOX_ERROR
    assert "anneal-no-such-image" in result.stderr


def test_health(warm):
    health = warm.health()
    assert health["ok"] is True, health
    assert health["backend"] == "docker"
