"""Hostile programs that look for a way out: the network, host files, host processes and secrets, the
filesystem, and anything that would let one run tamper with a later one. Every backend variant in conftest.py.
"""

import os
import socket
import uuid
from pathlib import Path

import pytest

from sandboxes.types import Limits, RunRequest, Status
from tests.security.hostile import python

pytestmark = pytest.mark.security

CONNECT = "import socket\nsocket.create_connection(('127.0.0.1', {port}), timeout=2)\nprint('connected')"


@pytest.mark.parametrize("port", [5432, 6379])
def test_host_services_are_unreachable(backend, port):
    result = backend.run(python(CONNECT.format(port=port)))
    assert result.status == Status.FAILED
    assert "connected" not in result.stdout


def test_a_listening_host_socket_is_unreachable(backend):
    with socket.create_server(("127.0.0.1", 0)) as server:
        result = backend.run(python(CONNECT.format(port=server.getsockname()[1])))
    assert result.status == Status.FAILED
    assert "connected" not in result.stdout


def test_a_host_abstract_unix_socket_is_unreachable(backend):
    name = f"\0anneal-test-{uuid.uuid4().hex}"
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as server:
        server.bind(name)
        server.listen()
        code = f"import socket\ns = socket.socket(socket.AF_UNIX)\ns.connect({name!r})\nprint('connected')"
        result = backend.run(python(code))
    assert result.status == Status.FAILED
    assert "ConnectionRefusedError" in result.stderr


def test_no_network_interface_but_a_down_loopback(backend):
    code = "print(sorted(line.split(':')[0].strip() for line in open('/proc/net/dev').readlines()[2:]))"
    result = backend.run(python(code))
    assert result.stdout == "['lo']\n", result.stderr


def test_host_files_are_invisible(backend, tmp_path):
    secret = tmp_path / "secret.txt"
    secret.write_text("host secret")
    for path in [str(secret), str(Path(__file__).resolve()), "/work"]:
        result = backend.run(python(f"print(open({path!r}).read())"))
        assert result.status == Status.FAILED, path
        assert "FileNotFoundError" in result.stderr, path
    # A container image has an /etc of its own: what matters is that it is not the host's.
    for path in ["/etc/hostname", "/etc/passwd"]:
        result = backend.run(python(f"print(open({path!r}).read(), end='')"))
        assert result.stdout != Path(path).read_text(), path


def test_symlinks_lead_nowhere_outside(backend):
    host_only = str(Path(__file__).resolve())
    code = f"""
import os
for i, target in enumerate(("/proc/1/root{host_only}", "/proc/self/root{host_only}", "{host_only}",
                            "../../../..{host_only}", "/proc/1/cwd/../../..{host_only}")):
    os.symlink(target, f"link{{i}}")
    try:
        print(open(f"link{{i}}").read()[:20])
    except OSError as exc:
        print(type(exc).__name__)
"""
    result = backend.run(python(code))
    assert result.status == Status.OK, result.stderr
    assert set(result.stdout.split()) <= {"FileNotFoundError", "PermissionError"}


def test_a_planted_symlink_does_not_redirect_the_next_runs_files(backend):
    plant = "import os\nos.symlink('/usr/lib', '/tmp/next')\nos.symlink('/usr', '/tmp/work/data')"
    assert backend.run(python(plant)).status == Status.OK
    request = python(
        "import os\nprint(sorted(os.listdir('/tmp')), open('data/x.txt').read())",
        files={"data/x.txt": "mine"},
    )
    result = backend.run(request)
    assert result.stdout == "['work'] mine\n", result.stderr


def test_host_processes_are_invisible(backend):
    code = """
import os
pids = [p for p in os.listdir('/proc') if p.isdigit()]
print(len(pids))
print(any(b'pytest' in open(f'/proc/{p}/cmdline', 'rb').read() for p in pids))
"""
    result = backend.run(python(code))
    count, saw_pytest = result.stdout.split()
    assert int(count) <= 3  # the sandbox's pid 1, the program, and nothing of the host
    assert saw_pytest == "False"


def test_host_environment_secrets_are_not_visible(backend, monkeypatch):
    monkeypatch.setenv("ANNEAL_TEST_SECRET", "hunter2")
    code = """
import glob, os
print(sorted(os.environ))
for path in glob.glob('/proc/*/environ'):
    try:
        print(open(path, 'rb').read())
    except OSError:
        pass
"""
    result = backend.run(python(code))
    assert result.status == Status.OK, result.stderr
    assert "hunter2" not in result.stdout
    assert "SECRET" not in result.stdout
    assert result.stdout.splitlines()[0] == "['HOME', 'LANG', 'PATH', 'PWD']"


