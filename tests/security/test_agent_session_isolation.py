"""Agent episodes of one job share a worker process and a SessionPool; each has its own sandbox session. An
episode that could leave a trace for another (a file, an IPC object, a socket, a process, the mode or time of a
path both see, a kernel setting) could pass it an answer, or a signal to act on, outside anything the trainer
sees. Each probe first shows the channel at work inside one session (files persist across its calls, as they
should), then that a concurrent episode and a later one from the same pool find nothing.

Not probed here: what no sandbox hides from a neighbour on the same kernel (CPU load, free memory, timing,
advisory locks on the /usr files all share), and the times of the host's /dev nodes set to "now", which needs
only the write permission /dev/null gives everyone: bwrap cannot bind a device read-only without also making it
unusable as a device.
"""

import json
import os
import shutil
import signal
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from gpu_jobs.agent.environment import RepoEnvironment
from gpu_jobs.agent.spec import validate_environment
from gpu_jobs.agent.taskpack import pack_rows
from gpu_jobs.agent.tools import ToolCall
from sandboxes.session import SandboxSession, SessionPool
from sandboxes.types import Limits, Status
from tests.security.hostile import assert_nothing_left, children_of, processes_with

pytestmark = [
    pytest.mark.security,
    pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap is not installed"),
]

ROW = pack_rows(limit=1)[0]
SPEC = validate_environment({"max_turns": 10, "tool_timeout_s": 5})
FILES = {"repo.py": "VALUE = 1\n"}
# The host's device nodes bwrap binds into every sandbox: the inodes all sandboxes and the host share.
HOST_DEVICES = ("/dev/null", "/dev/zero", "/dev/full", "/dev/random", "/dev/urandom", "/dev/tty")


@pytest.fixture(scope="module")
def pool():
    sessions = SessionPool(size=2, tmpfs_mb=SPEC.tmpfs_mb)
    yield sessions
    sessions.close()


def probe(session: SandboxSession, code: str, **kwargs) -> Any:
    """Run `code` (a Python program that prints one JSON value) in `session`; that value."""
    result = session.run("python", code, **kwargs)
    assert result.status == Status.OK, result.stderr
    return json.loads(result.stdout)


def tag() -> str:
    return f"anneal-probe-{uuid.uuid4().hex}"


# Files -------------------------------------------------------------------------------------------------------

FOLDERS = (
    "/tmp", "/tmp/work", "~", "/var/tmp", "/dev/shm", "/dev/mqueue", "/dev/pts", "/run", "/", "/etc", "/dev",
    "/usr/local", "/home", "/root", "/proc",
)  # fmt: skip
PLANT_FILES = """
import json, os
planted = []
for folder in {folders!r}:
    path = os.path.join(os.path.expanduser(folder), {tag!r})
    try:
        with open(path, "w") as f:
            f.write("left by an earlier episode")
    except OSError:
        continue
    planted.append(path)
print(json.dumps(planted))
"""
FIND_FILES = """
import json, os
found = [os.path.join(os.path.expanduser(folder), {tag!r}) for folder in {folders!r}]
found = [path for path in found if os.path.lexists(path)]
for top in ("/tmp", "/dev", "/run", "/var"):
    for root, dirs, names in os.walk(top):
        found += [os.path.join(root, name) for name in dirs + names if {tag!r} in name]
print(json.dumps(sorted(set(found))))
"""


def test_files_one_episode_leaves_reach_no_concurrent_or_later_episode(pool):
    name = tag()
    plant = PLANT_FILES.format(folders=FOLDERS, tag=name)
    find = FIND_FILES.format(folders=FOLDERS, tag=name)
    with pool.session(files=FILES) as planter, pool.session(files=FILES) as neighbour:
        planted = probe(planter, plant)
        # Where a session keeps its files (its HOME is /tmp/work), the files stay for its next call.
        assert {f"/tmp/{name}", f"/tmp/work/{name}"} <= set(planted)
        assert probe(planter, find) == sorted(set(planted))
        assert probe(neighbour, find) == []
    with pool.session(files=FILES) as later:
        assert probe(later, find) == []


# A pooled session is blank ------------------------------------------------------------------------------------

