"""The bubblewrap backend: one fresh, unprivileged, network-less mount namespace per program.

What the program sees: /usr (and the /bin, /lib* links or binds next to it) read-only, its own /proc and a
minimal /dev, and a size-capped tmpfs at /tmp holding the working directory. No /etc, no /home, no project
checkout, no host environment variables, only a down loopback interface. It runs as uid 65534 with no
capabilities, as a child of bwrap's own pid 1, so the whole sandbox dies with bwrap.

On the host, the sandbox's user is the one that started bwrap, and never root: the kernel would then take the
program for the owner of every root-owned file it sees (the /dev nodes bwrap binds in, whose modes and times
every sandbox and the host share) and let it write /proc/sys (every global sysctl). A root process starts
bwrap as the host's nobody instead (HOST_UID, through setpriv), which needs unprivileged user namespaces.

Kernel surface: a seccomp filter (seccomp.py) refuses new namespaces, ptrace, mounts, keyrings, BPF and the
like, and `--disable-userns` stops a nested user namespace a second way. The IPC namespace is the run's own
(a warm sandbox's fork server empties it after every run instead: see fork_server.py). /proc/sys is read-only,
so not even the settings of the sandbox's own namespaces can carry anything from one run to the next.

Limits: address space, CPU seconds, file size and core size by `prlimit` on the bwrap process (inherited by
everything inside); processes and the memory of all of them together by a per-run cgroup when one can be
created (see process_limit.py), else RLIMIT_NPROC and RLIMIT_AS alone; disk by the tmpfs size; wall time and
output size by this module, which SIGKILLs bwrap's process group (and the cgroup) when either runs out.
"""

from __future__ import annotations

import math
import os
import selectors
import shutil
import signal
import subprocess
import time
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack
from pathlib import PurePosixPath

from sandboxes.backends.base import SandboxBackend
from sandboxes.backends.bwrap_launcher import SANDBOX_PASSWD, BwrapLauncher
from sandboxes.backends.outcome import Outcome, cgroup_memory_mb, run_result
from sandboxes.backends.process_limit import CgroupParent, RunCgroup, join_cgroup, user_task_count
from sandboxes.backends.seccomp import SeccompUnavailable, bpf_program
from sandboxes.backends.warm_pool import WarmPool
from sandboxes.profiles import PROFILES, installed_here, missing_here
from sandboxes.types import Limits, RunRequest, RunResult, Status

WORKDIR = "/tmp/work"
SANDBOX_UID = "65534"  # nobody: the program owns nothing outside its tmpfs
HOST_UID = 65534  # what bwrap runs as on the host when this process is root (nobody)
# SANDBOX_TMP tells a program that /tmp is the run's own (the code judge empties it between samples).
SANDBOX_ENV = {
    "PATH": "/usr/local/bin:/usr/bin:/bin",
    "HOME": WORKDIR,
    "LANG": "C.UTF-8",
    "SANDBOX_TMP": "/tmp",
    **dict.fromkeys(
        ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"), "1"
    ),  # numpy: no thread pool
}
# -E/-s/-S: no PYTHON* variables, no user or system site-packages, so only the standard library (and the
# working directory, for the request's own files) is importable. -u: a killed program still shows what it
# printed. -B: no __pycache__ in the small tmpfs.
PYTHON_FLAGS = ("-E", "-s", "-S", "-u", "-B")
MAIN_FILE = {"python": "main.py", "shell": "main.sh"}
ETC_CONFIG = ("/etc/libreoffice", "/etc/alternatives")  # host configuration a toolchain reads (none secret)
# bwrap's own two processes (outside and pid 1 inside) sit in the pids cgroup next to the program.
BWRAP_TASKS = 2


