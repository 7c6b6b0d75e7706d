"""The live view of a job: every event from the one after the client's last, then the live stream.

Order matters and nothing may be lost. The consumer joins the job's group *before* reading the database,
so an event committed during the replay is either in what the replay reads or arrives later from the
group (often both: the duplicate is dropped by seq). Channels hands this consumer one message at a time,
so group messages that arrive during the replay wait until it ends. A group message can still be lost
(a full channel drops it); the next one then shows a gap, which is filled from the database first.

A browser cannot draw thousands of rollouts a second, so rollouts are sampled: a replay sends the newest
``REPLAY_ROLLOUTS`` of them, and the live stream at most ``LIVE_ROLLOUTS_PER_S`` a second (with a burst).
Every other event always goes out. A sampled-out rollout is not lost: its seq is listed in the frame's
``skipped``, so the client still holds an unbroken sequence, and the REST API serves the full set.
"""

import time
from urllib.parse import parse_qs

from channels.db import database_sync_to_async
from channels.generic.websocket import AsyncJsonWebsocketConsumer

from anneal.accounts.selectors import teams_for
from anneal.training.events import job_group
from anneal.training.job_page import event_as_read
from anneal.training.models import EventKind, Job, JobEvent

PAGE_SIZE = 500
REPLAY_ROLLOUTS = 200
LIVE_ROLLOUTS_PER_S = 20.0
LIVE_ROLLOUT_BURST = 40.0
# Close codes in the application range (4000-4999) so the page can tell them from network failures.
CLOSE_UNAUTHENTICATED = 4401
CLOSE_NOT_FOUND = 4404


class RolloutBudget:
    """A token bucket: how many live rollouts a client may still be sent now."""

    def __init__(self, *, rate: float, burst: float) -> None:
        self.rate, self.burst = rate, burst
        self.tokens, self.at = burst, time.monotonic()

    def take(self) -> bool:
        return self.take_many(1)

    def take_many(self, count: int) -> bool:
        """Take ``count`` tokens if there are that many; otherwise take none."""
        now = time.monotonic()
        self.tokens = min(self.burst, self.tokens + (now - self.at) * self.rate)
        self.at = now
        if self.tokens >= count:
            self.tokens -= count
            return True
        return False


class JobEventsConsumer(AsyncJsonWebsocketConsumer):
    """``ws/jobs/<job_id>/?after=N`` sends, in order, frames ``{"type": "events", "events": [...],
    "skipped": [seq, ...]}`` that together cover every seq > N once; then ``{"type": "replayed",
    "last_seq": M}`` when the database has been caught up with; then live frames of the same shape."""

    job_id: int
    group: str = ""
    last_sent: int = 0

    async def connect(self) -> None:
        user = self.scope.get("user")
        self.job_id = self.scope["url_route"]["kwargs"]["job_id"]
        # Accept before closing: a close during the handshake reaches browsers as a bare 1006, code lost.
        if user is None or not user.is_authenticated:
            await self.accept()
            await self.close(code=CLOSE_UNAUTHENTICATED)
            return
        if not await self._may_see(user):
            await self.accept()
            await self.close(code=CLOSE_NOT_FOUND)
            return
        self.last_sent = _after(self.scope.get("query_string", b""))
        self.budget = RolloutBudget(rate=LIVE_ROLLOUTS_PER_S, burst=LIVE_ROLLOUT_BURST)
        await self.accept()
        self.group = job_group(self.job_id)
        await self.channel_layer.group_add(self.group, self.channel_name)
        oldest_kept = await self._oldest_replayed_rollout(self.last_sent)
        await self._send_from_database(keep_rollout=lambda event: event["seq"] >= oldest_kept)
        await self.send_json({"type": "replayed", "last_seq": self.last_sent})

    async def disconnect(self, code: int) -> None:
        if self.group:
            await self.channel_layer.group_discard(self.group, self.channel_name)

    async def receive(self, text_data=None, bytes_data=None, **kwargs) -> None:
        """The stream is one-way; whatever a client sends is ignored, unread: text that is not JSON, or
        bytes, would otherwise fail the JSON decoding and close the stream."""

    async def job_events(self, message: dict) -> None:
        events = message["events"]
        if message.get("frame") and events[0]["seq"] == self.last_sent + 1 and self._keeps_all(events):
            # The common case: the next batch, nothing to sample out. Forward the writer's encoding.
            await self.send(text_data=message["frame"])
            self.last_sent = events[-1]["seq"]
            return
        events = [event for event in events if event["seq"] > self.last_sent]
        if events and events[0]["seq"] > self.last_sent + 1:
            await self._send_from_database(keep_rollout=self._live_keep)
            events = [event for event in events if event["seq"] > self.last_sent]
        if events:
            await self._send_frame(events, keep_rollout=self._live_keep)

    def _live_keep(self, event: dict) -> bool:
        return self.budget.take()

    def _keeps_all(self, events: list[dict]) -> bool:
        rollouts = sum(1 for event in events if event["kind"] == EventKind.ROLLOUT)
        return rollouts == 0 or self.budget.take_many(rollouts)

    async def _send_from_database(self, *, keep_rollout) -> None:
        while True:
            page = await self._events_after(self.last_sent)
            if page:
                await self._send_frame(page, keep_rollout=keep_rollout)
            if len(page) < PAGE_SIZE:
                return

    async def _send_frame(self, events: list[dict], *, keep_rollout) -> None:
        sent, skipped = [], []
        for event in events:
            if event["kind"] == EventKind.ROLLOUT and not keep_rollout(event):
                skipped.append(event["seq"])
            else:
                sent.append(event)
        await self.send_json({"type": "events", "events": sent, "skipped": skipped})
        self.last_sent = events[-1]["seq"]

    @database_sync_to_async
    def _may_see(self, user) -> bool:
        return Job.objects.filter(pk=self.job_id, team__in=teams_for(user)).exists()

    @database_sync_to_async
    def _oldest_replayed_rollout(self, after: int) -> int:
        newest = (
            JobEvent.objects.filter(job_id=self.job_id, kind=EventKind.ROLLOUT, seq__gt=after)
            .order_by("-seq")
            .values_list("seq", flat=True)[REPLAY_ROLLOUTS - 1 : REPLAY_ROLLOUTS]
        )
        return next(iter(newest), 0)

    @database_sync_to_async
    def _events_after(self, after: int) -> list[dict]:
        events = JobEvent.objects.filter(job_id=self.job_id, seq__gt=after).order_by("seq")[:PAGE_SIZE]
        return [event_as_read(event.as_message()) for event in events]


def _after(query_string: bytes) -> int:
    """The ``after`` query parameter: a seq the client already holds; 0 (everything) when absent or bad."""
    values = parse_qs(query_string.decode("latin-1")).get("after", [])
    try:
        return max(0, int(values[-1])) if values else 0
    except ValueError:
        return 0
