"""Hostile programs that look for a way out: the network, host files, host processes and secrets, the
filesystem, and anything that would let one run tamper with a later one. Every backend variant in conftest.py.
"""

import json
import os
import shutil
import socket
import uuid
from pathlib import Path

import pytest

from sandboxes.backends.bwrap import BwrapBackend
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
    # The sandbox's own: a program's HOME and PATH, that /tmp is the run's own, one BLAS thread.
    assert result.stdout.splitlines()[0] == (
        "['HOME', 'LANG', 'MKL_NUM_THREADS', 'OMP_NUM_THREADS', 'OPENBLAS_NUM_THREADS', 'PATH', 'PWD', "
        "'SANDBOX_TMP']"
    )


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


# The kernel behind the sandbox: calls an escape starts from, each made so that it would succeed (or fail
# otherwise than EPERM) in a plain namespace sandbox as uid 65534, and so shows the seccomp filter at work.
KERNEL_CALLS = """
import ctypes, errno, struct
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
perf_attr = bytearray(128)
struct.pack_into("IIQ", perf_attr, 0, 1, 128, 0)  # PERF_TYPE_SOFTWARE, its size, the CPU clock
struct.pack_into("Q", perf_attr, 40, 1 | 1 << 5 | 1 << 6)  # disabled, user space only
perf_attr = (ctypes.c_char * 128).from_buffer(perf_attr)
zeros = (ctypes.c_char * 128)()
calls = {
    "ptrace": lambda: libc.ptrace(0, 0, 0, 0),  # PTRACE_TRACEME
    "mount": lambda: libc.mount(b"none", b"/tmp/work", b"tmpfs", 0, None),
    "umount": lambda: libc.umount2(b"/tmp", 2),  # MNT_DETACH
    "setns": lambda: libc.setns(0, 0),
    "add_key": lambda: libc.syscall(248, b"user", b"anneal", b"secret", 6, -3),  # to the session keyring
    "keyctl": lambda: libc.syscall(250, 0, -3, 1),  # KEYCTL_GET_KEYRING_ID of the session keyring
    "request_key": lambda: libc.syscall(249, b"user", b"anneal", None, 0),
    "bpf": lambda: libc.syscall(321, 0, zeros, 128),  # BPF_MAP_CREATE
    "perf_event_open": lambda: libc.syscall(298, perf_attr, 0, -1, -1, 0),
    "userfaultfd": lambda: libc.syscall(323, 1),  # UFFD_USER_MODE_ONLY: allowed unprivileged otherwise
    "io_uring_setup": lambda: libc.syscall(425, 1, zeros),
    "process_vm_readv": lambda: libc.syscall(310, 1, zeros, 1, zeros, 1, 0),
}
for name, call in calls.items():
    rc = call()
    print(name, "allowed" if rc >= 0 else errno.errorcode[ctypes.get_errno()])
"""

NESTED_USER_NAMESPACE = """
import ctypes, errno, os
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
CLONE_NEWUSER, SIGCHLD = 0x10000000, 17
pid = libc.syscall(56, CLONE_NEWUSER | SIGCHLD, 0, 0, 0, 0)  # clone(): a child in a new user namespace
if pid == 0:
    os._exit(0)
print("clone", "allowed" if pid > 0 else errno.errorcode[ctypes.get_errno()])
for name, flags in (("user", CLONE_NEWUSER), ("user+mount", CLONE_NEWUSER | 0x20000), ("ipc", 0x08000000)):
    rc = libc.unshare(flags)
    print("unshare", name, "allowed" if rc == 0 else errno.errorcode[ctypes.get_errno()])
"""


def test_a_nested_user_namespace_is_refused(backend):
    result = backend.run(python(NESTED_USER_NAMESPACE))
    assert result.status == Status.OK, result.stderr
    assert result.stdout.splitlines() == [
        "clone EPERM",
        "unshare user EPERM",
        "unshare user+mount EPERM",
        "unshare ipc EPERM",
    ]
    shell = backend.run(RunRequest(language="shell", code="unshare --user --map-root-user id -u"))
    assert shell.status == Status.FAILED
    assert "Operation not permitted" in shell.stderr
    assert shell.stdout == ""


def test_tracing_mounts_keyrings_bpf_and_other_kernel_surface_are_refused(backend):
    result = backend.run(python(KERNEL_CALLS))
    assert result.status == Status.OK, result.stderr
    refused = dict(line.split() for line in result.stdout.splitlines())
    assert refused == {name: "EPERM" for name in refused}
    assert len(refused) == 12


def test_what_a_program_needs_still_works_under_the_filter(backend):
    # A trusted harness forks the untrusted program and talks to it over pipes, hides itself from it
    # (PR_SET_DUMPABLE) and watches it with an audit hook; threads and subprocesses are plain programs' too.
    code = """
import ctypes, os, subprocess, sys, threading
events = []
sys.addaudithook(lambda event, args: events.append(event) if event == "open" else None)
libc = ctypes.CDLL(None, use_errno=True)
assert libc.prctl(4, 0, 0, 0, 0) == 0  # PR_SET_DUMPABLE
r, w = os.pipe()
pid = os.fork()
if pid == 0:
    os.write(w, b"from the child")
    os._exit(7)
print(os.read(r, 100).decode(), os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]))
thread = threading.Thread(target=lambda: print("thread"))
thread.start()
thread.join()
print(subprocess.run(["/bin/echo", "subprocess"], capture_output=True, text=True).stdout.strip())
open("seen.txt", "w").close()
print("audited", "open" in events)
"""
    result = backend.run(python(code))
    assert result.status == Status.OK, result.stderr
    assert result.stdout == "from the child 7\nthread\nsubprocess\naudited True\n"


