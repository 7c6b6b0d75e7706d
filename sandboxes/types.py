"""What a sandbox is asked to run and what comes back: plain data that crosses process boundaries as JSON."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import PurePosixPath

from sandboxes.profiles import PYTHON, profile_problem

LANGUAGES = ("python", "shell")


class Status(StrEnum):
    OK = "ok"
    FAILED = "failed"  # the program exited non-zero (or was killed by a signal we did not send)
    TIMEOUT = "timeout"  # wall clock or CPU time ran out
    MEMORY = "memory"  # the program ran out of its address-space limit
    OUTPUT_LIMIT = "output_limit"  # stdout or stderr passed Limits.output_bytes; the program was killed
    SANDBOX_ERROR = "sandbox_error"  # the sandbox itself could not start the program


@dataclass(frozen=True)
class Limits:
    wall_s: float = 5.0
    cpu_s: float = 5.0
    memory_mb: int = 256  # address space (RLIMIT_AS), so it also bounds what the interpreter maps
    pids: int = 64  # tasks (processes and threads) alive at once in the sandbox
    file_size_mb: int = 8  # largest single file the program may write
    output_bytes: int = 65536  # kept per stream (stdout, stderr)
    tmpfs_mb: int = 16  # the whole writable filesystem (/tmp, which holds the working directory)

    def __post_init__(self) -> None:
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            if isinstance(value, bool) or not isinstance(value, int | float) or value <= 0:
                raise ValueError(f"Limits.{f.name} must be a positive number, got {value!r}")


def _check_file_name(name: str) -> None:
    path = PurePosixPath(name)
    if not name or path.is_absolute() or ".." in path.parts or name.endswith("/"):
        raise ValueError(f"file name {name!r} must be a relative path inside the working directory")


@dataclass
class RunRequest:
    """A program and its inputs. `files` are written (relative to the working directory) before it starts.
    `profile` names the toolchains it needs beside Python and the shell (sandboxes/profiles.py)."""

    language: str  # "python" | "shell"
    code: str
    stdin: str = ""
    files: dict[str, str] = field(default_factory=dict)
    limits: Limits = field(default_factory=Limits)
    profile: str = PYTHON

    def __post_init__(self) -> None:
        if self.language not in LANGUAGES:
            raise ValueError(f"language must be one of {', '.join(LANGUAGES)}, got {self.language!r}")
        problem = profile_problem(self.profile)
        if problem:
            raise ValueError(problem)
        for name in self.files:
            _check_file_name(name)

    def to_dict(self) -> dict:
        return {
            "language": self.language,
            "code": self.code,
            "stdin": self.stdin,
            "files": dict(self.files),
            "limits": dataclasses.asdict(self.limits),
            "profile": self.profile,
        }

    @classmethod
    def from_dict(cls, d: dict) -> RunRequest:
        return cls(
            language=d["language"],
            code=d["code"],
            stdin=d.get("stdin", ""),
            files=dict(d.get("files") or {}),
            limits=Limits(**(d.get("limits") or {})),
            profile=d.get("profile") or PYTHON,  # a request from a client older than profiles
        )


@dataclass
class RunResult:
    status: Status
    exit_code: int | None  # None when no program ran (sandbox_error) or it never reported one
    stdout: str
    stderr: str
    duration_s: float

    def to_dict(self) -> dict:
        return {
            "status": str(self.status),
            "exit_code": self.exit_code,
            "stdout": self.stdout,
            "stderr": self.stderr,
            "duration_s": self.duration_s,
        }

    @classmethod
    def from_dict(cls, d: dict) -> RunResult:
        return cls(
            status=Status(d["status"]),
            exit_code=d["exit_code"],
            stdout=d["stdout"],
            stderr=d["stderr"],
            duration_s=d["duration_s"],
        )
