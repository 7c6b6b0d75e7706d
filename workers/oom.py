"""Whether the kernel's out-of-memory killer ended a training process, and how much memory it had used.

A SIGKILL nobody in Anneal sent is most often the OOM killer: a batch, a completion length or a model that
does not fit the host. The kernel counts its kills in /proc/vmstat (``oom_kill``, cgroup limits included), so
a kill that arrives while that count went up is reported as memory, with the process's peak resident size
(read from /proc while it ran), instead of a bare signal name.
"""

from __future__ import annotations

import os
from pathlib import Path

VMSTAT = Path("/proc/vmstat")
ADVICE = (
    "if it happens again, give it less to hold at once: activation_checkpointing on, fewer prompts_per_step "
    "or num_generations, a shorter max_completion_length (agent jobs: context_tokens), or LoRA (lora_rank) "
    "instead of full weights"
)


def oom_kill_count() -> int | None:
    """The kernel's count of OOM kills since boot, or None where /proc/vmstat does not give it."""
    try:
        for line in VMSTAT.read_text().splitlines():
            name, _, value = line.partition(" ")
            if name == "oom_kill":
                return int(value)
    except (OSError, ValueError):
        return None
    return None


def peak_rss(pid: int) -> int | None:
    """The peak resident memory of process ``pid`` so far (VmHWM), in bytes; None once it is gone."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        return None
    return None


def host_memory() -> int:
    return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")


def gib(size: int) -> str:
    return f"{size / (1 << 30):.1f} GiB"


def killed_reason(signal_name: str, *, oom_kills_before: int | None, peak: int | None) -> str:
    """Why the training process died of ``signal_name``: memory where the OOM killer ran since the attempt
    began (``oom_kills_before``: the count then), else the signal's name."""
    after = oom_kill_count()
    if (
        signal_name == "SIGKILL"
        and oom_kills_before is not None
        and after is not None
        and after > oom_kills_before
    ):
        used = f"it had used up to {gib(peak)}, " if peak else ""
        return (
            f"the training process ran out of memory: the kernel's out-of-memory killer ended it with SIGKILL "
            f"({used}this host has {gib(host_memory())}); {ADVICE}"
        )
    return f"the training process was killed by {signal_name}"