LOOK = """
import json, os
tmp = sorted(os.path.join(root, name) for root, dirs, names in os.walk("/tmp") for name in dirs + names)
work = os.stat("/tmp/work")
print(json.dumps({
    "tmp": tmp,
    "work": [oct(work.st_mode), work.st_mtime == 12345, os.listxattr("/tmp/work")],
    "processes": sorted(int(pid) for pid in os.listdir("/proc") if pid.isdigit()),
    "ipc": [len(open(f"/proc/sysvipc/{kind}").read().splitlines()) - 1 for kind in ("shm", "sem", "msg")],
    "unix sockets": len(open("/proc/net/unix").read().splitlines()) - 1,
}))
"""
# Everything one call can leave to the session's next: files and folders all over /tmp, the working folder's
# mode, times and extended attributes.
PLANT_STATE = """
import json, os
os.makedirs("/tmp/.hidden/deeper", exist_ok=True)
for path in ("/tmp/planted", "/tmp/.hidden/deeper/planted", "/tmp/work/planted"):
    open(path, "w").write("left by an earlier episode")
os.chmod("/tmp/work", 0o777)
os.utime("/tmp/work", (12345, 12345))
try:
    os.setxattr("/tmp/work", "user.planted", b"1")
except OSError:  # a tmpfs without user extended attributes (kernels before 6.6)
    pass
print(json.dumps(os.listxattr("/tmp/work")))
"""


def test_every_session_a_pool_hands_out_is_blank_and_a_closed_one_is_never_handed_out_again():
    pool = SessionPool(size=1, tmpfs_mb=SPEC.tmpfs_mb)
    try:
        first_looks, sandboxes = [], []
        for _ in range(3):
            with pool.session(files=FILES) as session:
                assert session._sandbox is not None
                sandboxes.append(session._sandbox.pid)
                first_looks.append(probe(session, LOOK))
                xattrs = probe(session, PLANT_STATE)
                planted = probe(session, LOOK)  # within the session, all of it is there
                assert (
                    "/tmp/.hidden/deeper/planted" in planted["tmp"] and "/tmp/work/planted" in planted["tmp"]
                )
                assert planted["work"] == ["0o40777", True, xattrs]
    finally:
        pool.close()
    blank = {
        "tmp": ["/tmp/.run", "/tmp/.run/main.py", "/tmp/work", "/tmp/work/repo.py"],
        "work": first_looks[0]["work"],
        "processes": [1, first_looks[0]["processes"][1]],  # the fork server and this call's program
        "ipc": [0, 0, 0],
        "unix sockets": 0,
    }
    assert first_looks[0]["work"][1:] == [False, []]
    for look in first_looks:
        assert look == {**blank, "processes": [1, look["processes"][1]]}
    # Each session had a sandbox of its own, gone with it.
    assert len(set(sandboxes)) == len(sandboxes)
    assert all(gone(pid) for pid in sandboxes)


# Modes, times and extended attributes of what every sandbox sees -----------------------------------------------

SHARED_CANDIDATES = (
    "/", "/usr", "/usr/bin", "/usr/lib", "/usr/bin/python3", "/usr/local", "/etc", "/etc/passwd", "/dev",
    *HOST_DEVICES, "/dev/pts", "/dev/shm", "/proc", "/tmp",
)  # fmt: skip
STAT = """
import json, os, sys
paths = {candidates!r} + (os.path.realpath(sys.executable), os.__file__)
seen = {{}}
for path in paths:
    try:
        st = os.stat(path)
        xattrs = sorted(os.listxattr(path))
    except OSError as exc:
        seen[path] = str(exc)
        continue
    seen[path] = [st.st_dev, st.st_ino, st.st_mode, st.st_uid, st.st_mtime_ns, st.st_ctime_ns, xattrs]
print(json.dumps(seen))
"""
# Explicit times, a mode (the same one: a change of ctime is as visible) and an extended attribute, on every
# path; on the session's own file they work (the positive control). Setting times to "now" needs only
# write permission, which /dev/null gives everyone: not probed here (see the module docstring).
TAMPER = """
import json, os, sys
open("/tmp/work/own.txt", "w").write("x")
paths = {candidates!r} + (os.path.realpath(sys.executable), os.__file__, "/tmp/work/own.txt")
done = {{}}
for path in paths:
    done[path] = []
    for name, change in (
        ("chmod", lambda: os.chmod(path, os.stat(path).st_mode & 0o7777)),
        ("utime", lambda: os.utime(path, (12345, 12345))),
        ("xattr", lambda: os.setxattr(path, "user.planted", b"1")),
    ):
        try:
            change()
            done[path].append(name)
        except OSError:
            pass
print(json.dumps(done))
"""


