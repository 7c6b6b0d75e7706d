"""The bubblewrap backend running real programs: what a caller of the sandbox sees."""

import json

import pytest

from sandboxes.backends.bwrap import BwrapBackend
from sandboxes.client import SandboxClient
from sandboxes.registry import BACKEND_NAMES, get_backend
from sandboxes.service import run_many_dicts
from sandboxes.types import Limits, RunRequest, RunResult, Status


@pytest.fixture(scope="module")
def backend():
    return get_backend("bwrap")


def python(code: str, **kwargs) -> RunRequest:
    return RunRequest(language="python", code=code, **kwargs)


def test_python_program_runs_and_prints(backend):
    result = backend.run(python("print(6 * 7)"))
    assert (result.status, result.exit_code, result.stdout) == (Status.OK, 0, "42\n")
    assert result.duration_s > 0


def test_stdin_and_files_reach_the_program(backend):
    request = python(
        "import helper\nprint(helper.GREETING, input(), open('data/deep/values.txt').read())",
        stdin="from stdin\n",
        files={"helper.py": "GREETING = 'hello'", "data/deep/values.txt": "1 2 3"},
    )
    result = backend.run(request)
    assert result.status == Status.OK, result.stderr
    assert result.stdout == "hello from stdin 1 2 3\n"


def test_nonzero_exit_is_failed_with_its_stderr(backend):
    result = backend.run(python("raise ValueError('bad input')"))
    assert (result.status, result.exit_code) == (Status.FAILED, 1)
    assert "ValueError: bad input" in result.stderr


def test_shell_program(backend):
    result = backend.run(RunRequest(language="shell", code='read x; echo "got $x"; exit 3', stdin="7\n"))
    assert (result.status, result.exit_code, result.stdout) == (Status.FAILED, 3, "got 7\n")


def test_only_the_standard_library_is_importable(backend):
    code = """
import json, sys
print(json.dumps([p for p in sys.path if "packages" in p]))
for name in ("pytest", "django", "sandboxes", "gpu_jobs"):
    try:
        __import__(name)
        print("imported", name)
    except ImportError:
        pass
"""
    result = backend.run(python(code))
    assert result.status == Status.OK, result.stderr
    assert result.stdout == "[]\n"


def test_run_many_keeps_the_order_of_requests(backend):
    requests = [
        python(f"import time; time.sleep({delay}); print({i})") for i, delay in enumerate([0.4, 0, 0.2, 0])
    ]
    results = backend.run_many(requests)
    assert [r.stdout for r in results] == ["0\n", "1\n", "2\n", "3\n"]


def test_writes_past_the_tmpfs_size_fail(backend):
    code = "open('big', 'wb').write(b'x' * 3 * 2**20)"
    result = backend.run(python(code, limits=Limits(tmpfs_mb=2, file_size_mb=8)))
    assert result.status == Status.FAILED
    assert "No space left on device" in result.stderr


def test_a_file_past_the_file_size_limit_fails(backend):
    result = backend.run(python("open('big', 'wb').write(b'x' * 2 * 2**20)", limits=Limits(file_size_mb=1)))
    assert result.status == Status.FAILED
    assert "File too large" in result.stderr


def test_cpu_time_limit_is_a_timeout(backend):
    result = backend.run(python("while True: pass", limits=Limits(cpu_s=1, wall_s=10)))
    assert result.status == Status.TIMEOUT
    assert "CPU time limit" in result.stderr


def test_missing_bwrap_is_a_sandbox_error():
    result = BwrapBackend(bwrap_path="/nonexistent/bwrap").run(python("print(1)"))
    assert (result.status, result.exit_code) == (Status.SANDBOX_ERROR, None)
    assert "bubblewrap" in result.stderr


def test_missing_interpreter_is_a_sandbox_error():
    result = BwrapBackend(python_path="/usr/bin/no-such-python").run(python("print(1)"))
    assert result.status == Status.SANDBOX_ERROR
    assert "python3-minimal" in result.stderr


def test_bwrap_failing_to_set_up_is_a_sandbox_error(backend):
    # A tmpfs too small to hold the program's own file: bwrap fails before the program starts.
    result = backend.run(python("print(1)", files={"pad.txt": "x" * 2 * 2**20}, limits=Limits(tmpfs_mb=1)))
    assert result.status == Status.SANDBOX_ERROR
    assert result.exit_code is None


def test_files_may_not_replace_the_program(backend):
    result = backend.run(python("print(1)", files={"main.py": "print(2)"}))
    assert result.status == Status.SANDBOX_ERROR
    assert "main.py" in result.stderr


@pytest.mark.parametrize("name", ["/etc/passwd", "../escape.txt", "a/../../b", ""])
def test_file_names_outside_the_working_directory_are_refused(name):
    with pytest.raises(ValueError, match="relative path"):
        python("print(1)", files={name: "x"})


def test_unknown_language_is_refused():
    with pytest.raises(ValueError, match="python, shell"):
        RunRequest(language="ruby", code="puts 1")


def test_requests_and_results_survive_json():
    request = python("print(1)", stdin="x", files={"a.txt": "b"}, limits=Limits(wall_s=2.5, pids=8))
    assert RunRequest.from_dict(json.loads(json.dumps(request.to_dict()))) == request
    result = RunResult(Status.TIMEOUT, None, "out", "err", 1.5)
    assert RunResult.from_dict(json.loads(json.dumps(result.to_dict()))) == result


def test_health_says_how_processes_are_capped(backend):
    health = backend.health()
    assert health["ok"] is True
    assert health["backend"] == "bwrap"
    assert "processes capped by" in health["detail"]
    assert "memory of all of a run's processes by a cgroup per sandbox" in health["detail"]


def test_unknown_backend_names_the_known_ones():
    with pytest.raises(ValueError, match="known backends: bwrap, docker"):
        get_backend("firecracker")
    assert BACKEND_NAMES[:2] == ("bwrap", "docker")


def test_service_runs_request_dicts_in_order():
    requests = [python(f"print({i})").to_dict() for i in range(3)]
    results = run_many_dicts(requests, "bwrap")
    assert [(r["status"], r["stdout"]) for r in results] == [("ok", "0\n"), ("ok", "1\n"), ("ok", "2\n")]
    json.dumps(results)  # the Celery result backend carries them as JSON


def test_local_client_runs_on_the_named_backend():
    results = SandboxClient().run_many([python("print('a')"), RunRequest(language="shell", code="echo b")])
    assert [r.stdout for r in results] == ["a\n", "b\n"]


def test_remote_client_needs_broker_and_result_backend():
    with pytest.raises(ValueError, match="broker_url"):
        SandboxClient(mode="remote")