class BwrapBackend(SandboxBackend):
    name = "bwrap"

    def __init__(
        self,
        *,
        bwrap_path: str | None = None,
        python_path: str = "/usr/bin/python3",
        workers: int = 2,
        pool_size: int = 0,
        recycle_after: int = 200,
    ) -> None:
        """`python_path` must be a system interpreter under /usr (the only host tree the sandbox sees).

        pool_size > 0 keeps that many warm sandboxes with a fork server each (see warm_pool.py) for requests
        with the default tmpfs size; other requests, and every request when pool_size is 0, start a fresh
        bwrap ("cold"). A warm sandbox is replaced after `recycle_after` runs or any anomaly.
        """
        self.bwrap_path = bwrap_path or shutil.which("bwrap") or "/usr/bin/bwrap"
        self.prlimit_path = shutil.which("prlimit") or "/usr/bin/prlimit"
        self.setpriv_path = shutil.which("setpriv") or "/usr/bin/setpriv"
        self.host_uid = HOST_UID if os.geteuid() == 0 else os.getuid()  # see the module docstring
        # bubblewrap 0.8.0 and later; older ones rely on the seccomp filter alone to refuse user namespaces.
        self._disable_userns = (
            ["--disable-userns"] if _bwrap_supports(self.bwrap_path, "--disable-userns") else []
        )
        self.python_path = python_path
        self.workers = max(workers, pool_size)
        self.cgroup_parent = CgroupParent.find()
        self.pool: WarmPool | None = None
        self.pool_tmpfs_mb = Limits().tmpfs_mb
        if pool_size > 0:
            self.pool = WarmPool(
                make_launcher=lambda: BwrapLauncher(backend=self, tmpfs_mb=self.pool_tmpfs_mb),
                size=pool_size,
                recycle_after=recycle_after,
            )

    def run(self, request: RunRequest) -> RunResult:
        problem = self.request_problem(request)
        if problem:
            return RunResult(Status.SANDBOX_ERROR, None, "", problem, 0.0)
        if self.pool is not None and request.limits.tmpfs_mb == self.pool_tmpfs_mb:
            return self.pool.run(request)
        return self.run_cold(request)

    def run_cold(self, request: RunRequest) -> RunResult:
        """One fresh bwrap for this request alone."""
        started = time.monotonic()
        problem = self.request_problem(request)
        if problem:
            return RunResult(Status.SANDBOX_ERROR, None, "", problem, 0.0)
        with ExitStack() as stack:
            try:
                cgroup = self._create_cgroup(request.limits)
                if cgroup is not None:
                    stack.callback(cgroup.remove)
                fds = _FdBag(stack)
                argv = self._command(request, fds, cgroup)
                proc = subprocess.Popen(
                    argv,
                    stdin=fds.memfd(request.stdin, pass_to_bwrap=False),
                    stdout=subprocess.PIPE,
                    stderr=subprocess.PIPE,
                    pass_fds=fds.passed,
                    start_new_session=True,  # so a timeout can kill bwrap's whole process group
                    # --clearenv only cleans the program's environment: bwrap's own pid 1 inside the sandbox
                    # keeps bwrap's, and the program can read it from /proc/1/environ.
                    env={},
                )
            except OSError as exc:
                return RunResult(Status.SANDBOX_ERROR, None, "", f"could not start bwrap: {exc}", 0.0)
            outcome = _collect(proc, request.limits, cgroup, started=started)
            # bwrap reports the program's exit code only when it managed to set the sandbox up and start it.
            program_ran = '"exit-code"' in fds.read(fds.status_fd)
            oom_killed = cgroup is not None and cgroup.oom_kills() > 0
        return run_result(
            outcome,
            request.limits,
            program_ran=program_ran,
            duration_s=time.monotonic() - started,
            oom_killed=oom_killed,
        )

    def run_many(self, requests: list[RunRequest]) -> list[RunResult]:
        if len(requests) <= 1 or self.workers <= 1:
            return [self.run(request) for request in requests]
        with ThreadPoolExecutor(max_workers=min(self.workers, len(requests))) as pool:
            return list(pool.map(self.run, requests))  # map keeps the order of `requests`

    def health(self) -> dict:
        result = self.run(RunRequest(language="python", code="print('ok')"))
        ok = result.status == Status.OK and result.stdout.strip() == "ok"
        detail = (
            f"bwrap at {self.bwrap_path}; python {self.python_path}; processes capped by {self.process_limit}; "
            f"seccomp filter{' and --disable-userns' if self._disable_userns else ''}; "
            f"profiles {', '.join(installed_here())} (the host's /usr: one warm pool serves them all)"
        )
        if self.pool is not None:
            stats = self.pool.stats
            detail += (
                f"; warm pool of {self.pool.size} (recycled after {self.pool.recycle_after} runs): "
                f"{stats.warm_runs} warm runs, {stats.started} sandboxes started, {stats.recycled} recycled, "
                f"{stats.discarded} discarded after an anomaly"
            )
        if not ok:
            detail += f"; test program gave {result.status}: {result.stderr.strip()[-300:]}"
        return {"ok": ok, "backend": self.name, "detail": detail}

    def profiles(self) -> list[str]:
        return installed_here()

    def warm_pools(self) -> dict[str, int]:
        return {"all": self.pool.size} if self.pool is not None else {}

    @property
    def process_limit(self) -> str:
        if self.cgroup_parent is not None:
            return self.cgroup_parent.description
        return (
            f"RLIMIT_NPROC of host user {self.host_uid}, no writable pids cgroup; "
            "memory by RLIMIT_AS per process only"
        )

    def request_problem(self, request: RunRequest) -> str:
        if not os.path.exists(self.bwrap_path):
            return f"bubblewrap not found at {self.bwrap_path}; install the Debian package bubblewrap"
        if not os.path.exists(self.prlimit_path):
            return f"prlimit not found at {self.prlimit_path}; install the Debian package util-linux"
        if self.host_uid != os.getuid() and not os.path.exists(self.setpriv_path):
            return f"setpriv not found at {self.setpriv_path}; install the Debian package util-linux"
        if request.language == "python" and not os.path.exists(self.python_path):
            return f"no interpreter at {self.python_path}; install the Debian package python3-minimal"
        missing = missing_here(request.profile)
        if missing:
            packages = " ".join(PROFILES[request.profile].packages)
            return (
                f"sandbox profile {request.profile} is not installed on this host: no {', '.join(missing)} "
                f"(Debian packages {packages}; scripts/setup-system.sh toolchains installs them)"
            )
        main = MAIN_FILE[request.language]
        if main in request.files:
            return f"files may not contain {main}: that name holds the program's code"
        try:
            bpf_program()
        except SeccompUnavailable as exc:
            return f"no seccomp filter for the sandbox: {exc}"
        return ""

    def _create_cgroup(self, limits: Limits) -> RunCgroup | None:
        if self.cgroup_parent is None:
            return None
        memory_mb = cgroup_memory_mb(limits, tmpfs_mb=limits.tmpfs_mb)
        return self.cgroup_parent.create(pids=limits.pids + BWRAP_TASKS, memory_mb=memory_mb)

    def sandbox_args(
        self, *, tmpfs_mb: int, seccomp_fd: int, passwd_fd: int, die_with_parent: bool = True
    ) -> list[str]:
        """bwrap and its options up to (not including) the program: shared by cold runs and warm sandboxes.

        `seccomp_fd` holds bpf_program() (read by bwrap, so it must be passed to it). die_with_parent ties the
        sandbox to the *thread* that starts it, so warm sandboxes (started from short-lived threads) go without
        it and end when their socket to the host closes instead.
        """
        as_host_user = []
        # This process is root: bwrap, and the sandbox with it, run as nobody.
        if self.host_uid != os.getuid():
            uid = str(self.host_uid)
            as_host_user = [self.setpriv_path, f"--reuid={uid}", f"--regid={uid}", "--clear-groups", "--"]
        return [
            *as_host_user,
            self.bwrap_path,
            "--unshare-all",  # the IPC namespace included: System V objects die with the sandbox
            "--unshare-user",
            *self._disable_userns,  # no nested user namespace, even were the filter to miss a way to make one
            "--seccomp",
            str(seccomp_fd),
            "--uid",
            SANDBOX_UID,
            "--gid",
            SANDBOX_UID,
            *(["--die-with-parent"] if die_with_parent else []),
            "--new-session",
            "--hostname",
            "sandbox",
            "--clearenv",
            *[arg for key, value in SANDBOX_ENV.items() for arg in ("--setenv", key, value)],
            "--ro-bind",
            "/usr",
            "/usr",
            *_usr_neighbours(),
            # /etc holds the sandbox's own passwd (SANDBOX_PASSWD, from `passwd_fd`) and, read-only, the
            # configuration of toolchains that read theirs there (the spreadsheet profile's LibreOffice).
            "--file",
            str(passwd_fd),
            "/etc/passwd",
            *[arg for folder in ETC_CONFIG if os.path.isdir(folder) for arg in ("--ro-bind", folder, folder)],
            "--proc",
            "/proc",
            # The kernel lets the sandbox write its own IPC and pid namespaces' settings (msgmax, pid_max, ...),
            # a channel from one run, or one judged sample, to the next: read-only, as the docker backend has it.
            "--ro-bind",
            "/proc/sys",
            "/proc/sys",
            "--dev",
            "/dev",
            "--size",
            str(tmpfs_mb * 2**20),
            "--tmpfs",
            "/tmp",
            "--dir",
            WORKDIR,
            "--chdir",
            WORKDIR,
            # bwrap's own root and /dev are tmpfs mounts the program could otherwise write to (unbounded).
            "--remount-ro",
            "/dev",
            "--remount-ro",
            "/",
        ]

    def _command(self, request: RunRequest, fds: _FdBag, cgroup: RunCgroup | None) -> list[str]:
        limits = request.limits
        cpu = math.ceil(limits.cpu_s)
        prlimit = [
            self.prlimit_path,
            f"--as={limits.memory_mb * 2**20}",
            f"--cpu={cpu}:{cpu + 1}",  # SIGXCPU first (reported as a timeout), SIGKILL a second later
            f"--fsize={limits.file_size_mb * 2**20}",
            "--core=0",
        ]
        if cgroup is None:
            # RLIMIT_NPROC counts the user's processes outside the sandbox too, so allow for those.
            prlimit.append(f"--nproc={user_task_count(self.host_uid) + limits.pids + BWRAP_TASKS}")
        bwrap = [
            *self.sandbox_args(
                tmpfs_mb=limits.tmpfs_mb,
                seccomp_fd=fds.memfd(bpf_program()),
                passwd_fd=fds.memfd(SANDBOX_PASSWD),
            ),
            "--json-status-fd",
            str(fds.status_fd),
        ]
        main = MAIN_FILE[request.language]
        made_dirs: set[str] = set()
        for name, content in [*request.files.items(), (main, request.code)]:
            for parent in reversed(PurePosixPath(name).parents[:-1]):
                if str(parent) not in made_dirs:
                    made_dirs.add(str(parent))
                    bwrap += ["--dir", f"{WORKDIR}/{parent}"]
            bwrap += ["--file", str(fds.memfd(content)), f"{WORKDIR}/{name}"]
        program = (
            [self.python_path, *PYTHON_FLAGS, main] if request.language == "python" else ["/bin/sh", main]
        )
        command = [*prlimit, "--", *bwrap, "--", *program]
        if cgroup is not None:
            command = join_cgroup(cgroup, command)
        return command


