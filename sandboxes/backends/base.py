"""The interface every sandbox backend implements (bubblewrap now; docker and kubernetes later)."""

from __future__ import annotations

from abc import ABC, abstractmethod

from sandboxes.profiles import PROFILES
from sandboxes.types import RunRequest, RunResult


class SandboxBackend(ABC):
    name: str
    workers: int = 1  # runs of one run_many call in flight at once

    @abstractmethod
    def run(self, request: RunRequest) -> RunResult:
        """Run one program. A program that fails, hangs or floods is reported in the result, never raised."""

    def run_many(self, requests: list[RunRequest]) -> list[RunResult]:
        """One result per request, in the order given. Backends may run them concurrently."""
        return [self.run(request) for request in requests]

    @abstractmethod
    def health(self) -> dict:
        """{"ok": bool, "backend": name, "detail": str}; cheap enough for a status page."""

    def profiles(self) -> list[str]:
        """The sandbox profiles this backend can run here (sandboxes/profiles.py); all of them by default."""
        return list(PROFILES)

    def warm_pools(self) -> dict[str, int]:
        """Warm sandboxes by the profiles they serve ("all" for a pool that serves every one); none by default."""
        return {}