@pytest.fixture
def host_devices_restored():
    """The old code let a root worker's sandbox change the host's /dev nodes: put their times back after."""
    before = {path: os.stat(path) for path in HOST_DEVICES if os.path.exists(path)}
    yield
    for path, st in before.items():
        now = os.stat(path)
        if (now.st_atime_ns, now.st_mtime_ns, now.st_mode) != (st.st_atime_ns, st.st_mtime_ns, st.st_mode):
            os.chmod(path, st.st_mode & 0o7777)
            os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))


def test_modes_times_and_xattrs_of_paths_every_sandbox_sees_cannot_carry_anything(
    pool, host_devices_restored
):
    stat = STAT.format(candidates=SHARED_CANDIDATES)
    with pool.session(files=FILES) as before:
        baseline = probe(before, stat)
    with pool.session(files=FILES) as tamperer, pool.session(files=FILES) as neighbour:
        tamperer_sees, neighbour_sees = probe(tamperer, stat), probe(neighbour, stat)
        done = probe(tamperer, TAMPER.format(candidates=SHARED_CANDIDATES))
        assert {"chmod", "utime"} <= set(done.pop("/tmp/work/own.txt"))
        concurrent = probe(neighbour, stat)
    with pool.session(files=FILES) as later:
        after = probe(later, stat)
    # The same inode in two sandboxes alive at once (the same device and inode numbers): what both see. Each
    # sandbox's tmpfs mounts and /proc are its own, with numbers of their own while it lives; a closed sandbox's
    # anonymous device number goes to a later mount, so a sandbox and a later one can show the same numbers for
    # their own, fresh /tmp, which is why the two compared here overlap in time.
    shared = sorted(
        path
        for path, st in tamperer_sees.items()
        if isinstance(st, list) and st[:2] == neighbour_sees[path][:2]
    )
    assert {"/usr/bin", "/usr/bin/python3", "/dev/null", "/dev/urandom"} <= set(shared)
    assert "/tmp" not in shared and "/dev" not in shared
    assert {path: concurrent[path] for path in shared} == {path: baseline[path] for path in shared}
    assert {path: after[path] for path in shared} == {path: baseline[path] for path in shared}
    assert {path: done[path] for path in shared} == {path: [] for path in shared}


# Kernel settings ----------------------------------------------------------------------------------------------

# Opening a file for writing is enough to learn whether writing it would be allowed, and writes nothing. The
# session's own file is the positive control; the run's own /proc/self is left out (it goes with the run).
WRITABLE_PROC = """
import json, os
def writable(path):
    try:
        os.close(os.open(path, os.O_WRONLY | os.O_NONBLOCK))
    except OSError:
        return False
    return True
found, sysctls = [], 0
for root, dirs, names in os.walk("/proc"):
    if root == "/proc":
        dirs[:] = [name for name in dirs if not name.isdigit() and name not in ("self", "thread-self")]
    sysctls += len(names) if root.startswith("/proc/sys/") else 0
    found += [os.path.join(root, name) for name in names if writable(os.path.join(root, name))]
print(json.dumps({"own": writable("/tmp/work/repo.py"), "sysctls": sysctls, "writable": sorted(found)}))
"""
# What a session may write: the settings of its own IPC and pid namespaces (they go with its sandbox), and
# pressure triggers (they go with the descriptor). Which of them a kernel namespaces varies; none is global.
OWN_NAMESPACES = {
    *(f"/proc/sys/kernel/{name}" for name in (
        "auto_msgmni", "msgmax", "msgmnb", "msgmni", "sem", "shm_rmid_forced", "shmall", "shmmax", "shmmni",
        "ns_last_pid", "pid_max",
    )),
    *(f"/proc/sys/fs/mqueue/{name}" for name in (
        "msg_default", "msg_max", "msgsize_default", "msgsize_max", "queues_max",
    )),
    *(f"/proc/pressure/{name}" for name in ("cpu", "io", "memory", "irq")),
}  # fmt: skip
MSGMAX = "/proc/sys/kernel/msgmax"
READ_MSGMAX = f"import json\nprint(json.dumps(int(open({MSGMAX!r}).read())))"


