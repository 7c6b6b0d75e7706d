"""How a finished (or killed) sandboxed program becomes a RunResult, shared by every backend.

The bubblewrap backend's cold runs, the warm pool's fork servers and the kubernetes pods' runner all end with
the same facts (exit code, captured output, whether the host killed it for time or output); this module alone
turns them into a status and a note, so the same program gets the same verdict on every backend.
"""

from __future__ import annotations

import signal
from dataclasses import dataclass

from sandboxes.types import Limits, RunResult, Status

# The run's cgroup holds its processes' memory, its tmpfs's pages and bwrap's own (or the fork server's): the
# cap is the run's memory_mb plus the tmpfs plus this, so one process that reaches its RLIMIT_AS still gets a
# MemoryError first, and several together are stopped near the limit instead of at a multiple of it.
SANDBOX_MEMORY_MB = 32
# What running out of RLIMIT_AS looks like: Python's MemoryError, libc's ENOMEM text (shell tools), and the
# dynamic loader failing to map a library when the limit is below what the interpreter itself needs.
MEMORY_MARKERS = (
    "MemoryError",
    "Cannot allocate memory",
    "memory exhausted",
    "out of memory",
    "failed to map segment",
)
SIGXCPU_EXIT = 128 + signal.SIGXCPU


@dataclass
class Outcome:
    """What came out of a finished (or killed) sandboxed program, before it is turned into a RunResult."""

    exit_code: int | None
    stdout: bytes
    stderr: bytes
    timed_out: bool
    flooded: bool


def cgroup_memory_mb(limits: Limits, *, tmpfs_mb: int) -> int:
    """What a run's cgroup may hold: its address-space limit, its tmpfs and the sandbox's own processes."""
    return limits.memory_mb + tmpfs_mb + SANDBOX_MEMORY_MB


def run_result(
    outcome: Outcome, limits: Limits, *, program_ran: bool, duration_s: float, oom_killed: bool = False
) -> RunResult:
    """`oom_killed`: the kernel killed a process of the run for passing the memory cap of its cgroup."""
    stdout, stdout_cut = _decode(outcome.stdout, limits.output_bytes)
    stderr, stderr_cut = _decode(outcome.stderr, limits.output_bytes)
    exit_code = outcome.exit_code

    def result(status: Status, note: str = "") -> RunResult:
        killed_by_us = status in (Status.TIMEOUT, Status.OUTPUT_LIMIT) and (exit_code or 0) < 0
        code = None if killed_by_us else exit_code
        return RunResult(status, code, stdout, stderr + note, round(duration_s, 4))

    if outcome.flooded or stdout_cut or stderr_cut:
        return result(Status.OUTPUT_LIMIT, f"\n[killed: output passed {limits.output_bytes} bytes]")
    if outcome.timed_out:
        return result(Status.TIMEOUT, f"\n[killed: wall time limit of {limits.wall_s} s]")
    if oom_killed:
        note = (
            f"\n[memory limit: the run's processes together passed {limits.memory_mb} MB; "
            "the kernel killed at least one]"
        )
        return result(Status.MEMORY, note)
    if not program_ran:
        return RunResult(Status.SANDBOX_ERROR, None, stdout, stderr, round(duration_s, 4))
    if exit_code == 0:
        return result(Status.OK)
    if exit_code == SIGXCPU_EXIT:
        return result(Status.TIMEOUT, f"\n[killed: CPU time limit of {limits.cpu_s} s]")
    if any(marker in stderr for marker in MEMORY_MARKERS):
        return result(Status.MEMORY, f"\n[memory limit: {limits.memory_mb} MB of address space]")
    return result(Status.FAILED)


def _decode(data: bytes, cap: int) -> tuple[str, bool]:
    if len(data) <= cap:
        return data.decode(errors="replace"), False
    return data[:cap].decode(errors="replace") + f"\n[output truncated at {cap} bytes]", True
