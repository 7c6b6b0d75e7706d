"""Warm sandboxes: each holds a fork server (fork_server.py), so a run costs a fork, not a sandbox start.

A `WarmSandbox` is one long-lived sandbox (bubblewrap or a container, started by a `Launcher`) running the
fork server, with a SOCK_SEQPACKET socket to this process. The host keeps the wall clock and the output
caps: it hands the fork server the write ends of the run's stdout and stderr pipes, reads them itself, and
on a timeout or flood tells the server to kill the run.

A sandbox is thrown away (and replaced on demand) after `recycle_after` runs or after any anomaly: a run that
had to be killed, a fork server that died or answered nonsense, processes left in its cgroup after a run, a
/tmp that could not be emptied, a kernel setting of its namespaces a run changed. A `WarmPool` holds up to
`size` of them and lends each to one run at a time.
"""

from __future__ import annotations

import json
import os
import queue
import selectors
import socket
import threading
import time
from collections.abc import Callable
from contextlib import ExitStack
from dataclasses import dataclass, field
from typing import Protocol

from sandboxes.backends.outcome import Outcome, run_result
from sandboxes.types import Limits, RunRequest, RunResult, Status

START_TIMEOUT_S = 10.0
KILL_GRACE_S = 2.0  # how long a fork server may take to kill a run and report before the sandbox is destroyed


class SandboxStartError(RuntimeError):
    pass


@dataclass
class _Report:
    """One run as the host saw it; `healthy` is False when the sandbox must not be used again."""

    result: RunResult
    healthy: bool
    unused: bool = False  # the sandbox was dead before the run reached it: safe to retry on another


class Launcher(Protocol):
    """Starts one sandbox running the fork server and owns its processes (bubblewrap, a container …)."""

    @property
    def pid(self) -> int | str:
        """What identifies the sandbox to an operator (a process id, a container id)."""

    def start(self) -> socket.socket:
        """Start the sandbox; return the host end of its SOCK_SEQPACKET socket. SandboxStartError on failure."""

    def set_limits(self, limits: Limits) -> None:
        """Cap the tasks (not counting the sandbox's own) and the memory the next run may have, all its
        processes together. OSError when it cannot."""

    def oom_kills(self) -> int:
        """Processes the kernel has killed in the sandbox for passing its memory cap so far (0: unknown)."""

    def only_own_tasks_left(self) -> bool:
        """True when nothing but the sandbox's own processes is left (checked after every run)."""

    def close(self) -> None:
        """Kill the sandbox and everything in it; idempotent."""

    def diagnostics(self) -> str:
        """Why the sandbox may have failed to start (its stderr, an engine's message)."""