def test_no_kernel_setting_one_session_writes_reaches_another(pool):
    with pool.session(files=FILES) as setter, pool.session(files=FILES) as neighbour:
        found = probe(setter, WRITABLE_PROC)
        assert found["own"] is True and found["sysctls"] > 100
        assert sorted(set(found["writable"]) - OWN_NAMESPACES) == []
        # One of its own namespace's settings: the session keeps it across calls, no other session sees it.
        default = probe(neighbour, READ_MSGMAX)
        if MSGMAX in found["writable"]:
            setter.run("shell", f"echo {default - 1} > {MSGMAX}")
            assert probe(setter, READ_MSGMAX) == default - 1
        assert probe(neighbour, READ_MSGMAX) == default
    with pool.session(files=FILES) as later:
        assert probe(later, READ_MSGMAX) == default


# IPC objects, sockets and processes of a concurrent episode ------------------------------------------------------

IPC_KEY = 0x414E50  # "ANP"
HOLD_IPC = """
import ctypes, json, os, socket, subprocess, sys
libc = ctypes.CDLL(None, use_errno=True)
key, name = {key}, {tag!r}
made = {{
    "shm": libc.shmget(key, 4096, 0o1666) >= 0,
    "sem": libc.semget(key, 1, 0o1666) >= 0,
    "msg": libc.msgget(key, 0o1666) >= 0,
    "mq": libc.mq_open(f"/{{name}}".encode(), os.O_CREAT | os.O_RDWR, 0o600, None) >= 0,
}}
server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
server.bind("\\0" + name)
server.listen()
# A process whose command line carries the tag: the host waits for it, lets the neighbour look, then kills it.
subprocess.Popen([sys.executable, "-S", "-c", "import time; time.sleep(60)", name]).wait()
client = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
client.connect("\\0" + name)
seen = {{
    "shm": libc.shmget(key, 0, 0) >= 0,
    "sem": libc.semget(key, 0, 0) >= 0,
    "msg": libc.msgget(key, 0) >= 0,
    "socket": True,
}}
print(json.dumps({{"made": made, "seen": seen}}))
"""
LOOK_FOR_IPC = """
import ctypes, json, os, socket
libc = ctypes.CDLL(None, use_errno=True)
key, name = {key}, {tag!r}
def connects():
    client = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        client.connect("\\0" + name)
    except OSError:
        return False
    return True
def cmdline(pid):
    try:
        return open(f"/proc/{{pid}}/cmdline", "rb").read()
    except OSError:
        return b""
print(json.dumps({{
    "shm": libc.shmget(key, 0, 0) >= 0,
    "sem": libc.semget(key, 0, 0) >= 0,
    "msg": libc.msgget(key, 0) >= 0,
    "mq": libc.mq_open(f"/{{name}}".encode(), os.O_RDONLY) >= 0,
    "any system v": [len(open(f"/proc/sysvipc/{{k}}").read().splitlines()) - 1 for k in ("shm", "sem", "msg")],
    "socket": connects(),
    "socket listed": name in open("/proc/net/unix").read(),
    "process": any(name.encode() in cmdline(pid) for pid in os.listdir("/proc") if pid.isdigit()),
}}))
"""


def test_ipc_objects_sockets_and_processes_of_a_running_episode_are_invisible_to_another(pool):
    name = tag()
    with pool.session(files=FILES) as holder, pool.session(files=FILES) as neighbour:
        with ThreadPoolExecutor(max_workers=1) as thread:
            held = thread.submit(
                holder.run,
                "python",
                HOLD_IPC.format(key=IPC_KEY, tag=name),
                limits=Limits(wall_s=60, cpu_s=60),
            )
            try:
                waiter = wait_for_process(name, held)
                looked = probe(neighbour, LOOK_FOR_IPC.format(key=IPC_KEY, tag=name))
            finally:
                for pid in processes_with(name):
                    os.kill(pid, signal.SIGKILL)
            result = held.result()
        assert result.status == Status.OK, result.stderr
        holding = json.loads(result.stdout)
        # The holder made them and still had them after the neighbour looked (a POSIX queue is refused in
        # every sandbox: RLIMIT_MSGQUEUE is 0).
        assert holding == {
            "made": {"shm": True, "sem": True, "msg": True, "mq": False},
            "seen": {"shm": True, "sem": True, "msg": True, "socket": True},
        }
        assert waiter  # the host saw the holder's process while the neighbour looked
        assert looked == {
            "shm": False, "sem": False, "msg": False, "mq": False, "any system v": [0, 0, 0],
            "socket": False, "socket listed": False, "process": False,
        }  # fmt: skip
        # System V objects end with the call that made them, processes too: the holder's next call has none.
        assert probe(holder, LOOK_FOR_IPC.format(key=IPC_KEY, tag=name))["any system v"] == [0, 0, 0]
    assert_nothing_left(name)