@pytest.mark.parametrize(
    "path",
    ["/usr/evil", "/evil", "/etc/evil", "/dev/evil", "/dev/shm/evil", "/dev/mqueue/evil", "/var/tmp/evil"],
)
def test_nothing_outside_the_tmpfs_is_writable(backend, path):
    result = backend.run(python(f"open({path!r}, 'w').write('x')"))
    assert result.status == Status.FAILED
    # RLIMIT_MSGQUEUE 0 refuses a POSIX message queue with EMFILE ("Too many open files").
    reasons = ("Read-only file system", "Permission denied", "No such file", "Too many open files")
    assert any(text in result.stderr for text in reasons), result.stderr


def test_the_program_is_not_root_and_cannot_become_it(backend):
    result = backend.run(python("import os\nprint(os.getuid())\nos.setuid(0)"))
    assert result.stdout == "65534\n"
    assert result.status == Status.FAILED
    assert "PermissionError" in result.stderr or "Invalid argument" in result.stderr  # uid 0 is not mapped


def test_filling_the_tmpfs_fails_and_the_space_comes_back(backend):
    code = "i = 0\nwhile True:\n    open(f'f{i}', 'wb').write(b'x' * 2**20)\n    i += 1"
    result = backend.run(python(code))
    assert result.status == Status.FAILED
    assert "No space left on device" in result.stderr
    # The next run (the same warm sandbox, for bwrap-warm) has the whole tmpfs again.
    again = backend.run(python("open('big', 'wb').write(b'x' * 6 * 2**20)\nprint('ok')"))
    assert (again.status, again.stdout) == (Status.OK, "ok\n"), again.stderr


def test_a_file_past_the_file_size_limit_fails(backend):
    result = backend.run(python("open('big', 'wb').write(b'x' * 2 * 2**20)", limits=Limits(file_size_mb=1)))
    assert result.status == Status.FAILED
    assert "File too large" in result.stderr


def test_tampering_with_the_interpreter_does_not_reach_later_runs(backend):
    tamper = """
import builtins, json, os, sys
json.dumps = lambda *a, **k: "EVIL"
for path in ("/usr/lib/python3.11/json/__init__.py", "/usr/bin/python3"):
    try:
        open(path, "a").write("EVIL = 1")
        sys.stdout.write("wrote " + path + "\\n")
    except OSError:
        pass
for path in ("/tmp/json.py", "/tmp/work/json.py", "/tmp/sitecustomize.py"):
    open(path, "w").write("EVIL = 1")
try:
    with open("/proc/1/mem", "r+b") as mem:
        mem.write(b"x")
    sys.stdout.write("wrote /proc/1/mem\\n")
except OSError:
    pass
builtins.print = None
"""
    result = backend.run(python(tamper))
    assert result.status == Status.OK, result.stderr
    assert "wrote" not in result.stdout
    check = "import json, os, sys\nprint(json.dumps([1]), hasattr(json, 'EVIL'), sorted(os.listdir('/tmp')))"
    later = backend.run(python(check))
    assert later.stdout == "[1] False ['work']\n", later.stderr


def test_shell_programs_are_contained_too(backend):
    code = f"cat {Path(__file__).resolve()}; echo x > /usr/evil; env; id -u"
    result = backend.run(RunRequest(language="shell", code=code))
    assert "hostile" not in result.stdout
    assert "ANNEAL" not in result.stdout and os.environ.get("HOME", "/root") not in result.stdout.split("\n")
    assert result.stdout.strip().endswith("65534")


# Reads every readable mapping of its own process with ctypes (a non-dumpable process cannot open
# /proc/self/mem) and prints the canary suffixes it finds.
SCAN_OWN_MEMORY = """
import ctypes, re
found = set()
for line in open('/proc/self/maps').read().splitlines():
    fields = line.split()
    span, perms = fields[:2]
    if 'r' not in perms or (len(fields) > 5 and fields[5].startswith('[v')):
        continue
    start, end = (int(x, 16) for x in span.split('-'))
    data = ctypes.string_at(start, end - start)
    found.update(m.group(1).decode() for m in re.finditer(rb'LEAKCANARY-([0-9a-f]{16})', data))
print(sorted(found))
"""


def test_a_run_finds_nothing_of_earlier_runs_in_its_memory(backend):
    secret = uuid.uuid4().hex[:16]
    canary = f"LEAKCANARY-{secret}"
    earlier = python(f"x = {canary!r}\nprint(len(x))", stdin=canary, files={"hidden_tests.txt": canary})
    assert backend.run(earlier).status == Status.OK
    later = backend.run(python(SCAN_OWN_MEMORY, limits=Limits(memory_mb=512)))
    assert later.status == Status.OK, later.stderr
    assert secret not in later.stdout
