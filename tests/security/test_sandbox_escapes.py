"""Hostile programs that attack the limits: processes, memory, time, output, and the sandbox's own supervisor.

Each runs against every backend variant in conftest.py; each asserts the status a caller would see and, where
processes are involved, that none outlives the run.
"""

import uuid

import pytest

from gpu_jobs.rewards import build_scorer
from sandboxes.types import Limits, RunRequest, Status
from tests.security.hostile import BackendClient, assert_nothing_left, python, tagged_python

pytestmark = pytest.mark.security


def marker() -> str:
    return f"anneal-test-{uuid.uuid4().hex}"


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
    tag = marker()
    result = backend.run(tagged_python(code, tag, limits=Limits(pids=16, wall_s=5)))
    assert result.status == Status.OK, result.stderr
    assert int(result.stdout) < 16
    assert_nothing_left(tag)


def test_endless_fork_bomb_times_out_and_leaves_nothing(backend):
    code = "import os\nwhile True:\n    try:\n        os.fork()\n    except OSError:\n        pass\n"
    tag = marker()
    result = backend.run(tagged_python(code, tag, limits=Limits(wall_s=1.5)))
    assert result.status == Status.TIMEOUT
    assert_nothing_left(tag)


def test_thread_bomb_is_capped_too(backend):
    code = """
import threading, time
n = 0
try:
    while True:
        threading.Thread(target=time.sleep, args=(30,), daemon=True).start()
        n += 1
except RuntimeError:
    print(n)
"""
    result = backend.run(python(code, limits=Limits(pids=12)))
    assert result.status == Status.OK, result.stderr
    assert int(result.stdout) < 12


def test_memory_bomb_is_reported_as_memory(backend):
    result = backend.run(python("blocks = []\nwhile True:\n    blocks.append(bytearray(2**24))"))
    assert result.status == Status.MEMORY
    assert "MemoryError" in result.stderr


# Eight children each take 80 MB, all within their own address-space limit (128 MB): together they would
# hold 640 MB. Each reports by index once its memory is touched, then waits for the parent to count; the
# parent counts those still alive once every child has reported or died.
EIGHT_CHILDREN = """
import os, select
CHILDREN = 8
tokens_r, tokens_w = os.pipe()
release_r, release_w = os.pipe()
pidfds = {}
for index in range(CHILDREN):
    pid = os.fork()
    if pid == 0:
        held = b"x" * (80 << 20)
        os.write(tokens_w, bytes([index]))
        os.read(release_r, 1)
        os._exit(0)
    pidfds[os.pidfd_open(pid)] = index
os.close(tokens_w)
reported, dead = set(), set()
while len(reported | dead) < CHILDREN:
    ready, _, _ = select.select([tokens_r, *pidfds], [], [])
    for fd in ready:
        if fd == tokens_r:
            reported.update(os.read(tokens_r, CHILDREN))
        else:
            dead.add(pidfds.pop(fd))
dead.update(pidfds[fd] for fd in select.select(list(pidfds), [], [], 0)[0])
print("holding", len(reported - dead), "of", CHILDREN, flush=True)
os.close(release_w)
"""


def test_eight_children_together_cannot_pass_the_memory_limit(backend):
    tag = marker()
    result = backend.run(tagged_python(EIGHT_CHILDREN, tag, limits=Limits(memory_mb=128, wall_s=20)))
    # The kernel killed processes of the run (children, or the parent) for passing the run's memory cap.
    assert result.status == Status.MEMORY, (result.stdout, result.stderr)
    assert "memory limit" in result.stderr
    if result.stdout:  # the parent survived to count: at most two 80 MB children fit under the cap at once
        holding = int(result.stdout.split()[1])
        assert holding <= 2, result.stdout
    assert_nothing_left(tag)
    assert backend.run(python("print('next')")).stdout == "next\n"


def test_a_run_under_its_memory_limit_is_untouched(backend):
    # Four 40 MB children (160 MB together) under a 256 MB limit: the cap is on the run, not tighter.
    code = EIGHT_CHILDREN.replace("CHILDREN = 8", "CHILDREN = 4").replace("80 << 20", "40 << 20")
    result = backend.run(python(code, limits=Limits(memory_mb=256, wall_s=20)))
    assert (result.status, result.stdout) == (Status.OK, "holding 4 of 4\n"), result.stderr


def test_infinite_loop_that_ignores_signals_times_out(backend):
    code = "import signal\nfor s in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGXCPU):\n    signal.signal(s, signal.SIG_IGN)\nwhile True: pass"
    result = backend.run(python(code, limits=Limits(wall_s=1, cpu_s=10)))
    assert result.status == Status.TIMEOUT
    assert "wall time limit" in result.stderr


def test_cpu_time_runs_out_even_when_sigxcpu_is_ignored(backend):
    code = "import signal\nsignal.signal(signal.SIGXCPU, signal.SIG_IGN)\nwhile True: pass"
    result = backend.run(python(code, limits=Limits(cpu_s=1, wall_s=10)))
    # The hard CPU limit (a second later) is a SIGKILL: a failure with no report, never a pass.
    assert result.status in (Status.TIMEOUT, Status.FAILED)
    assert result.status != Status.OK


