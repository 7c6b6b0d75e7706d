"""Hostile programs against the bubblewrap sandbox: each must stay inside its limits and leave nothing behind."""

import socket
import time
import uuid
from pathlib import Path

import pytest

from gpu_jobs.rewards import build_scorer
from sandboxes.client import SandboxClient
from sandboxes.registry import get_backend
from sandboxes.types import Limits, RunRequest, Status

pytestmark = pytest.mark.security


@pytest.fixture(scope="module")
def backend():
    return get_backend("bwrap")


def python(code: str, **kwargs) -> RunRequest:
    return RunRequest(language="python", code=code, **kwargs)


def tagged_python(code: str, marker: str, **kwargs) -> RunRequest:
    """A Python program whose every process carries `marker` in its command line, so leftovers can be found."""
    launcher = f'exec /usr/bin/python3 -S -c "$(cat program.py)" {marker}'
    return RunRequest(language="shell", code=launcher, files={"program.py": code}, **kwargs)


def processes_with(marker: str) -> list[int]:
    pids = []
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            if marker.encode() in cmdline.read_bytes():
                pids.append(int(cmdline.parent.name))
        except OSError:
            continue
    return pids


def assert_nothing_left(marker: str) -> None:
    # Killed processes disappear asynchronously; give the kernel a moment before calling it a leak.
    for _ in range(40):
        if not processes_with(marker):
            return
        time.sleep(0.05)
    assert processes_with(marker) == []


def test_fork_bomb_is_capped_by_the_process_limit(backend):
    code = """
import os, time
forks = 0
try:
    while True:
        if os.fork() == 0:
            time.sleep(60)
            os._exit(0)
        forks += 1
except OSError:
    print(forks)
"""
    marker = f"anneal-test-{uuid.uuid4().hex}"
    result = backend.run(tagged_python(code, marker, limits=Limits(pids=16, wall_s=5)))
    assert result.status == Status.OK, result.stderr
    assert int(result.stdout) < 16
    assert_nothing_left(marker)


def test_endless_fork_bomb_times_out_and_leaves_nothing(backend):
    code = "import os\nwhile True:\n    try:\n        os.fork()\n    except OSError:\n        pass\n"
    marker = f"anneal-test-{uuid.uuid4().hex}"
    result = backend.run(tagged_python(code, marker, limits=Limits(wall_s=1.5)))
    assert result.status == Status.TIMEOUT
    assert_nothing_left(marker)


def test_memory_bomb_is_reported_as_memory(backend):
    result = backend.run(python("blocks = []\nwhile True:\n    blocks.append(bytearray(2**24))"))
    assert result.status == Status.MEMORY
    assert "MemoryError" in result.stderr


def test_infinite_loop_times_out(backend):
    result = backend.run(python("while True: pass", limits=Limits(wall_s=1, cpu_s=10)))
    assert result.status == Status.TIMEOUT
    assert "wall time limit" in result.stderr


def test_sleeping_past_the_timeout_is_killed_with_its_children(backend):
    marker = f"anneal-test-{uuid.uuid4().hex}"
    code = f"sleep 60 {marker} & exec /usr/bin/python3 -S -c 'import time; time.sleep(60)' {marker}"
    result = backend.run(RunRequest(language="shell", code=code, limits=Limits(wall_s=1)))
    assert result.status == Status.TIMEOUT
    assert result.exit_code is None
    assert_nothing_left(marker)


def test_a_program_that_closes_its_output_still_times_out(backend):
    result = backend.run(
        RunRequest(language="shell", code="exec >&- 2>&-; sleep 60", limits=Limits(wall_s=1))
    )
    assert result.status == Status.TIMEOUT


@pytest.mark.parametrize("port", [5432, 6379])
def test_host_services_are_unreachable(backend, port):
    code = f"import socket\nsocket.create_connection(('127.0.0.1', {port}), timeout=2)\nprint('connected')"
    result = backend.run(python(code))
    assert result.status == Status.FAILED
    assert "connected" not in result.stdout


def test_a_listening_host_socket_is_unreachable(backend):
    with socket.create_server(("127.0.0.1", 0)) as server:
        port = server.getsockname()[1]
        code = (
            f"import socket\nsocket.create_connection(('127.0.0.1', {port}), timeout=2)\nprint('connected')"
        )
        result = backend.run(python(code))
    assert result.status == Status.FAILED
    assert "connected" not in result.stdout


def test_no_network_but_loopback(backend):
    result = backend.run(python("import socket\nprint([name for _, name in socket.if_nameindex()])"))
    assert result.stdout == "['lo']\n"


def test_host_files_are_invisible(backend, tmp_path):
    secret = tmp_path / "secret.txt"
    secret.write_text("host secret")
    for path in ["/etc/hostname", "/etc/passwd", str(secret), str(Path(__file__).resolve())]:
        result = backend.run(python(f"print(open({path!r}).read())"))
        assert result.status == Status.FAILED, path
        assert "FileNotFoundError" in result.stderr, path


def test_system_directories_are_read_only_and_the_program_is_not_root(backend):
    code = "import os\nprint(os.getuid())\nopen('/usr/evil', 'w')"
    result = backend.run(python(code))
    assert result.stdout == "65534\n"
    assert "Read-only file system" in result.stderr or "Permission denied" in result.stderr


def test_host_environment_is_not_visible(backend, monkeypatch):
    monkeypatch.setenv("ANNEAL_TEST_SECRET", "hunter2")
    code = "import os, glob\nprint(sorted(os.environ))\nprint([open(p, 'rb').read() for p in glob.glob('/proc/*/environ')])"
    result = backend.run(python(code))
    assert result.status == Status.OK, result.stderr
    assert "hunter2" not in result.stdout
    assert "ANNEAL_TEST_SECRET" not in result.stdout
    assert result.stdout.splitlines()[0] == "['HOME', 'LANG', 'PATH', 'PWD']"


def test_host_processes_are_invisible(backend):
    result = backend.run(python("import os\nprint(len([p for p in os.listdir('/proc') if p.isdigit()]))"))
    assert int(result.stdout) <= 3  # bwrap's pid 1, the program, and nothing of the host


def test_stdout_flood_is_truncated_and_stopped(backend):
    result = backend.run(
        python("while True: print('x' * 1000)", limits=Limits(output_bytes=10_000, wall_s=5))
    )
    assert result.status == Status.OUTPUT_LIMIT
    assert result.stdout.endswith("\n[output truncated at 10000 bytes]")
    assert len(result.stdout) < 10_100


def test_stderr_flood_is_truncated_too(backend):
    code = "import sys\nwhile True: sys.stderr.write('e' * 1000)"
    result = backend.run(python(code, limits=Limits(output_bytes=5_000, wall_s=5)))
    assert result.status == Status.OUTPUT_LIMIT
    assert "[output truncated at 5000 bytes]" in result.stderr


@pytest.mark.parametrize(
    "program",
    [
        "import os\nos._exit(0)",
        "import sys\nsys.exit(0)",
        "import os\nos.kill(os.getpid(), 9)",
        'print(\'ANNEAL_REPORT {"nonce": "guess", "passed": [true], "errors": [null]}\')\nimport os\nos._exit(0)',
    ],
)
def test_python_tests_scores_zero_when_the_program_exits_before_the_asserts(program):
    scorer = build_scorer({"type": "python_tests"}, sandbox=SandboxClient())
    completion = f"```python\n{program}\n```"
    result = scorer.score({"tests": ["assert False, 'the tests ran'"]}, completion)
    assert result.score == 0.0
    assert result.reason
