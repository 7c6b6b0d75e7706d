"""How the bubblewrap backend caps the processes and the memory of one sandbox as a whole.

RLIMIT_AS bounds each process, so a run that forks eight children could hold eight times its limit, and
RLIMIT_NPROC counts every process of the real user on the host (and is not enforced at all for root). So a
cgroup is made per cold run and per warm sandbox wherever this process may create one: pids.max caps its
tasks, and the memory controller caps what all of its processes hold together (their pages, the tmpfs's,
the kernel's for them); going past it makes the kernel kill one of them, which the backend reports as
status "memory". Both cgroup v1 (a hierarchy per controller, as on this kind of host) and v2 (one tree) work.
RLIMIT_NPROC is the fallback for processes; without a writable memory controller only RLIMIT_AS remains.
"""

from __future__ import annotations

import atexit
import os
import signal
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

CGROUP_FS = Path("/sys/fs/cgroup")
PARENT_NAME = "anneal-sandbox"
STALE_AFTER_S = 60.0  # an empty child younger than this may be one another process is about to join
# Cgroups this process made and has not removed yet, by id(): removed (their processes killed) at exit, so
# a pool that was never closed leaves nothing behind in /sys/fs/cgroup. A killed process leaves them to the
# next find()'s sweep instead.
_LIVE: dict[int, RunCgroup] = {}
_PARENTS: set[Path] = set()


@dataclass
class RunCgroup:
    """One sandbox's cgroup: `pids_dir` always, `memory_dir` when a memory controller is writable (the same
    directory on cgroup v2). The sandbox joins it by writing its pid to every file in `procs_files`."""

    pids_dir: Path
    memory_dir: Path | None = None

    @property
    def path(self) -> Path:
        return self.pids_dir

    @property
    def procs_file(self) -> Path:
        return self.pids_dir / "cgroup.procs"

    @property
    def procs_files(self) -> list[Path]:
        dirs = [self.pids_dir] + ([self.memory_dir] if self.memory_dir not in (None, self.pids_dir) else [])
        return [d / "cgroup.procs" for d in dirs]

    @property
    def v2(self) -> bool:
        return (self.pids_dir / "cgroup.controllers").exists()

    def set_pids(self, pids: int) -> None:
        (self.pids_dir / "pids.max").write_text(str(pids))

    def set_memory(self, megabytes: int) -> None:
        """Cap the memory of everything in the cgroup (swap included: none may be used). OSError when the
        cgroup holds more than that already and the kernel cannot reclaim it."""
        if self.memory_dir is None:
            return
        limit = str(megabytes << 20)
        if self.v2:
            (self.memory_dir / "memory.max").write_text(limit)
            swap = self.memory_dir / "memory.swap.max"
            if swap.exists():
                swap.write_text("0")
            return
        # v1: memory+swap must stay >= memory, so raise memsw first and lower it last.
        memsw = self.memory_dir / "memory.memsw.limit_in_bytes"
        memory = self.memory_dir / "memory.limit_in_bytes"
        order = [memory, memsw]
        if int(memory.read_text()) < int(limit):
            order.reverse()
        for path in order:
            if path.exists():
                path.write_text(limit)

    def oom_kills(self) -> int:
        """How many processes the kernel has killed in this cgroup for passing its memory cap."""
        if self.memory_dir is None:
            return 0
        name = "memory.events" if self.v2 else "memory.oom_control"
        try:
            lines = (self.memory_dir / name).read_text().splitlines()
        except OSError:
            return 0
        counts = dict(line.split() for line in lines if len(line.split()) == 2)
        return int(counts.get("oom_kill", 0))

    def kill_all(self) -> None:
        """SIGKILL everything still in the cgroup; a fork bomb may race us, so repeat until it is empty."""
        for _ in range(100):
            try:
                pids = [int(line) for line in self.procs_file.read_text().split()]
            except OSError:
                return
            if not pids:
                return
            for pid in pids:
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            time.sleep(0.005)

    def remove(self) -> None:
        """Remove the cgroup; killed processes leave it asynchronously, so retry briefly."""
        _LIVE.pop(id(self), None)
        for path in {d for d in (self.pids_dir, self.memory_dir) if d is not None}:
            for _ in range(50):
                try:
                    path.rmdir()
                    break
                except FileNotFoundError:
                    break
                except OSError:
                    self.kill_all()
                    time.sleep(0.01)