def test_sleeping_past_the_timeout_is_killed_with_its_children(backend):
    tag = marker()
    code = f"sleep 60 {tag} & exec /usr/bin/python3 -S -c 'import time; time.sleep(60)' {tag}"
    result = backend.run(RunRequest(language="shell", code=code, limits=Limits(wall_s=1)))
    assert result.status == Status.TIMEOUT
    assert result.exit_code is None
    assert_nothing_left(tag)


def test_a_program_that_closes_its_output_still_times_out(backend):
    result = backend.run(
        RunRequest(language="shell", code="exec >&- 2>&-; sleep 60", limits=Limits(wall_s=1))
    )
    assert result.status == Status.TIMEOUT


def test_a_double_forked_daemon_does_not_outlive_the_run(backend):
    code = """
import os, time
if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        for fd in (0, 1, 2):
            os.close(fd)
        time.sleep(60)
    os._exit(0)
print("parent done")
"""
    tag = marker()
    result = backend.run(tagged_python(code, tag))
    assert (result.status, result.stdout) == (Status.OK, "parent done\n"), result.stderr
    assert_nothing_left(tag)


def test_a_daemon_cannot_reach_into_the_next_run(backend):
    planted = """
import os, time
if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        time.sleep(0.3)
        open('/tmp/work/planted.txt', 'w').write('from the daemon')
    os._exit(0)
"""
    assert backend.run(python(planted)).status == Status.OK
    check = "import os, time\ntime.sleep(0.8)\nprint(sorted(os.listdir('/tmp/work')))"
    result = backend.run(python(check))
    assert result.stdout == "['main.py']\n", result.stderr


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


def test_a_flooding_shell_pipeline_is_stopped(backend):
    result = backend.run(RunRequest(language="shell", code="yes | cat", limits=Limits(output_bytes=4_000)))
    assert result.status == Status.OUTPUT_LIMIT


def test_ptrace_reaches_nothing_that_outlives_the_run(backend):
    code = """
import ctypes, os, time
libc = ctypes.CDLL(None, use_errno=True)
for pid in sorted({1, os.getppid()} - {os.getpid()}):
    if libc.ptrace(16, pid, 0, 0) == 0:  # PTRACE_ATTACH
        print(pid, "attached")
        time.sleep(0.05)
        libc.ptrace(17, pid, 0, 0)  # PTRACE_DETACH, so the run can end normally
    else:
        print(pid, "refused")
"""
    result = backend.run(python(code))
    assert result.status == Status.OK, result.stderr
    # The seccomp filter refuses ptrace itself, so not even a cold sandbox's own pid 1 can be attached.
    assert result.stdout == "1 refused\n"
    assert backend.run(python("print('next')")).stdout == "next\n"


def test_the_supervisors_memory_and_descriptors_are_unreadable(backend):
    code = """
import os
for path in ("/proc/1/mem", "/proc/1/environ", "/proc/1/fd/0"):
    try:
        open(path, "rb").read(1)
        print("read", path)
    except OSError as exc:
        print("refused", path, type(exc).__name__)
"""
    result = backend.run(python(code))
    assert result.status == Status.OK, result.stderr
    assert "read /proc/1/mem" not in result.stdout
    if backend.pool is not None:  # the warm fork server, which serves later runs, shows nothing at all
        assert "read" not in result.stdout.split()


def test_killing_the_parent_and_pid_1_is_ignored(backend):
    code = "import os, signal\nfor pid in {1, os.getppid()}:\n    os.kill(pid, signal.SIGKILL)\nprint('still here')"
    result = backend.run(python(code))
    assert result.status == Status.OK, result.stderr
    assert result.stdout == "still here\n"
    assert backend.run(python("print('next')")).stdout == "next\n"


def test_killing_every_process_spares_only_the_caller(backend):
    tag = marker()
    code = (
        "import os, signal, time\ntry:\n    os.kill(-1, signal.SIGKILL)\nexcept ProcessLookupError:\n    pass\n"
        "time.sleep(0.1)\nprint('alive')"
    )
    result = backend.run(tagged_python(code, tag))
    assert (result.status, result.stdout) == (Status.OK, "alive\n"), result.stderr
    assert_nothing_left(tag)
    assert backend.run(python("print('next')")).stdout == "next\n"


def test_killing_its_own_process_group_is_a_failure(backend):
    result = backend.run(python("import os, signal\nos.killpg(0, signal.SIGKILL)\nprint('survived')"))
    assert result.status == Status.FAILED
    assert "survived" not in result.stdout
    assert backend.run(python("print('next')")).stdout == "next\n"


@pytest.mark.parametrize(
    "program",
    [
        "import os\nos._exit(0)",
        "import sys\nsys.exit(0)",
        "import os\nos.kill(os.getpid(), 9)",
        'print(\'ANNEAL_REPORT {"nonce": "guess", "passed": [true], "errors": [null]}\')\nimport os\nos._exit(0)',
    ],
)
def test_python_tests_scores_zero_when_the_program_exits_before_the_asserts(backend, program):
    scorer = build_scorer({"type": "python_tests"}, sandbox=BackendClient(backend))
    completion = f"```python\n{program}\n```"
    result = scorer.score({"tests": ["assert False, 'the tests ran'"]}, completion)
    assert result.score == 0.0
    assert result.reason
