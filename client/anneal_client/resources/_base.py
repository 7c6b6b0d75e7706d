"""What every resource shares: running plans, and iterating over pages that the client fetches by itself."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Callable, Iterator
from typing import TYPE_CHECKING, Any, TypeVar

from anneal_client._errors import AnnealError, APIConnectionError, InternalServerError
from anneal_client._plan import Plan, Sleep
from anneal_client._retry import retry_delay

if TYPE_CHECKING:
    from anneal_client._transport import AsyncTransport, SyncTransport

T = TypeVar("T")
C = TypeVar("C")
# One page: its items, and where the next begins (None: this was the last).
PagePlan = Callable[[C], Plan[tuple[list[T], C | None]]]


class WaitTimeout(AnnealError):
    """Waiting for an upload, job or deployment took longer than the timeout given."""


def deadline_check(deadline: float | None, what: str) -> None:
    if deadline is not None and time.monotonic() > deadline:
        raise WaitTimeout(f"timed out waiting for {what}")


def poll(
    fetch: Callable[[], Plan[T]],
    done: Callable[[T], bool],
    *,
    what: str,
    timeout: float | None,
    interval: float,
    on_update: Callable[[T], None] | None = None,
) -> Plan[T]:
    """Fetch until ``done`` holds, pausing ``interval`` seconds between fetches."""
    deadline = None if timeout is None else time.monotonic() + timeout
    while True:
        value = yield from fetch()
        if on_update is not None:
            on_update(value)
        if done(value):
            return value
        deadline_check(deadline, what)
        yield Sleep(interval)


# Failures worth waiting out while following a stream (a restarted web server, a dropped connection); the
# stream goes on from the last item it delivered, so nothing is lost or repeated.
TRANSIENT = (APIConnectionError, InternalServerError)


class SyncResource:
    def __init__(self, transport: SyncTransport) -> None:
        self._transport = transport

    def _run(self, plan: Plan[T]) -> T:
        return self._transport.run(plan)

    def _iterate(self, page: PagePlan[C, T], cursor: C, *, reconnect_for: float = 0.0) -> Iterator[T]:
        failing_since: float | None = None
        attempt = 0
        next_cursor: C | None = cursor
        while next_cursor is not None:
            try:
                items, following = self._run(page(next_cursor))
            except TRANSIENT:
                failing_since = failing_since or time.monotonic()
                if time.monotonic() - failing_since > reconnect_for:
                    raise
                time.sleep(retry_delay(attempt))
                attempt += 1
                continue
            failing_since, attempt = None, 0
            yield from items
            next_cursor = following


class AsyncResource:
    def __init__(self, transport: AsyncTransport) -> None:
        self._transport = transport

    async def _run(self, plan: Plan[T]) -> T:
        return await self._transport.run(plan)

    async def _iterate(
        self, page: PagePlan[C, T], cursor: C, *, reconnect_for: float = 0.0
    ) -> AsyncIterator[T]:
        failing_since: float | None = None
        attempt = 0
        next_cursor: C | None = cursor
        while next_cursor is not None:
            try:
                items, following = await self._run(page(next_cursor))
            except TRANSIENT:
                failing_since = failing_since or time.monotonic()
                if time.monotonic() - failing_since > reconnect_for:
                    raise
                await asyncio.sleep(retry_delay(attempt))
                attempt += 1
                continue
            failing_since, attempt = None, 0
            for item in items:
                yield item
            next_cursor = following


def clean(values: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in values.items() if v is not None}
