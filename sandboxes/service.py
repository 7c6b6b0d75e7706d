"""The JSON-in, JSON-out entry point that the "sandbox.run_many" Celery task (in workers/) calls."""

from __future__ import annotations

from contextlib import AbstractContextManager, nullcontext
from typing import TYPE_CHECKING

from sandboxes import fleet
from sandboxes.registry import get_backend
from sandboxes.remote import Heartbeat
from sandboxes.types import RunRequest

if TYPE_CHECKING:
    from redis import Redis


def run_many_dicts(
    requests: list[dict], backend: str, *, batch_id: str | None = None, redis: Redis | None = None
) -> list[dict]:
    """Run RunRequest dicts on the named backend; one RunResult dict per request, in order.

    With `batch_id` and a redis-py client `redis`, a heartbeat tells waiting clients this host is alive
    (see sandboxes/remote.py). Raises ValueError for a malformed request or an unknown backend (a caller's
    bug, not a program's).
    """
    parsed = [RunRequest.from_dict(request) for request in requests]
    sandbox = get_backend(backend)
    if batch_id is None or redis is None:
        return [result.to_dict() for result in sandbox.run_many(parsed)]
    with Heartbeat(redis=redis, batch_id=batch_id):
        return [result.to_dict() for result in sandbox.run_many(parsed)]


def run_batch(
    requests: list[dict], backend: str, *, batch_id: str, redis: Redis, team: str | None, quota: int
) -> list[dict] | None:
    """What a sandbox host does with one batch from the queue: the team's quota, the run, the statistics.

    Returns None when `team` has no room for the batch under `quota` right now (the caller retries later);
    raises fleet.QuotaError when the batch could never fit. `redis` is a redis-py client.
    """
    held: AbstractContextManager = nullcontext()
    if team:
        leases = fleet.try_acquire(redis, team=team, runs=len(requests), quota=quota)
        if leases is None:
            return None
        held = leases  # renewed while the batch runs, released after it
    with held:
        results = run_many_dicts(requests, backend, batch_id=batch_id, redis=redis)
    try:
        fleet.record(
            redis,
            backend=backend,
            results=results,
            profiles=[str(request.get("profile") or "python") for request in requests],
            host=fleet.describe_host(get_backend(backend)),
        )
    except Exception:  # noqa: BLE001 - statistics never cost a batch its results
        pass
    return results