SYSV_IPC_KEY = 0x414E4E  # "ANN"
MAKE_SYSV_IPC = f"""
import ctypes
libc = ctypes.CDLL(None, use_errno=True)
libc.shmat.restype = ctypes.c_void_p
IPC_CREAT = 0o1000
made = []
for key in ({SYSV_IPC_KEY}, 0):  # a named segment and a private one (found only by listing)
    shm = libc.shmget(key, 4096, IPC_CREAT | 0o666)
    address = libc.shmat(shm, None, 0)
    ctypes.memmove(address, b"from an earlier run", 19)
    libc.shmdt(ctypes.c_void_p(address))
    made += [shm >= 0, libc.semget(key, 1, IPC_CREAT | 0o666) >= 0, libc.msgget(key, IPC_CREAT | 0o666) >= 0]
print(all(made))
"""
FIND_SYSV_IPC = f"""
import ctypes, errno
libc = ctypes.CDLL(None, use_errno=True)
for name, rc in (("shm", libc.shmget({SYSV_IPC_KEY}, 0, 0)), ("sem", libc.semget({SYSV_IPC_KEY}, 0, 0)),
                 ("msg", libc.msgget({SYSV_IPC_KEY}, 0))):
    print(name, "found" if rc >= 0 else errno.errorcode[ctypes.get_errno()])
for kind in ("shm", "sem", "msg"):
    print(kind, len(open(f"/proc/sysvipc/{{kind}}").read().splitlines()) - 1)  # one line an object
"""


def test_system_v_ipc_of_one_run_is_gone_in_the_next(backend):
    assert backend.run(python("pass")).status == Status.OK  # a warm pool has its sandbox before `started`
    started = backend.pool.stats.started if backend.pool is not None else None
    made = backend.run(python(MAKE_SYSV_IPC))
    assert (made.status, made.stdout) == (Status.OK, "True\n"), made.stderr
    later = backend.run(python(FIND_SYSV_IPC))
    assert later.status == Status.OK, later.stderr
    assert later.stdout.splitlines() == ["shm ENOENT", "sem ENOENT", "msg ENOENT", "shm 0", "sem 0", "msg 0"]
    if backend.pool is not None:  # the same warm sandbox served both runs
        assert backend.pool.stats.started == started


CHANGE_NAMESPACE_SETTINGS = """
import json
changed = {}
for name in ("msgmax", "pid_max"):
    try:
        open(f"/proc/sys/kernel/{name}", "w").write("4242")
    except OSError:
        continue
    changed[name] = open(f"/proc/sys/kernel/{name}").read().strip()
print(json.dumps(changed))
"""
READ_NAMESPACE_SETTINGS = "print([open(f'/proc/sys/kernel/{name}').read() for name in ('msgmax', 'pid_max')])"
# Every file under /proc/sys the run could open for writing (opened, never written).
WRITABLE_SETTINGS = """
import os
writable = []
for folder, _, files in os.walk("/proc/sys"):
    for name in files:
        try:
            os.close(os.open(os.path.join(folder, name), os.O_WRONLY))
        except OSError:
            continue
        writable.append(os.path.join(folder, name))
print(len(writable), writable[:5])
"""


def test_a_run_can_write_no_kernel_setting_not_even_its_own_namespaces(backend):
    # The kernel lets a sandbox write its own IPC and pid namespaces' settings (msgmax, pid_max, ...): a channel
    # to the next run in a warm sandbox, or the next judged sample. /proc/sys is read-only in every backend.
    found = backend.run(python(WRITABLE_SETTINGS))
    assert (found.status, found.stdout) == (Status.OK, "0 []\n"), found.stderr


def test_kernel_settings_a_run_changes_in_its_namespaces_are_not_the_next_runs(backend):
    before = backend.run(python(READ_NAMESPACE_SETTINGS))
    changed = backend.run(python(CHANGE_NAMESPACE_SETTINGS))
    assert changed.status == Status.OK, changed.stderr
    assert json.loads(changed.stdout) == {}
    after = backend.run(python(READ_NAMESPACE_SETTINGS))
    assert (after.status, after.stdout) == (Status.OK, before.stdout), after.stderr


class WritableProcSys(BwrapBackend):
    """bwrap without its read-only /proc/sys: a host where the first line is missing."""

    def sandbox_args(self, **options) -> list[str]:
        args = super().sandbox_args(**options)
        at = args.index("/proc/sys") - 1
        assert args[at : at + 3] == ["--ro-bind", "/proc/sys", "/proc/sys"]
        return args[:at] + args[at + 3 :]


@pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap is not installed")
def test_where_proc_sys_is_writable_a_warm_sandbox_whose_settings_a_run_changed_is_thrown_away():
    backend = WritableProcSys(pool_size=1, recycle_after=10_000)
    try:
        before = backend.run(python(READ_NAMESPACE_SETTINGS))
        changed = backend.run(python(CHANGE_NAMESPACE_SETTINGS))
        assert "msgmax" in json.loads(changed.stdout), changed.stderr  # the run did change one
        after = backend.run(python(READ_NAMESPACE_SETTINGS))
        assert (after.status, after.stdout) == (Status.OK, before.stdout), after.stderr
        assert backend.pool.stats.discarded == 1
    finally:
        backend.pool.close()
