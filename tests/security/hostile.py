"""What the hostile-program tests share: request builders and a check that no process outlives a run."""

import time
from pathlib import Path

from sandboxes.types import RunRequest


def python(code: str, **kwargs) -> RunRequest:
    return RunRequest(language="python", code=code, **kwargs)


def tagged_python(code: str, marker: str, **kwargs) -> RunRequest:
    """A Python program whose every process carries `marker` in its command line, so leftovers can be found."""
    launcher = f'exec /usr/bin/python3 -S -c "$(cat program.py)" {marker}'
    return RunRequest(language="shell", code=launcher, files={"program.py": code}, **kwargs)


def processes_with(marker: str) -> list[int]:
    pids = []
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            if marker.encode() in cmdline.read_bytes():
                pids.append(int(cmdline.parent.name))
        except OSError:
            continue
    return pids


def children_of(pid: int) -> list[int]:
    """The pids of `pid`'s children (their parent, from /proc/<pid>/stat)."""
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            if int(stat.read_text().rsplit(")", 1)[1].split()[1]) == pid:
                found.append(int(stat.parent.name))
        except (OSError, IndexError, ValueError):
            continue
    return found


def assert_nothing_left(marker: str) -> None:
    # Killed processes disappear asynchronously; give the kernel a moment before calling it a leak.
    for _ in range(40):
        if not processes_with(marker):
            return
        time.sleep(0.05)
    assert processes_with(marker) == []


class BackendClient:
    """Hands a scorer's batches to one backend object (SandboxClient only knows backends by name)."""

    def __init__(self, backend) -> None:
        self.backend = backend

    def run_many(self, requests):
        return self.backend.run_many(requests)
