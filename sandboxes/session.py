"""A persistent sandbox session: one sandbox kept for a whole agent episode, its files there across calls.

A `SandboxSession` is a warm bubblewrap sandbox (see backends/warm_pool.py) whose fork server runs in session
mode: the working directory (/tmp/work) and the rest of /tmp survive each run, so what one call writes the next
one reads. Everything else a run gets is what any sandboxed run gets: a fresh fork with its own rlimits
(address space, CPU, file size), the per-run pids cap, the wall clock and output caps kept by this process, no
network (an unshared network namespace), no host files but a read-only /usr, and every process it started
killed when it ends (nothing runs in the background between calls). The session's disk is its tmpfs
(`tmpfs_mb`), shared by all its calls.

A call that had to be killed (wall time, output flood) does not lose the session's files: the fork server
kills the run and reports; the session is only lost when its fork server dies, and then every later call
says so (status sandbox_error) instead of running in a fresh, empty sandbox.
"""

from __future__ import annotations

import queue
import threading
import time
from dataclasses import dataclass

from sandboxes.backends.bwrap import BwrapBackend
from sandboxes.backends.bwrap_launcher import BwrapLauncher
from sandboxes.backends.warm_pool import SandboxStartError, WarmSandbox
from sandboxes.registry import get_backend
from sandboxes.types import Limits, RunRequest, RunResult, Status, _check_file_name

DEFAULT_TMPFS_MB = 32
START_ATTEMPTS = 2
_BACKEND_LOCK = threading.Lock()
SESSION_LOST = "the session's sandbox was lost earlier in this episode (its fork server died)"


@dataclass
class SessionStats:
    calls: int = 0
    sandbox_s: float = 0.0  # time spent in calls, as this process measured it (round trips included)
    started_s: float = 0.0  # what starting the sandbox and writing the first files took


class SandboxSession:
    def __init__(
        self,
        *,
        files: dict[str, str] | None = None,
        tmpfs_mb: int = DEFAULT_TMPFS_MB,
        limits: Limits | None = None,
        backend: object | None = None,
        sandbox: WarmSandbox | None = None,
    ) -> None:
        """Start the sandbox (or take `sandbox`, a blank one a SessionPool started with `tmpfs_mb`) and write
        `files` (relative paths) into its working directory.

        `limits` are the default limits of each call (`tmpfs_mb` in them is ignored: the session has one disk).
        `backend` is a BwrapBackend (the shared one from the registry by default). Raises SandboxStartError when
        the sandbox does not start or the files cannot be written (too large for `tmpfs_mb`, a bad name).
        """
        started = time.monotonic()
        if backend is None:
            with _BACKEND_LOCK:  # get_backend's cache is not thread-safe: two first calls would build two
                backend = get_backend("bwrap")
        bwrap = backend
        if not isinstance(bwrap, BwrapBackend):
            raise SandboxStartError("sandbox sessions run on the bwrap backend only")
        problem = bwrap.request_problem(RunRequest(language="python", code=""))
        if problem:
            raise SandboxStartError(problem)
        self.limits = limits or Limits()
        self.tmpfs_mb = tmpfs_mb
        self.stats = SessionStats()
        self.lost = False
        self._lock = threading.Lock()
        self._sandbox: WarmSandbox | None = sandbox
        for attempt in range(0 if sandbox is not None else START_ATTEMPTS):
            launcher = BwrapLauncher(backend=bwrap, tmpfs_mb=tmpfs_mb, server_args=("session",))
            try:
                self._sandbox = WarmSandbox(launcher=launcher)
                break
            except SandboxStartError:
                # A backend being built in another process sweeps empty pids cgroups (remove_stale), which
                # can take this sandbox's before it joins it: a second start gets a new one.
                if attempt == START_ATTEMPTS - 1:
                    raise
        if files:
            result = self.write_files(files)
            if result.status != Status.OK:
                self.close()
                raise SandboxStartError(
                    f"could not write the session's files: {result.stderr.strip()[-300:]}"
                )
        self.stats.started_s = time.monotonic() - started

    def run(
        self, language: str, code: str, *, stdin: str = "", files: dict[str, str] | None = None,
        limits: Limits | None = None,
    ) -> RunResult:  # fmt: skip
        """Run a program in the session's working directory; `files` are written there (overwriting) first.

        Never raises for what the program does; ValueError for a bad language or file name (a caller's bug).
        """
        request = RunRequest(
            language=language, code=code, stdin=stdin, files=dict(files or {}), limits=limits or self.limits
        )
        with self._lock:
            if self._sandbox is None:
                return RunResult(Status.SANDBOX_ERROR, None, "", SESSION_LOST if self.lost else "closed", 0.0)
            started = time.monotonic()
            report = self._sandbox.run(request)
            result = report.result
            if not report.healthy and not self._still_alive():
                self.lost = True
                self._sandbox.close()
                self._sandbox = None
                note = "\n[the session's sandbox died during this call: its files are gone]"
                result = RunResult(
                    Status.SANDBOX_ERROR, None, result.stdout, result.stderr + note, result.duration_s
                )
            self.stats.calls += 1
            self.stats.sandbox_s += time.monotonic() - started
            return result

    def write_files(self, files: dict[str, str], *, limits: Limits | None = None) -> RunResult:
        for name in files:
            _check_file_name(name)
        return self.run("python", "", files=files, limits=limits)

    @property
    def alive(self) -> bool:
        return self._sandbox is not None

    def close(self) -> None:
        """Kill the sandbox and everything in it; idempotent."""
        with self._lock:
            if self._sandbox is not None:
                self._sandbox.close()
                self._sandbox = None

    def __enter__(self) -> SandboxSession:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _still_alive(self) -> bool:
        """After a run that had to be killed: does the fork server still answer? (Its files are then intact.)"""
        assert self._sandbox is not None
        probe = self._sandbox.run(RunRequest(language="python", code="", limits=Limits(wall_s=5, cpu_s=5)))
        return probe.result.status == Status.OK