class WarmSandbox:
    def __init__(self, *, launcher: Launcher) -> None:
        """Starts the sandbox and waits for the fork server's "ready"; SandboxStartError when it does not come."""
        self.runs = 0
        self._launcher = launcher
        self._sock = launcher.start()
        self._sock.settimeout(START_TIMEOUT_S)
        try:
            hello = self._sock.recv(64)
        except OSError:
            hello = b""
        self._sock.settimeout(None)
        if hello != b"ready":
            detail = launcher.diagnostics()
            self.close()
            raise SandboxStartError(f"the fork server did not start: {detail}")

    @property
    def pid(self) -> int | str:
        return self._launcher.pid

    def run(self, request: RunRequest) -> _Report:
        """Precondition: the launcher's sandbox suits the request (tmpfs size) and nobody else is using it."""
        started = time.monotonic()
        self.runs += 1
        limits = request.limits
        try:
            self._launcher.set_limits(limits)
        except OSError as exc:
            return _Report(_error(f"could not set the run's limits: {exc}", started), healthy=False)
        oom_kills_before = self._launcher.oom_kills()
        with ExitStack() as stack:
            out_r, out_w = os.pipe()
            err_r, err_w = os.pipe()
            for fd in (out_r, err_r):
                stack.callback(os.close, fd)
            request_fd = _memfd(json.dumps(request.to_dict()), stack)
            stdin_fd = _memfd(request.stdin, stack)
            try:
                socket.send_fds(self._sock, [b"run"], [request_fd, stdin_fd, out_w, err_w])
            except OSError as exc:
                return _Report(_error(f"the fork server is gone: {exc}", started), healthy=False, unused=True)
            finally:
                os.close(out_w)
                os.close(err_w)
            collected = _collect(self._sock, out_r, err_r, limits, started=started)
        report = collected.report or {}
        # The host sees the cgroup of a bubblewrap sandbox; a container's fork server reads its own.
        oom_killed = self._launcher.oom_kills() > oom_kills_before or report.get("oom_killed") is True
        healthy = collected.report is not None and report.get("clean") is True and not collected.killed
        healthy = healthy and self._launcher.only_own_tasks_left()
        if collected.report is None:
            # The fork server died (the program may have killed it) or answered nonsense: the sandbox goes.
            if collected.timed_out or collected.flooded:
                outcome = Outcome(
                    None, collected.stdout, collected.stderr, collected.timed_out, collected.flooded
                )
                result = run_result(outcome, limits, program_ran=True, duration_s=time.monotonic() - started)
            elif oom_killed:  # the kernel chose the fork server: the run passed the sandbox's memory cap
                outcome = Outcome(None, collected.stdout, collected.stderr, False, False)
                duration_s = time.monotonic() - started
                result = run_result(outcome, limits, program_ran=True, duration_s=duration_s, oom_killed=True)
            else:
                note = "\n[the sandbox's fork server died during the run]"
                stdout = collected.stdout.decode(errors="replace")
                stderr = collected.stderr.decode(errors="replace") + note
                result = RunResult(Status.FAILED, None, stdout, stderr, round(time.monotonic() - started, 4))
            return _Report(result, healthy=False)
        if report.get("setup_error"):
            return _Report(_error(report["setup_error"], started), healthy=healthy)
        signal_number = report.get("signal")
        if signal_number is not None:
            # A signal we sent is "killed by us" (negative, so dropped); one the program met is 128+n, as bwrap says.
            exit_code = -signal_number if collected.killed else 128 + signal_number
        else:
            exit_code = report.get("exit_code")
        outcome = Outcome(
            exit_code, collected.stdout, collected.stderr, collected.timed_out, collected.flooded
        )
        duration_s = time.monotonic() - started
        result = run_result(outcome, limits, program_ran=True, duration_s=duration_s, oom_killed=oom_killed)
        return _Report(result, healthy=healthy)

    def close(self) -> None:
        """Kill the sandbox and everything in it."""
        try:
            self._sock.close()
        except OSError:
            pass
        self._launcher.close()


@dataclass
class _Collected:
    stdout: bytes
    stderr: bytes
    report: dict | None  # the fork server's JSON report, None when it never came
    timed_out: bool = False
    flooded: bool = False
    killed: bool = False  # we told the fork server to kill the run


def _collect(sock: socket.socket, out_r: int, err_r: int, limits: Limits, *, started: float) -> _Collected:
    """Read both pipes and the server's report until all three are done, the clock runs out or output floods."""
    buffers = {out_r: bytearray(), err_r: bytearray()}
    collected = _Collected(b"", b"", None)
    deadline = started + limits.wall_s
    report_raw: bytes | None = None
    with selectors.DefaultSelector() as selector:
        for fd in buffers:
            selector.register(fd, selectors.EVENT_READ)
        selector.register(sock, selectors.EVENT_READ)
        while selector.get_map():
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                if collected.killed:
                    break  # the server did not finish the kill in its grace period
                collected.timed_out = True
                collected.killed = _send_kill(sock)
                deadline = time.monotonic() + KILL_GRACE_S
                continue
            for key, _ in selector.select(remaining):
                if key.fileobj is sock:
                    try:
                        report_raw = sock.recv(1 << 16)
                    except OSError:
                        report_raw = b""
                    selector.unregister(sock)
                    if not report_raw:  # the server died; close() takes down whatever is left
                        return _finish(collected, buffers, out_r, err_r, None)
                    continue
                chunk = os.read(key.fd, 1 << 16)
                if not chunk:
                    selector.unregister(key.fd)
                    continue
                if not collected.flooded:
                    buffers[key.fd] += chunk
                    if len(buffers[key.fd]) > limits.output_bytes:
                        collected.flooded = True
                        collected.killed = _send_kill(sock)
                        deadline = time.monotonic() + KILL_GRACE_S
    report = None
    if report_raw:
        try:
            report = json.loads(report_raw)
        except ValueError:
            report = None
    return _finish(collected, buffers, out_r, err_r, report)


