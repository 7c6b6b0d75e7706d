"""How the rest of Anneal runs programs: in this process ("local") or on a sandbox host ("remote")."""

from __future__ import annotations

from sandboxes.registry import BACKEND_NAMES, get_backend
from sandboxes.types import RunRequest, RunResult

TASK_NAME = "sandbox.run_many"
QUEUE = "sandbox"


class SandboxClient:
    def __init__(
        self,
        *,
        mode: str = "local",
        backend: str = "bwrap",
        broker_url: str | None = None,
        result_backend_url: str | None = None,
        timeout_s: float = 120.0,
    ) -> None:
        """Remote mode needs `broker_url` and `result_backend_url` and a worker consuming the "sandbox" queue."""
        if mode not in ("local", "remote"):
            raise ValueError(f"mode must be 'local' or 'remote', got {mode!r}")
        if backend not in BACKEND_NAMES:
            raise ValueError(
                f"unknown sandbox backend {backend!r}; known backends: {', '.join(BACKEND_NAMES)}"
            )
        if mode == "remote" and not (broker_url and result_backend_url):
            raise ValueError("remote mode needs broker_url and result_backend_url")
        self.mode = mode
        self.backend = backend
        self.timeout_s = timeout_s
        self._celery = None
        if mode == "remote":
            from celery import Celery  # only remote clients pay for importing Celery

            self._celery = Celery("anneal-sandbox-client", broker=broker_url, backend=result_backend_url)

    def run_many(self, requests: list[RunRequest]) -> list[RunResult]:
        """One result per request, in order. Remote mode raises celery's TimeoutError after `timeout_s`."""
        if not requests:
            return []
        if self._celery is None:
            return get_backend(self.backend).run_many(requests)
        async_result = self._celery.send_task(
            TASK_NAME, args=[[request.to_dict() for request in requests], self.backend], queue=QUEUE
        )
        return [RunResult.from_dict(d) for d in async_result.get(timeout=self.timeout_s)]
