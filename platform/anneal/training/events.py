"""Record job events with a gap-free per-job sequence and broadcast them after commit."""

import asyncio
import json
import logging
import os
import threading

from channels.layers import get_channel_layer
from django.db import transaction
from django.db.models import F

from anneal.errors import without_nul
from anneal.training.models import Job, JobEvent


def job_group(job_id: int) -> str:
    return f"job-{job_id}"


logger = logging.getLogger(__name__)


class _LayerSender:
    """Sends channel-layer messages from synchronous code through one event loop thread per process.

    async_to_sync would run each send on a new event loop, and channels-redis keeps its connections per
    loop, so every event paid for a fresh Redis connection (~6 ms). A forked worker starts its own thread.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._pid = 0
        self._loop: asyncio.AbstractEventLoop | None = None

    def _running_loop(self) -> asyncio.AbstractEventLoop:
        with self._lock:
            if self._pid != os.getpid() or self._loop is None:
                self._loop = asyncio.new_event_loop()
                threading.Thread(
                    target=self._loop.run_forever, name="channel-layer-sender", daemon=True
                ).start()
                self._pid = os.getpid()
            return self._loop

    def group_send(self, group: str, message: dict, *, timeout_s: float = 10.0) -> None:
        layer = get_channel_layer()
        if layer is not None:
            asyncio.run_coroutine_threadsafe(layer.group_send(group, message), self._running_loop()).result(
                timeout_s
            )


_sender = _LayerSender()


def broadcast_on_commit(group: str, events: list[dict]) -> None:
    """After the transaction commits, send the events to the group as one message (one frame per batch).

    A failed send is logged, not raised: the events are stored, and a client fills the gap from the
    database when the next message arrives or when it reconnects.
    """
    # Encode once here: an unserialisable payload fails in the writer, not in a consumer, and every consumer
    # that forwards the batch whole sends this text instead of encoding the same frame again.
    frame = json.dumps({"type": "events", "events": events, "skipped": []})
    events = json.loads(frame)["events"]

    def send() -> None:
        # Twice: after Redis restarts, the first send goes out on a pooled connection the restart broke.
        for tries_left in (1, 0):
            try:
                _sender.group_send(group, {"type": "job.events", "events": events, "frame": frame})
                return
            except Exception:
                if not tries_left:
                    logger.exception("could not broadcast %d event(s) to %s", len(events), group)

    transaction.on_commit(send)


def job_events_record(*, job_id: int, events: list[tuple[str, dict]]) -> list[JobEvent]:
    """Append events in order. The job row's lock serialises writers, so numbers never repeat or skip."""
    if not events:
        return []
    payloads = [without_nul(payload) for _, payload in events]
    with transaction.atomic():
        Job.objects.filter(pk=job_id).update(last_seq=F("last_seq") + len(events))
        last = Job.objects.values_list("last_seq", flat=True).get(pk=job_id)
        first = last - len(events) + 1
        created = JobEvent.objects.bulk_create(
            [
                JobEvent(job_id=job_id, seq=first + i, kind=kind, payload=payload)
                for i, ((kind, _), payload) in enumerate(zip(events, payloads, strict=True))
            ]
        )
        broadcast_on_commit(job_group(job_id), [event.as_message() for event in created])
    return created


def job_event_record(*, job_id: int, kind: str, payload: dict) -> JobEvent:
    return job_events_record(job_id=job_id, events=[(kind, payload)])[0]