@dataclass
class CgroupParent:
    """Directories under which this process can create cgroups carrying pids.max (and memory limits)."""

    path: Path  # the pids one
    memory_path: Path | None = None

    @classmethod
    def find(cls) -> CgroupParent | None:
        """The first usable place for pids (cgroup v1 pids hierarchy, then v2) and for memory (v1 memory
        hierarchy, then v2); None when no pids cgroup can be made, memory_path None when no memory one can."""
        pids = _usable_parent(_own_cgroup_dirs("pids"), "pids")
        if pids is None:
            return None
        return cls(path=pids, memory_path=_usable_parent(_own_cgroup_dirs("memory"), "memory"))

    def create(self, *, pids: int, memory_mb: int | None = None) -> RunCgroup:
        name = uuid.uuid4().hex
        run = RunCgroup(pids_dir=self.path / name)
        try:
            run.pids_dir.mkdir()
            run.set_pids(pids)
            if self.memory_path is not None:
                run.memory_dir = self.memory_path / name
                if run.memory_dir != run.pids_dir:
                    run.memory_dir.mkdir()
                if memory_mb is not None:
                    run.set_memory(memory_mb)
        except OSError:
            run.remove()
            raise
        _LIVE[id(run)] = run
        return run

    @property
    def description(self) -> str:
        """What caps processes and memory, as the health view shows it (after "processes capped by")."""
        if self.memory_path is None:
            memory = "RLIMIT_AS per process only (no writable memory cgroup)"
        else:
            memory = f"a cgroup per sandbox under {self.memory_path}"
        return f"a cgroup per sandbox under {self.path}; memory of all of a run's processes by {memory}"


def join_cgroup(cgroup: RunCgroup, argv: list[str]) -> list[str]:
    """`argv` run from a shell that first moves itself into `cgroup` (each hierarchy), so nothing it starts
    is ever outside. A preexec_fn would do it in Python between fork and exec, which is unsafe with threads.
    A write that fails ends the shell (status 125) before `argv` starts."""
    script = 'while [ "$1" != -- ]; do echo $$ > "$1" || exit 125; shift; done; shift; exec "$@"'
    return ["/bin/sh", "-c", script, "join-cgroup", *map(str, cgroup.procs_files), "--", *argv]


def _usable_parent(candidates: list[Path], controller: str) -> Path | None:
    for own in candidates:
        parent = own / PARENT_NAME
        try:
            parent.mkdir(exist_ok=True)
            # cgroup v2 only shows a controller's files in a child when the parent delegates it.
            if (parent / "cgroup.subtree_control").exists():
                (parent / "cgroup.subtree_control").write_text(f"+{controller}")
            _remove_stale(parent)
            probe = parent / uuid.uuid4().hex
            probe.mkdir()
            try:
                limit_file = {"pids": "pids.max", "memory": "memory.max"}[controller]
                if not (probe / "cgroup.controllers").exists() and controller == "memory":
                    limit_file = "memory.limit_in_bytes"
                (probe / limit_file).write_text({"pids": "8", "memory": str(64 << 20)}[controller])
            finally:
                probe.rmdir()
            if not _PARENTS:
                atexit.register(_remove_at_exit)
            _PARENTS.add(parent)
            return parent
        except OSError:
            continue
    return None


def _remove_stale(parent: Path) -> None:
    """Children left by a process that died mid-run; busy or young ones stay (another run may own them)."""
    now = time.time()
    for child in parent.iterdir():
        try:
            if child.is_dir() and now - child.stat().st_mtime > STALE_AFTER_S:
                child.rmdir()
        except OSError:
            pass


def _remove_at_exit() -> None:
    for run in list(_LIVE.values()):
        run.kill_all()  # a warm sandbox whose pool was never closed: its processes end with us anyway
        run.remove()
    for parent in _PARENTS:
        try:
            parent.rmdir()  # fails while another process still has sandboxes there: then it stays
        except OSError:
            pass


def _own_cgroup_dirs(controller: str) -> list[Path]:
    """This process's cgroup in the v1 hierarchy of `controller` and in the v2 unified one, where mounted."""
    dirs: list[Path] = []
    try:
        lines = Path("/proc/self/cgroup").read_text().splitlines()
    except OSError:
        return dirs
    for line in lines:
        _, controllers, rel = line.split(":", 2)
        if controller in controllers.split(","):
            dirs.append(CGROUP_FS / controller / rel.lstrip("/"))
        elif controllers == "" and (CGROUP_FS / "cgroup.controllers").exists():
            dirs.append(CGROUP_FS / rel.lstrip("/"))
    return dirs


def user_task_count(uid: int) -> int:
    """Tasks (threads count) of host user `uid`: what RLIMIT_NPROC counts for the processes `uid` runs."""
    total = 0
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            status = Path(entry.path, "status").read_text()
        except OSError:
            continue
        fields = dict(line.split(":", 1) for line in status.splitlines() if ":" in line)
        if int(fields.get("Uid", "-1").split()[0]) == uid:
            total += int(fields.get("Threads", "1").strip())
    return total
