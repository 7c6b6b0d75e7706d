"""Runs inside a warm bubblewrap sandbox: a Python with common modules imported that forks one child per run.

Not imported by Anneal: a launcher starts the sandbox's system Python with this file's source
(`python -c SOURCE WHERE`), so it may use only the standard library. WHERE is a SOCK_SEQPACKET socket to the
host: an inherited descriptor number (bubblewrap) or `unix:PATH` to connect to (a container).

Protocol (one run at a time):
  host -> here  b"run" with four descriptors: the request as JSON (memfd), stdin (memfd), stdout and stderr
                (pipe write ends that the host reads, so output caps and the wall clock stay on the host side)
  here -> host  b"ready" once after start-up, then one JSON report per run:
                {"exit_code": int | None, "signal": int | None, "setup_error": str | None, "clean": bool,
                 "oom_killed": bool (the container's cgroup counted an OOM kill during the run)}
  host -> here  b"kill" at any time during a run (wall time or output cap ran out): kill the run now.
An empty read (the host closed the socket or died) ends the server, and bwrap's pid 1 takes the sandbox down.

Every run gets: a new session, its own rlimits (address space, CPU, file size, no core), a fresh working
directory under /tmp, the sandbox environment and nothing else; when the program exits, or is killed, every
other process in the sandbox's pid namespace is SIGKILLed (this server is its init, pid 1, so orphans are
re-parented to it), every System V shared-memory segment, semaphore set and message queue in the sandbox's
IPC namespace is removed, and /tmp is emptied, so nothing a run leaves behind (a daemon, a file, an IPC
object) reaches the next one. The settings of the sandbox's own IPC and pid namespaces (NAMESPACE_SETTINGS),
which the kernel would let a run write, are under a read-only /proc/sys in both backends; as a second line,
where /proc/sys is writable, they are read before the first run, and a run that changed one leaves the
sandbox unclean, and the host throws it away. (What stays: pids keep counting up across runs, so a run can
tell how many processes the runs before it in this sandbox started.) The seccomp filter the sandbox runs
under (seccomp.py) refuses the kernel keyrings, so no key outlives a run either. The program's processes volunteer
first to the kernel's OOM killer, so a run that passes the sandbox's memory cap loses one of its own
processes, not this server. As the namespace's init with no signal handlers it cannot be signalled from
inside; it is not dumpable, so a program (same uid) cannot ptrace it or read its memory. Should it die
anyway, the host sees the socket close and throws the sandbox away.
"""

import atexit
import binascii
import builtins
import ctypes
import gc
import io
import json
import os
import random
import resource
import select
import shutil
import signal
import socket
import sys
import threading
import traceback
import types
import zlib

# Imported once, before the first fork, so a run only pays for a fork. What verifier programs commonly use.
PRELOADED = (
    "ast", "bisect", "collections", "copy", "dataclasses", "decimal", "enum", "fractions", "functools",
    "heapq", "itertools", "json", "marshal", "math", "operator", "re", "statistics", "string", "typing",
    "unittest",
)  # fmt: skip

# name -> (file name, packed source) of modules to define before the first fork; sandboxes/preload.py fills
# this in (its pack(): compressed, in base64; unpack() gives the source back).
# (A type comment, not an annotation: preload.py finds this line by its text "PRELOAD_SOURCES = {}".)
PRELOAD_SOURCES = {}  # type: dict[str, tuple[str, str]]
PR_SET_DUMPABLE = 4
IPC_RMID = 0
LIBC = ctypes.CDLL(None, use_errno=True)
# Where a container's fork server reads how often the kernel killed a process for passing the container's
# memory cap (cgroup v2, then v1); a bubblewrap sandbox has no /sys, and its host reads the cgroup instead.
OOM_COUNTERS = ("/sys/fs/cgroup/memory.events", "/sys/fs/cgroup/memory/memory.oom_control")
TMP = "/tmp"
WORKDIR = "/tmp/work"  # the same path as a cold run's; /tmp is emptied after every run
MAIN_FILE = {"python": "main.py", "shell": "main.sh"}
# SANDBOX_TMP: /tmp is the run's own (the code judge empties it between samples; bwrap.SANDBOX_ENV).
ENV = {"PATH": "/usr/local/bin:/usr/bin:/bin", "LANG": "C.UTF-8", "SANDBOX_TMP": TMP}
ENV.update(
    dict.fromkeys(("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"), "1")
)  # one BLAS thread
KILL_ROUNDS = 10000  # kill(-1) + reap rounds before the sandbox is called unclean (a fork bomb races us)
# Session mode (argv "session", see sandboxes/session.py): the working directory and the rest of /tmp outlive
# each run, so files a run writes are there for the next; the program itself goes to RUN_DIR, emptied after
# every run, and request files overwrite (never through a link) what is there.
SESSION = False
RUN_DIR = "/tmp/.run"
# Kernel settings of the sandbox's own IPC and pid namespaces, writable from inside (those the kernel has).
NAMESPACE_SETTINGS = (
    *(f"/proc/sys/kernel/{name}" for name in (
        "auto_msgmni", "msgmax", "msgmnb", "msgmni", "sem", "shm_rmid_forced", "shmall", "shmmax", "shmmni",
        "pid_max",
    )),
    *(f"/proc/sys/fs/mqueue/{name}" for name in (
        "msg_default", "msg_max", "msgsize_default", "msgsize_max", "queues_max",
    )),
)  # fmt: skip