class _FdBag:
    """In-memory files handed to bwrap by descriptor (stdin, the program, its files, the status report)."""

    def __init__(self, stack: ExitStack) -> None:
        self._stack = stack
        self.passed: list[int] = []
        self.status_fd = self.memfd("")

    def memfd(self, content: str | bytes, *, pass_to_bwrap: bool = True) -> int:
        fd = os.memfd_create("sandbox", 0)  # no MFD_CLOEXEC: bwrap reads it after exec
        self._stack.callback(os.close, fd)
        os.write(fd, content.encode() if isinstance(content, str) else content)
        os.lseek(fd, 0, os.SEEK_SET)
        if pass_to_bwrap:
            self.passed.append(fd)
        return fd

    def read(self, fd: int) -> str:
        return os.pread(fd, 1 << 16, 0).decode(errors="replace")


def _bwrap_supports(bwrap_path: str, option: str) -> bool:
    try:
        usage = subprocess.run([bwrap_path, "--help"], capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        return False  # no bwrap: every run says so (see request_problem)
    return option in usage.stdout + usage.stderr


def _usr_neighbours() -> list[str]:
    """/bin, /lib, /lib64 …: symlinks into /usr on merged-/usr systems (recreated), directories elsewhere."""
    args = []
    for top in ("/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32"):
        if os.path.islink(top):
            args += ["--symlink", os.readlink(top), top]
        elif os.path.isdir(top):
            args += ["--ro-bind", top, top]
    return args


def _collect(proc: subprocess.Popen, limits: Limits, cgroup: RunCgroup | None, *, started: float) -> Outcome:
    """Read stdout and stderr until both close, the wall clock runs out, or one passes the byte cap."""
    deadline = started + limits.wall_s
    assert proc.stdout is not None and proc.stderr is not None  # started with stdout=stderr=PIPE
    out, err = proc.stdout.fileno(), proc.stderr.fileno()
    buffers = {out: bytearray(), err: bytearray()}
    timed_out = flooded = False
    with selectors.DefaultSelector() as selector:
        for fd in buffers:
            os.set_blocking(fd, False)
            selector.register(fd, selectors.EVENT_READ)
        while selector.get_map() and not flooded:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                timed_out = True
                break
            for key, _ in selector.select(remaining):
                chunk = os.read(key.fd, 1 << 16)
                if not chunk:
                    selector.unregister(key.fileobj)
                    continue
                buffers[key.fd] += chunk
                flooded = flooded or len(buffers[key.fd]) > limits.output_bytes
    if not (timed_out or flooded):
        try:  # the program may have closed its output and kept running
            proc.wait(timeout=max(deadline - time.monotonic(), 0.0))
        except subprocess.TimeoutExpired:
            timed_out = True
    if timed_out or flooded:
        _kill(proc, cgroup)
    proc.wait()
    proc.stdout.close()
    proc.stderr.close()
    return Outcome(
        exit_code=proc.returncode,
        stdout=bytes(buffers[out]),
        stderr=bytes(buffers[err]),
        timed_out=timed_out,
        flooded=flooded,
    )


def _kill(proc: subprocess.Popen, cgroup: RunCgroup | None) -> None:
    # Killing bwrap's group kills bwrap; --die-with-parent then takes its pid 1 and with it the whole pid
    # namespace. The cgroup sweep covers the moment before bwrap has set that up.
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    if cgroup is not None:
        cgroup.kill_all()