def wait_for_process(marker: str, running) -> list[int]:
    """The host's pids of the processes carrying `marker`, once there are any (or the run is over)."""
    for _ in range(400):
        found = processes_with(marker)
        if found or running.done():
            return found
        time.sleep(0.05)
    return []


# A double-forked daemon in a session of its own, found by its command line.
DAEMON = """
import json, os, sys, time
if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        os.execv(sys.executable, [sys.executable, "-S", "-c", "import time; time.sleep(300)", {tag!r}])
    os._exit(0)
def running():
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            if {tag!r}.encode() in open(f"/proc/{{pid}}/cmdline", "rb").read():
                return True
        except OSError:
            pass
    return False
for _ in range(100):
    if running():
        break
    time.sleep(0.02)
print(json.dumps(running()))
"""
ONLY_SERVER_AND_SELF = (
    "import json, os\nprint(json.dumps(sorted(int(p) for p in os.listdir('/proc') if p.isdigit()) == "
    "sorted({1, os.getpid()})))"
)


def test_a_daemon_an_episode_starts_ends_with_its_call_and_its_sandbox_with_the_session(pool):
    name = tag()
    daemon = DAEMON.format(tag=name)
    with pool.session(files=FILES) as first:
        assert first._sandbox is not None
        bwrap = first._sandbox.pid
        server = children_of(bwrap)
        assert probe(first, daemon) is True  # it ran, inside the call
    assert_nothing_left(name)
    assert server and all(gone(pid) for pid in [bwrap, *server])
    with pool.session(files=FILES) as second:
        assert second._sandbox is not None and second._sandbox.pid != bwrap
        assert probe(second, ONLY_SERVER_AND_SELF) is True


def gone(pid: int) -> bool:
    """True once `pid` has exited (a zombie waiting for its new parent to reap it counts as exited)."""
    for _ in range(100):
        try:
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            return True
        if state == "Z":
            return True
        time.sleep(0.02)
    return False


# Whole agent episodes on one pool ---------------------------------------------------------------------------------


def shell(command: str) -> ToolCall:
    return ToolCall("run_shell", {"command": command})


# Prints every file under /tmp (but the call's own program) with its content: what an episode could find.
EVERYTHING_IN_TMP = ToolCall(
    "run_python",
    {
        "code": "import os\nfor root, dirs, names in os.walk('/tmp'):\n"
        "    dirs[:] = [d for d in dirs if d != '.run']\n"
        "    for name in names:\n"
        "        path = os.path.join(root, name)\n"
        "        print(path, open(path, errors='replace').read())\n"
    },
)


def test_an_agent_episode_finds_nothing_another_episode_of_the_job_left(pool):
    name = tag()
    plant = shell(f"echo {name} > /tmp/{name}; echo {name} > ~/.{name}; echo {name} >> bounds.py")
    first = RepoEnvironment(ROW, SPEC, pool=pool)
    try:
        second = RepoEnvironment(ROW, SPEC, pool=pool)
        try:
            assert first.execute(plant).status == "ok"
            found = first.execute(EVERYTHING_IN_TMP).text.splitlines()
            assert {f"/tmp/{name} {name}", f"/tmp/work/.{name} {name}", name} <= set(found)
            assert name not in second.execute(EVERYTHING_IN_TMP).text
        finally:
            second.close()
    finally:
        first.close()
    third = RepoEnvironment(ROW, SPEC, pool=pool)
    try:
        looked = third.execute(EVERYTHING_IN_TMP)
        assert looked.status == "ok" and "bounds.py" in looked.text
        assert name not in looked.text
    finally:
        third.close()