def prctl(option: int, value: int) -> None:
    if LIBC.prctl(option, value, 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), f"prctl({option})")


def write_files(workdir: str, request: dict) -> None:
    if SESSION:
        write_session_files(workdir, request)
        return
    os.mkdir(workdir, 0o700)  # fails if a previous run planted something there
    main = MAIN_FILE[request["language"]]
    for name, content in [*request["files"].items(), (main, request["code"])]:
        path = os.path.join(workdir, name)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        # O_NOFOLLOW|O_EXCL: a name is written once, never through a link.
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644)
        with open(fd, "w", encoding="utf-8") as f:
            f.write(content)


def write_session_files(workdir: str, request: dict) -> None:
    os.makedirs(workdir, 0o700, exist_ok=True)
    os.mkdir(RUN_DIR, 0o700)  # emptied after every run, so it is new here
    targets = [(os.path.join(workdir, name), content) for name, content in request["files"].items()]
    targets.append((os.path.join(RUN_DIR, MAIN_FILE[request["language"]]), request["code"]))
    for path, content in targets:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        # O_NOFOLLOW: a link the session made is never written through (it stays inside the sandbox anyway).
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o644)
        with open(fd, "w", encoding="utf-8") as f:
            f.write(content)


def setup(fds: list[int], setup_w: int, workdir: str) -> dict:
    """In the child: read the request, write its files, take its descriptors and limits. Reports to the
    server on `setup_w` ("" when all went well, else why), then closes it: the program never sees it."""
    try:
        with open(fds[0], encoding="utf-8") as f:
            request = json.load(f)
        write_files(workdir, request)
    except (OSError, ValueError, KeyError) as exc:
        os.write(setup_w, f"could not set the run up: {exc}".encode()[:4000])
        os._exit(1)
    os.setsid()
    try:  # raising it needs no privilege; the server keeps 0, so the kernel picks the run's processes first
        with open("/proc/self/oom_score_adj", "w") as f:
            f.write("1000")
    except OSError:
        pass
    for target, fd in zip((0, 1, 2), fds[1:], strict=True):
        os.dup2(fd, target)
    os.closerange(3, 1 << 16)  # the socket, the setup pipe and the received descriptors
    os.chdir(workdir)
    limits = request["limits"]
    cpu = int(-(-limits["cpu_s"] // 1))
    resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu + 1))  # SIGXCPU first, SIGKILL a second later
    resource.setrlimit(resource.RLIMIT_FSIZE, (limits["file_size_mb"] << 20,) * 2)
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    resource.setrlimit(resource.RLIMIT_MSGQUEUE, (0, 0))  # POSIX queues would outlive the run
    resource.setrlimit(resource.RLIMIT_AS, (limits["memory_mb"] << 20,) * 2)
    return request


def child(fds: list[int], setup_w: int, workdir: str) -> None:
    """The forked child: sets itself up and becomes the program. Never returns.

    The request is read here, never in the server, so no run's code, inputs or files ever sit in the
    server's memory, which every later child inherits.
    """
    code = 1
    try:
        request = setup(fds, setup_w, workdir)
        env = {**ENV, "HOME": workdir, "PWD": workdir}
        if SESSION:
            del env["SANDBOX_TMP"]  # a session's /tmp holds its files across runs
        main = MAIN_FILE[request["language"]]
        if SESSION:
            main = os.path.join(RUN_DIR, main)
        if request["language"] == "shell":
            for sig in (signal.SIGPIPE, signal.SIGXFSZ, signal.SIGINT):
                signal.signal(sig, signal.SIG_DFL)  # what a freshly exec'd shell would have
            os.execve("/bin/sh", ["/bin/sh", main], env)
        os.environ.clear()
        os.environ.update(env)
        signal.signal(signal.SIGINT, signal.default_int_handler)
        signal.signal(signal.SIGPIPE, signal.SIG_IGN)  # as a fresh Python has them
        random.seed()  # the server's seed would otherwise repeat in every run
        sys.stdin = io.TextIOWrapper(io.FileIO(0, "r", closefd=False), encoding="utf-8")
        sys.stdout = io.TextIOWrapper(io.FileIO(1, "w", closefd=False), encoding="utf-8", write_through=True)
        sys.stderr = io.TextIOWrapper(
            io.FileIO(2, "w", closefd=False), encoding="utf-8", errors="backslashreplace", write_through=True
        )
        sys.argv = [main]
        sys.path[0] = workdir
        code = run_python(os.path.join(workdir, main))
    except BaseException:  # noqa: BLE001 - anything here is the child's own failure, reported as exit 1
        try:
            traceback.print_exc()
        except BaseException:  # noqa: BLE001
            pass
    os._exit(code)