class SessionPool:
    """Blank session sandboxes started ahead of need, in background threads, so that an episode's session
    costs writing its files rather than starting bwrap and a fork server. Each sandbox serves one session
    and goes with it; taking one starts its replacement."""

    def __init__(self, *, size: int, tmpfs_mb: int = DEFAULT_TMPFS_MB, backend: object | None = None) -> None:
        if size < 1:
            raise ValueError(f"a session pool needs a size of at least 1, got {size}")
        if backend is None:
            with _BACKEND_LOCK:
                backend = get_backend("bwrap")
        if not isinstance(backend, BwrapBackend):
            raise SandboxStartError("sandbox sessions run on the bwrap backend only")
        self.size = size
        self.tmpfs_mb = tmpfs_mb
        self._backend = backend
        self._ready: queue.SimpleQueue[WarmSandbox] = queue.SimpleQueue()
        self._closed = False
        self._refill(size)

    def session(self, *, files: dict[str, str] | None = None, limits: Limits | None = None) -> SandboxSession:
        """A session holding `files`: on a ready sandbox when one is, else on one started now."""
        try:
            sandbox = self._ready.get_nowait()
        except queue.Empty:
            sandbox = None
        self._refill(1)
        return SandboxSession(
            files=files, tmpfs_mb=self.tmpfs_mb, limits=limits, backend=self._backend, sandbox=sandbox
        )

    def close(self) -> None:
        """Kill the sandboxes not taken yet (taken ones belong to their sessions)."""
        self._closed = True
        while True:
            try:
                self._ready.get_nowait().close()
            except queue.Empty:
                return

    def _refill(self, count: int) -> None:
        for _ in range(count):
            threading.Thread(target=self._start_one, daemon=True).start()

    def _start_one(self) -> None:
        if self._closed:
            return
        try:
            sandbox = WarmSandbox(
                launcher=BwrapLauncher(
                    backend=self._backend, tmpfs_mb=self.tmpfs_mb, server_args=("session",)
                )
            )
        except SandboxStartError:
            return  # the session that needs one starts it itself (and says why it could not)
        if self._closed:
            sandbox.close()
        else:
            self._ready.put(sandbox)
