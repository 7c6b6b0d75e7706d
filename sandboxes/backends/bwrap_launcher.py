"""Starts a warm bubblewrap sandbox: the fork server as the pid namespace's init, in a cgroup of its own.

The cgroup caps the sandbox's tasks and memory; both are set again before every run to that run's limits
(plus the fork server's own share), so the run's processes together stay within them.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
from typing import Protocol

from sandboxes.backends.outcome import cgroup_memory_mb
from sandboxes.backends.process_limit import CgroupParent, RunCgroup, join_cgroup
from sandboxes.backends.seccomp import bpf_program
from sandboxes.backends.warm_pool import SandboxStartError
from sandboxes.preload import fork_server_source
from sandboxes.types import Limits

# The sandbox's whole /etc/passwd: its one user, so that a program asking who it is gets an answer (LibreOffice
# aborts without one) and nothing of the host's accounts is seen.
SANDBOX_PASSWD = "nobody:x:65534:65534:nobody:/tmp/work:/usr/sbin/nologin\n"

# Tasks in a warm sandbox's pids cgroup besides the program's: bwrap outside and the fork server.
SANDBOX_TASKS = 2


class BwrapHost(Protocol):
    """What a launcher needs of the bubblewrap backend that owns it (bwrap.BwrapBackend implements it)."""

    python_path: str
    cgroup_parent: CgroupParent | None

    def sandbox_args(
        self, *, tmpfs_mb: int, seccomp_fd: int, passwd_fd: int, die_with_parent: bool = True
    ) -> list[str]: ...


class BwrapLauncher:
    def __init__(self, *, backend: BwrapHost, tmpfs_mb: int, server_args: tuple[str, ...] = ()) -> None:
        """`server_args` follow the socket on the fork server's command line ("session": see session.py)."""
        self._backend = backend
        self.tmpfs_mb = tmpfs_mb
        self.server_args = server_args
        self._cgroup: RunCgroup | None = None
        self._memory_mb = 0  # the cgroup's memory cap now, so it is written only when a run changes it
        self._proc: subprocess.Popen | None = None
        self.pid: int = 0

    def start(self) -> socket.socket:
        backend = self._backend
        if backend.cgroup_parent is not None:
            defaults = Limits()
            self._memory_mb = cgroup_memory_mb(defaults, tmpfs_mb=self.tmpfs_mb)
            try:
                self._cgroup = backend.cgroup_parent.create(
                    pids=defaults.pids + SANDBOX_TASKS, memory_mb=self._memory_mb
                )
            except OSError as exc:
                raise SandboxStartError(f"could not create a cgroup: {exc}") from exc
        host_sock, inner_sock = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        seccomp_fd = os.memfd_create("sandbox-seccomp", 0)  # no MFD_CLOEXEC: bwrap reads it after exec
        os.write(seccomp_fd, bpf_program())
        os.lseek(seccomp_fd, 0, os.SEEK_SET)
        passwd_fd = os.memfd_create("sandbox-passwd", 0)
        os.write(passwd_fd, SANDBOX_PASSWD.encode())
        os.lseek(passwd_fd, 0, os.SEEK_SET)
        argv = [
            # No --die-with-parent: it ties bwrap to the thread that starts it. The sandbox ends when its
            # socket to this process closes instead (this process exiting or dying included).
            *backend.sandbox_args(
                tmpfs_mb=self.tmpfs_mb, seccomp_fd=seccomp_fd, passwd_fd=passwd_fd, die_with_parent=False
            ),
            # The fork server is the pid namespace's init: nothing inside can SIGKILL it, and every orphan
            # is re-parented to it for reaping.
            "--as-pid-1",
            "--",
            backend.python_path,
            "-E",
            "-s",
            "-S",
            "-B",
            "-c",
            fork_server_source(),
            str(inner_sock.fileno()),
            *self.server_args,
        ]
        if self._cgroup is not None:
            argv = join_cgroup(self._cgroup, argv)
        try:
            self._proc = subprocess.Popen(
                argv,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.PIPE,
                pass_fds=[inner_sock.fileno(), seccomp_fd, passwd_fd],
                start_new_session=True,
                env={},
            )
        except OSError as exc:
            host_sock.close()
            self.close()
            raise SandboxStartError(f"could not start bwrap: {exc}") from exc
        finally:
            inner_sock.close()
            os.close(seccomp_fd)
            os.close(passwd_fd)
        self.pid = self._proc.pid
        return host_sock

    def set_limits(self, limits: Limits) -> None:
        if self._cgroup is None:
            return
        self._cgroup.set_pids(limits.pids + SANDBOX_TASKS)
        memory_mb = cgroup_memory_mb(limits, tmpfs_mb=self.tmpfs_mb)
        if memory_mb != self._memory_mb:
            self._memory_mb = 0  # unknown should the write fail half-way
            self._cgroup.set_memory(memory_mb)
            self._memory_mb = memory_mb

    def oom_kills(self) -> int:
        return self._cgroup.oom_kills() if self._cgroup is not None else 0

    def only_own_tasks_left(self) -> bool:
        if self._cgroup is None:
            return True
        try:
            return len(self._cgroup.procs_file.read_text().split()) <= SANDBOX_TASKS
        except OSError:
            return False

    def close(self) -> None:
        if self._proc is not None:
            try:
                os.killpg(self._proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            self._proc.wait()
            if self._proc.stderr is not None:
                self._proc.stderr.close()
        if self._cgroup is not None:
            self._cgroup.kill_all()
            self._cgroup.remove()
            self._cgroup = None

    def diagnostics(self) -> str:
        if self._proc is None or self._proc.stderr is None:
            return "bwrap did not start"
        try:
            os.killpg(self._proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        text = self._proc.stderr.read().decode(errors="replace")
        return text.strip()[-500:] or f"bwrap exited with {self._proc.wait()}"
