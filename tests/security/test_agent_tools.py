"""Hostile tool calls from an agent: each stays inside its episode's sandbox session, and the episode goes on."""

import shutil
import socket
import uuid
from pathlib import Path

import pytest

from gpu_jobs.agent.episode import ScriptedPolicy, run_episode
from gpu_jobs.agent.spec import validate_environment
from gpu_jobs.agent.taskpack import pack_rows
from gpu_jobs.agent.tools import ToolCall
from tests.security.hostile import assert_nothing_left

pytestmark = [
    pytest.mark.security,
    pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap is not installed"),
]

ROW = pack_rows(limit=1)[0]  # clamp: bounds.py and its tests
SPEC = validate_environment({"max_turns": 10, "tool_timeout_s": 2, "observation_chars": 400})
FIX = ToolCall("write_file", {"path": "bounds.py", "content": ROW["solution"]["bounds.py"]})


def shell(command: str) -> ToolCall:
    return ToolCall("run_shell", {"command": command})


def python(code: str) -> ToolCall:
    return ToolCall("run_python", {"code": code})


def episode(*calls: ToolCall):
    """The hostile calls, then the real fix: the episode must still reach reward 1 afterwards."""
    result = run_episode(ROW, SPEC, ScriptedPolicy([*calls, FIX]))
    assert result.reward == 1.0, result.verdict.reason
    return result.steps


def test_a_fork_bomb_is_capped_killed_and_leaves_nothing():
    tag = f"anneal-agent-{uuid.uuid4().hex}"
    bomb = f"exec /usr/bin/python3 -S -c 'import os\nwhile True:\n    try: os.fork()\n    except OSError: pass' {tag}"
    steps = episode(shell(bomb), shell(":(){ :|:& };:"))
    assert steps[0].status in ("timeout", "failed")
    assert_nothing_left(tag)


def test_background_processes_do_not_outlive_their_call():
    tag = f"anneal-agent-{uuid.uuid4().hex}"
    steps = episode(
        shell(f"(exec -a {tag} sleep 300) & echo started"), shell("ps -e -o comm= | sort | uniq -c")
    )
    assert "started" in steps[0].observation
    assert "sleep" not in steps[1].observation
    assert_nothing_left(tag)


def test_no_network_not_even_the_host_loopback():
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.bind(("127.0.0.1", 0))
    listener.listen(1)
    listener.settimeout(0.5)
    port = listener.getsockname()[1]
    try:
        code = (
            "import socket\ntry:\n"
            f"    socket.create_connection(('127.0.0.1', {port}), timeout=1)\n    print('CONNECTED')\n"
            "except OSError as exc:\n    print('refused', exc)\n"
            "try:\n    socket.getaddrinfo('pypi.org', 443)\n    print('RESOLVED')\nexcept OSError as exc:\n"
            "    print('no dns', exc)\n"
        )
        steps = episode(python(code))
        assert "CONNECTED" not in steps[0].observation and "RESOLVED" not in steps[0].observation
        with pytest.raises(TimeoutError):
            listener.accept()
    finally:
        listener.close()


def test_host_files_cannot_be_read():
    secret = Path("/etc/passwd").read_text().splitlines()[0]
    steps = episode(
        ToolCall("read_file", {"path": "/etc/passwd"}),
        ToolCall("read_file", {"path": "../../etc/passwd"}),
        shell("ln -s /etc/passwd link; cat link; cat /etc/passwd; ls /work /root /home 2>&1"),
        ToolCall("read_file", {"path": "link"}),
        python("print(open('/proc/1/environ').read())"),
    )
    assert "must be relative" in steps[0].observation and "must be relative" in steps[1].observation
    for step in steps[:5]:
        assert secret not in step.observation
        assert "anneal" not in step.observation.lower() or step.status != "ok"


def test_writes_outside_the_sandbox_never_reach_the_host():
    host_path = Path(f"/tmp/anneal-agent-escape-{uuid.uuid4().hex}")
    steps = episode(
        ToolCall("write_file", {"path": "../escape.txt", "content": "x"}),
        shell(f"echo pwned > {host_path}; echo pwned > /usr/pwned; echo $?"),
        python(f"open('{host_path}', 'w').write('pwned')"),
    )
    assert "must be relative" in steps[0].observation
    assert "Read-only file system" in steps[1].observation
    assert not host_path.exists()
    assert not Path("/usr/pwned").exists()


def test_a_flood_of_output_is_stopped_and_cut_for_the_model():
    steps = episode(python("while True: print('x' * 10000)"), shell("yes"))
    for step in steps[:2]:
        assert step.status == "output_limit"
        assert step.truncated and "characters cut" in step.observation
        assert len(step.observation) < SPEC.observation_chars + 100


def test_memory_and_disk_hogs_hit_their_limits():
    steps = episode(
        python("x = bytearray(4 * 1024 ** 3)"),
        shell("head -c 100000000 /dev/zero > big; ls -la big; df -k . | tail -1"),
    )
    assert steps[0].status == "memory"
    assert "big" in steps[1].observation  # the write was cut short by the file size / tmpfs limits
    assert "100000000" not in steps[1].observation