def run_python(main: str) -> int:
    """What `python main.py` does: run as __main__, print an uncaught exception, honour SystemExit.

    Precondition: `main` is an absolute path (tracebacks name it, as they would in a fresh interpreter).
    """
    try:
        # What runpy.run_path does for a plain file, without its first-call imports (~2 ms a run).
        module = types.ModuleType("__main__")
        module.__file__ = main
        module.__dict__["__builtins__"] = builtins
        sys.modules["__main__"] = module
        with open(main, "rb") as f:
            source = f.read()
        exec(compile(source, main, "exec"), module.__dict__)
        code = 0
    except SystemExit as exc:
        code = exit_code_of(exc)
    except BaseException as exc:  # noqa: BLE001
        tb = exc.__traceback__
        while tb is not None and tb.tb_frame.f_code.co_filename != main:
            tb = tb.tb_next  # drop this server's frames: the program's own start at main
        traceback.print_exception(type(exc), exc, tb)  # None (a SyntaxError): no traceback, as python prints
        code = 1
    try:
        threading._shutdown()  # type: ignore[attr-defined]  # waits for non-daemon threads, as exit does
        atexit._run_exitfuncs()
        sys.stdout.flush()
        sys.stderr.flush()
    except BaseException:  # noqa: BLE001
        pass
    return code


def exit_code_of(exc: SystemExit) -> int:
    if exc.code is None:
        return 0
    if isinstance(exc.code, int):
        return exc.code & 0xFF
    try:
        print(exc.code, file=sys.stderr)
    except BaseException:  # noqa: BLE001
        pass
    return 1


def kill_the_rest() -> bool:
    """SIGKILL every process in the sandbox but this one (pid 1), reaping them; True once none is left."""
    for _ in range(KILL_ROUNDS):
        try:
            os.kill(-1, signal.SIGKILL)  # everyone but the caller
        except ProcessLookupError:
            return True
        try:
            os.waitpid(-1, 0)  # orphans were re-parented to us (pid 1), so this reaps them all
        except ChildProcessError:
            pass
    return False


def sysv_ids(kind: str) -> list[int]:
    """The ids of the System V objects of `kind` ("shm", "sem", "msg") in this IPC namespace."""
    try:
        with open(f"/proc/sysvipc/{kind}") as f:
            lines = f.read().splitlines()[1:]  # a header, then one object a line; its id is the 2nd field
    except FileNotFoundError:
        return []  # a kernel without System V IPC
    return [int(line.split()[1]) for line in lines if line.strip()]


def remove_sysv_ipc() -> bool:
    """Remove every System V object a run made; True once none is left. The program ran as this server's
    uid, which created them, and only that uid is mapped in the sandbox, so it may remove each one."""
    try:
        found = {kind: sysv_ids(kind) for kind in ("shm", "sem", "msg")}
        if not any(found.values()):
            return True  # the usual case: one read of each list per run
        for ident in found["shm"]:
            LIBC.shmctl(ident, IPC_RMID, None)  # nobody is attached any more: the segment goes at once
        for ident in found["sem"]:
            LIBC.semctl(ident, 0, IPC_RMID)
        for ident in found["msg"]:
            LIBC.msgctl(ident, IPC_RMID, None)
        return not (sysv_ids("shm") or sysv_ids("sem") or sysv_ids("msg"))
    except (OSError, ValueError, IndexError):
        return False


def oom_kills() -> int:
    """The kernel's count of processes killed for passing this container's memory cap; 0 when unseen."""
    for path in OOM_COUNTERS:
        try:
            with open(path) as f:
                counts = dict(line.split() for line in f.read().splitlines() if len(line.split()) == 2)
            return int(counts.get("oom_kill", 0))
        except (OSError, ValueError):
            continue
    return 0


def empty_tmp() -> bool:
    try:
        for entry in os.scandir(TMP):
            if entry.is_dir(follow_symlinks=False):
                shutil.rmtree(entry.path)
            else:
                os.unlink(entry.path)
        return not os.listdir(TMP)
    except OSError:
        return False


