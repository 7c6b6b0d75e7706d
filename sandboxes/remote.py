"""Batches on sandbox hosts that may die: a heartbeat per batch, and a client that re-sends a lost batch.

The "sandbox.run_many" task runs with acks_late and reject_on_worker_lost, so a batch whose worker process
dies is re-queued by its worker. A whole host that dies (SIGKILL, power) leaves the message unacknowledged
until the broker's visibility timeout, far longer than a client waits; so while a host runs a batch it keeps
a short-lived heartbeat key in Redis, and a client that sees the heartbeat lapse without a result sends the
same batch again, under the same id, to whichever host is free.

No result is returned twice: a batch id is the Celery task id, the result backend keeps one result per id,
the client returns the first result it reads and stops, and a host that receives a batch whose result is
already stored returns that result instead of running it again.
"""

from __future__ import annotations

import os
import socket
import threading
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from redis import Redis

HEARTBEAT_EVERY_S = 1.0
HEARTBEAT_TTL_S = 4.0  # a host that misses this many seconds of beats counts as dead
KEY_PREFIX = "anneal:sandbox:batch:"


def heartbeat_key(batch_id: str) -> str:
    return f"{KEY_PREFIX}{batch_id}:host"


def host_label() -> str:
    return f"{socket.gethostname()}:{os.getpid()}"


@dataclass
class Heartbeat:
    """Keeps `heartbeat_key(batch_id)` alive (value: this host and pid) while a batch runs.

    `redis` is a redis-py client (the Celery result backend's, for instance). The key is left to expire
    rather than deleted, so it outlives the moment between the task's return and its result being stored.
    """

    redis: Redis
    batch_id: str

    def __post_init__(self) -> None:
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._beat, daemon=True, name=f"heartbeat-{self.batch_id}")

    def __enter__(self) -> Heartbeat:
        self._set()
        self._thread.start()
        return self

    def __exit__(self, *exc_info) -> None:
        self._stop.set()
        self._thread.join()

    def _set(self) -> None:
        try:
            self.redis.set(heartbeat_key(self.batch_id), host_label(), px=int(HEARTBEAT_TTL_S * 1000))
        except Exception:  # noqa: BLE001 - a missed beat only risks a duplicate run, never a wrong result
            pass

    def _beat(self) -> None:
        while not self._stop.wait(HEARTBEAT_EVERY_S):
            self._set()


def running_host(redis: Redis, batch_id: str) -> str | None:
    """The host and pid whose heartbeat for `batch_id` is alive, or None."""
    value = redis.get(heartbeat_key(batch_id))
    return value.decode() if isinstance(value, bytes) else value
