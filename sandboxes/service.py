"""The JSON-in, JSON-out entry point that the "sandbox.run_many" Celery task (in workers/) calls."""

from __future__ import annotations

from sandboxes.registry import get_backend
from sandboxes.types import RunRequest


def run_many_dicts(requests: list[dict], backend: str) -> list[dict]:
    """Run RunRequest dicts on the named backend; one RunResult dict per request, in order.

    Raises ValueError for a malformed request or an unknown backend (a caller's bug, not a program's).
    """
    parsed = [RunRequest.from_dict(request) for request in requests]
    return [result.to_dict() for result in get_backend(backend).run_many(parsed)]
