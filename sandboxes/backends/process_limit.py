"""How the bubblewrap backend caps the number of processes in one sandbox.

RLIMIT_NPROC counts every process of the real user on the host (and is not enforced at all for root),
so a per-run pids cgroup is used wherever this process may create one; RLIMIT_NPROC is the fallback.
"""

from __future__ import annotations

import os
import signal
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

CGROUP_FS = Path("/sys/fs/cgroup")
PARENT_NAME = "anneal-sandbox"


@dataclass
class RunCgroup:
    """One sandbox run's pids cgroup. The sandbox joins it by writing its pid to `procs_file`."""

    path: Path

    @property
    def procs_file(self) -> Path:
        return self.path / "cgroup.procs"

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
        for _ in range(50):
            try:
                self.path.rmdir()
                return
            except FileNotFoundError:
                return
            except OSError:
                self.kill_all()
                time.sleep(0.01)


@dataclass
class PidsCgroupParent:
    """A cgroup directory under which this process can create children that carry pids.max."""

    path: Path

    @classmethod
    def find(cls) -> PidsCgroupParent | None:
        """The first usable place (cgroup v1 pids hierarchy, then v2), or None when none is writable."""
        for own in _own_cgroup_dirs():
            parent = cls(path=own / PARENT_NAME)
            try:
                parent.path.mkdir(exist_ok=True)
                # cgroup v2 only shows pids.max in a child when the parent delegates the controller.
                if (parent.path / "cgroup.subtree_control").exists():
                    (parent.path / "cgroup.subtree_control").write_text("+pids")
                parent.remove_stale()
                probe = parent.create(pids=8)
                probe.remove()
                return parent
            except OSError:
                continue
        return None

    def create(self, *, pids: int) -> RunCgroup:
        run = RunCgroup(path=self.path / uuid.uuid4().hex)
        run.path.mkdir()
        try:
            (run.path / "pids.max").write_text(str(pids))
        except OSError:
            run.remove()
            raise
        return run

    def remove_stale(self) -> None:
        """Children left by a process that died mid-run; busy ones stay (another run may own them)."""
        for child in self.path.iterdir():
            if child.is_dir():
                try:
                    child.rmdir()
                except OSError:
                    pass


def _own_cgroup_dirs() -> list[Path]:
    """This process's cgroup in the v1 pids hierarchy and in the v2 unified one, where mounted."""
    dirs = []
    try:
        lines = Path("/proc/self/cgroup").read_text().splitlines()
    except OSError:
        return dirs
    for line in lines:
        _, controllers, rel = line.split(":", 2)
        if "pids" in controllers.split(","):
            dirs.append(CGROUP_FS / "pids" / rel.lstrip("/"))
        elif controllers == "" and (CGROUP_FS / "cgroup.controllers").exists():
            dirs.append(CGROUP_FS / rel.lstrip("/"))
    return dirs


def user_task_count() -> int:
    """Tasks (threads count) of this real user on the host: what RLIMIT_NPROC is compared against."""
    uid = os.getuid()
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