def _finish(collected: _Collected, buffers: dict, out_r: int, err_r: int, report: dict | None) -> _Collected:
    collected.stdout = bytes(buffers[out_r])
    collected.stderr = bytes(buffers[err_r])
    collected.report = report if isinstance(report, dict) else None
    return collected


def _send_kill(sock: socket.socket) -> bool:
    try:
        sock.send(b"kill")
    except OSError:
        pass
    return True


def _memfd(content: str, stack: ExitStack) -> int:
    fd = os.memfd_create("sandbox-run", os.MFD_CLOEXEC)
    stack.callback(os.close, fd)
    os.write(fd, content.encode())
    os.lseek(fd, 0, os.SEEK_SET)
    return fd


def _error(message: str, started: float) -> RunResult:
    return RunResult(Status.SANDBOX_ERROR, None, "", message, round(time.monotonic() - started, 4))


@dataclass
class PoolStats:
    started: int = 0  # sandboxes started
    recycled: int = 0  # thrown away after recycle_after runs
    discarded: int = 0  # thrown away after an anomaly
    warm_runs: int = 0
    start_errors: list[str] = field(default_factory=list)


class WarmPool:
    """Up to `size` warm sandboxes made by `make_launcher`, each lent to one run at a time."""

    def __init__(self, *, make_launcher: Callable[[], Launcher], size: int, recycle_after: int) -> None:
        if size < 1 or recycle_after < 1:
            raise ValueError(f"pool size ({size}) and recycle_after ({recycle_after}) must be at least 1")
        self._make_launcher = make_launcher
        self.size = size
        self.recycle_after = recycle_after
        self.stats = PoolStats()
        self._idle: queue.LifoQueue[WarmSandbox] = queue.LifoQueue()
        self._slots = threading.BoundedSemaphore(size)
        self._lock = threading.Lock()
        self._closed = False

    def warm_up(self) -> None:
        """Start sandboxes until `size` are idle (in parallel); failures are kept in stats, not raised."""
        missing = self.size - self._idle.qsize()
        threads = [threading.Thread(target=self._start_idle) for _ in range(max(missing, 0))]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()

    def run(self, request: RunRequest) -> RunResult:
        """Precondition: the pool's sandboxes suit the request. Blocks while all sandboxes are busy."""
        with self._slots:
            for attempt in range(2):  # an idle sandbox may have died (killed from outside): one fresh retry
                try:
                    sandbox = self._idle.get_nowait() if attempt == 0 else self._start()
                except queue.Empty:
                    try:
                        sandbox = self._start()
                    except SandboxStartError as exc:
                        return _error(str(exc), time.monotonic())
                except SandboxStartError as exc:
                    return _error(str(exc), time.monotonic())
                report = sandbox.run(request)
                if not report.unused:
                    break
                sandbox.close()
                with self._lock:
                    self.stats.discarded += 1
            with self._lock:
                self.stats.warm_runs += 1
                if not report.healthy:
                    self.stats.discarded += 1
                elif sandbox.runs >= self.recycle_after:
                    self.stats.recycled += 1
            if report.healthy and sandbox.runs < self.recycle_after and not self._closed:
                self._idle.put(sandbox)
            else:
                sandbox.close()
            return report.result

    def idle_pids(self) -> list[int | str]:
        """The bwrap process of each idle sandbox (for the fleet view and tests)."""
        with self._idle.mutex:
            return [sandbox.pid for sandbox in self._idle.queue]

    def close(self) -> None:
        self._closed = True
        while True:
            try:
                self._idle.get_nowait().close()
            except queue.Empty:
                return

    def _start(self) -> WarmSandbox:
        try:
            sandbox = WarmSandbox(launcher=self._make_launcher())
        except SandboxStartError as exc:
            with self._lock:
                self.stats.start_errors = [*self.stats.start_errors[-4:], str(exc)]
            raise
        with self._lock:
            self.stats.started += 1
        return sandbox

    def _start_idle(self) -> None:
        try:
            self._idle.put(self._start())
        except SandboxStartError:
            pass
