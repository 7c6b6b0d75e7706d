"""How the rest of Anneal runs programs: in this process ("local") or on a sandbox host ("remote")."""

from __future__ import annotations

import time
import uuid
from typing import Any

from sandboxes import fleet
from sandboxes.registry import BACKEND_NAMES, get_backend
from sandboxes.remote import running_host
from sandboxes.types import RunRequest, RunResult

TASK_NAME = "sandbox.run_many"
QUEUE = "sandbox"
POLL_S = 0.25
MAX_SENDS = 3  # a batch is sent to at most this many hosts before the client gives up
OUTAGE_POLL_S = 1.0  # how often a client retries while Redis (broker and results) cannot be reached


def _broker_down() -> tuple[type[BaseException], ...]:
    """What Redis unreachable raises: redis-py's errors (results, heartbeats), kombu's (publishing)."""
    from kombu.exceptions import OperationalError
    from redis.exceptions import ConnectionError as RedisConnectionError
    from redis.exceptions import TimeoutError as RedisTimeoutError

    return (OperationalError, RedisConnectionError, RedisTimeoutError, ConnectionError)


class BatchLostError(RuntimeError):
    """Every host a batch was sent to died before it finished."""


class SandboxClient:
    def __init__(
        self,
        *,
        mode: str = "local",
        backend: str = "bwrap",
        broker_url: str | None = None,
        result_backend_url: str | None = None,
        timeout_s: float = 120.0,
        queue: str = QUEUE,
        team: str | None = None,
        max_batch: int | None = None,
    ) -> None:
        """Remote mode needs `broker_url` and a Redis `result_backend_url`, and a worker consuming `queue`.

        `team` (remote mode): the team whose sandbox quota the batches count against (none when None).
        `max_batch` (remote mode): larger batches go out as several of at most this many runs, all queued at
        once so several hosts work on them; set it to the team quota, which refuses a larger batch outright.
        """
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
        self.queue = queue
        self.team = team
        self.max_batch = max_batch
        self.last_hosts: list[str] = []  # remote mode: the hosts seen running the last batch, in order
        self._celery: Any = None  # a Celery app in remote mode
        self._down: tuple[type[BaseException], ...] = ()  # remote mode: what Redis unreachable raises
        self._stats_url = result_backend_url  # local mode: where the fleet's statistics are kept, if given
        if mode == "remote":
            from celery import Celery  # only remote clients pay for importing Celery

            self._celery = Celery("anneal-sandbox-client", broker=broker_url, backend=result_backend_url)
            self._down = _broker_down()

    @property
    def workers(self) -> int | None:
        """Runs of one `run_many` call in flight at once: the local backend's; None in remote mode, where the
        host that takes a batch (and how many hosts share it, `max_batch`) is not known here."""
        return get_backend(self.backend).workers if self._celery is None else None

    def run_many(self, requests: list[RunRequest], *, batch_id: str | None = None) -> list[RunResult]:
        """One result per request, in order.

        Remote mode: the batch goes to the queue under `batch_id` (a new uuid by default); if the host
        running it dies, it is sent again (at most MAX_SENDS times in all, else BatchLostError); celery's
        TimeoutError after `timeout_s` in all.
        """
        if not requests:
            return []
        if self._celery is None:
            results = get_backend(self.backend).run_many(requests)
            self._record_local(requests, results)
            return results
        return [RunResult.from_dict(d) for d in self._run_remote(requests, batch_id or uuid.uuid4().hex)]

    def _record_local(self, requests: list[RunRequest], results: list[RunResult]) -> None:
        """Count runs made in this process in the fleet's statistics, as a host counts its own, so the fleet
        page shows them (it said no batch ran while jobs ran local sandboxes). Needs the Redis result backend;
        statistics never cost a batch its results."""
        url = self._stats_url
        if not url or not url.startswith(("redis://", "rediss://", "unix://")):
            return
        try:
            import redis

            client = redis.Redis.from_url(url, socket_timeout=2, socket_connect_timeout=2)
            try:
                fleet.record(
                    client,
                    backend=self.backend,
                    results=[r.to_dict() for r in results],
                    where="local",
                    profiles=[request.profile for request in requests],
                    host=fleet.describe_host(get_backend(self.backend)),
                )
            finally:
                client.close()
        except Exception:  # noqa: BLE001 - an unreachable Redis only loses the figures
            pass

    def _run_remote(self, requests: list[RunRequest], batch_id: str) -> list[dict]:
        size = self.max_batch or len(requests)
        chunks = [requests[start : start + size] for start in range(0, len(requests), size)]
        ids = [batch_id] if len(chunks) == 1 else [f"{batch_id}-{n}" for n in range(len(chunks))]
        payloads = [[[request.to_dict() for request in chunk], self.backend] for chunk in chunks]
        kwargs = {"team": self.team} if self.team else {}
        self.last_hosts = []
        # Queue every part first, so that free hosts take them in parallel; then collect them in order.
        deadline = time.monotonic() + self.timeout_s
        results = [
            self._send(payload, kwargs=kwargs, batch_id=part_id, deadline=deadline)
            for payload, part_id in zip(payloads, ids, strict=True)
        ]
        out: list[dict] = []
        for result, payload, part_id in zip(results, payloads, ids, strict=True):
            out.extend(
                self._wait(result, payload=payload, kwargs=kwargs, batch_id=part_id, deadline=deadline)
            )
        return out

    def _send(self, payload: list, *, kwargs: dict, batch_id: str, deadline: float):
        """Queue the batch; while the broker cannot be reached (Redis restarting), again until `deadline`."""
        while True:
            try:
                return self._celery.send_task(
                    TASK_NAME, args=payload, kwargs=kwargs, queue=self.queue, task_id=batch_id
                )
            except self._down:
                if time.monotonic() + OUTAGE_POLL_S > deadline:
                    raise
                time.sleep(OUTAGE_POLL_S)

    def _wait(self, result, *, payload: list, kwargs: dict, batch_id: str, deadline: float) -> list[dict]:
        """The batch's result. A host whose heartbeat lapses without a result died: the batch goes out again
        under the same id, so there is one result in the end. Redis unreachable (restarting): wait for it, then,
        unless a host is running the batch or has finished it, send it again: a restart can lose a queued
        message, a result the host could not store, or the message a host held when its connection broke."""
        from celery.exceptions import TimeoutError as CeleryTimeoutError

        redis = self._celery.backend.client
        sends, seen_running, outage = 1, None, False
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise CeleryTimeoutError(f"sandbox batch {batch_id} had no result after {self.timeout_s} s")
            try:
                try:
                    return result.get(timeout=min(POLL_S, remaining))
                except CeleryTimeoutError:
                    pass
                host = running_host(redis, batch_id)
                lost = outage and host is None and not result.ready()
            except self._down:
                outage = True
                time.sleep(min(OUTAGE_POLL_S, max(0.0, deadline - time.monotonic())))
                continue
            if lost:
                result = self._send(payload, kwargs=kwargs, batch_id=batch_id, deadline=deadline)
                outage, seen_running = False, None
                continue
            outage = False
            if host is not None:
                if host != seen_running:
                    self.last_hosts.append(host)
                seen_running = host
                continue
            if seen_running is None or result.ready():
                continue  # not started yet (queued), or finished between the two reads
            if sends >= MAX_SENDS:
                raise BatchLostError(f"sandbox batch {batch_id}: {sends} hosts died running it")
            # The host's heartbeat lapsed without a result: it died. Same id, so one result in the end.
            result = self._send(payload, kwargs=kwargs, batch_id=batch_id, deadline=deadline)
            sends, seen_running = sends + 1, None