def namespace_settings() -> dict[str, str]:
    """NAMESPACE_SETTINGS with their values now (those this kernel has); none where /proc/sys is read-only, as
    both backends mount it (nothing to compare, and no reads after every run)."""
    if os.statvfs("/proc/sys").f_flag & os.ST_RDONLY:
        return {}
    settings = {}
    for path in NAMESPACE_SETTINGS:
        try:
            with open(path) as f:
                settings[path] = f.read()
        except OSError:
            continue
    return settings


def empty_run_dir() -> bool:
    try:
        if os.path.isdir(RUN_DIR) and not os.path.islink(RUN_DIR):
            shutil.rmtree(RUN_DIR)
        elif os.path.lexists(RUN_DIR):
            os.unlink(RUN_DIR)  # the program replaced the folder with a file or a link
    except OSError:
        return False
    return not os.path.lexists(RUN_DIR)


def serve(sock: socket.socket) -> None:
    if not empty_tmp():
        return
    # Compared after every run where they could change; a session's are its own, as its files are.
    settings = namespace_settings()
    gc.freeze()  # what is imported now is never touched by a child's collector: fewer copy-on-write faults
    # Hand back to the kernel the heap pages that compiling the preloaded modules used and freed (~2 MB of
    # ~12): every run is a fork of this process, and a fork and its exit cost in proportion to the pages mapped.
    if hasattr(LIBC, "malloc_trim"):
        LIBC.malloc_trim(0)
    sock.send(b"ready")
    while True:
        message, fds, _, _ = socket.recv_fds(sock, 64, 4)
        if message != b"run" or len(fds) != 4:
            return  # host gone, or a message we do not understand: end the sandbox
        report: dict[str, object] = {
            "exit_code": None,
            "signal": None,
            "setup_error": None,
            "clean": True,
            "oom_killed": False,
        }
        oom_kills_before = oom_kills()
        pid = None
        setup_r, setup_w = os.pipe()
        try:
            pid = os.fork()
            if pid == 0:
                os.close(setup_r)
                child(fds, setup_w, WORKDIR)
        except OSError as exc:
            report["setup_error"] = f"could not start the run: {exc}"
        os.close(setup_w)
        for fd in fds:
            os.close(fd)
        host_gone = False
        if pid is not None:
            pidfd = os.pidfd_open(pid)
            ready, _, _ = select.select([pidfd, sock.fileno()], [], [])
            if sock.fileno() in ready:
                host_gone = sock.recv(64) != b"kill"
                os.kill(pid, signal.SIGKILL)
            _, status = os.waitpid(pid, 0)
            os.close(pidfd)
            if os.WIFSIGNALED(status):
                report["signal"] = os.WTERMSIG(status)
            else:
                report["exit_code"] = os.waitstatus_to_exitcode(status)
            setup_error = os.read(setup_r, 4096).decode(errors="replace")  # the child is gone: no blocking
            if setup_error:
                report["setup_error"] = setup_error
        os.close(setup_r)
        report["clean"] = (
            kill_the_rest()
            and remove_sysv_ipc()
            and (
                empty_run_dir()
                if SESSION
                else empty_tmp() and (not settings or namespace_settings() == settings)
            )
        )
        report["oom_killed"] = oom_kills() > oom_kills_before
        if host_gone:
            return
        sock.send(json.dumps(report).encode())


def unpack(packed: str) -> str:
    """A preloaded module's source from its packed form (sandboxes/preload.py's pack)."""
    return zlib.decompress(binascii.a2b_base64(packed)).decode()


def connect(where: str) -> socket.socket:
    """An inherited descriptor ("7"), or a unix socket path bind-mounted into a container ("unix:/run/x")."""
    if not where.startswith("unix:"):
        return socket.socket(fileno=int(where))
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    sock.connect(where[len("unix:") :])
    return sock


def main() -> None:
    global SESSION
    SESSION = sys.argv[2:3] == ["session"]
    sock = connect(sys.argv[1])
    for name in PRELOADED:
        __import__(name)
    for name, (filename, packed) in PRELOAD_SOURCES.items():
        module = types.ModuleType(name)
        module.__file__ = filename
        sys.modules[name] = module
        exec(compile(unpack(packed), filename, "exec"), module.__dict__)
    prctl(PR_SET_DUMPABLE, 0)
    for sig in (signal.SIGPIPE, signal.SIGINT):
        signal.signal(sig, signal.SIG_IGN)  # as pid 1 with no handlers, no signal from inside reaches us
    try:
        serve(sock)
    finally:
        kill_the_rest()


if __name__ == "__main__":
    main()
