"""The live view of a job: every event from the one after the client's last, then the live stream.

Order matters and nothing may be lost. The consumer joins the job's group *before* reading the database,
so an event committed during the replay is either in what the replay reads or arrives later from the
group (often both: the duplicate is dropped by seq). Channels hands this consumer one message at a time,
so group messages that arrive during the replay wait until it ends. A group message can still be lost
(a full channel drops it); the next one then shows a gap, which is filled from the database first.
"""

from urllib.parse import parse_qs

from channels.db import database_sync_to_async
from channels.generic.websocket import AsyncJsonWebsocketConsumer

from anneal.accounts.selectors import teams_for
from anneal.training.events import job_group
from anneal.training.models import Job, JobEvent

PAGE_SIZE = 500
# Close codes in the application range (4000-4999) so the page can tell them from network failures.
CLOSE_UNAUTHENTICATED = 4401
CLOSE_NOT_FOUND = 4404


class JobEventsConsumer(AsyncJsonWebsocketConsumer):
    """``ws/jobs/<job_id>/?after=N``: sends {"type": "event", "event": {...}} per event with seq > N, in order,
    then {"type": "replayed", "last_seq": M} once the database has been caught up with, then live events."""

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
        await self.accept()
        self.group = job_group(self.job_id)
        await self.channel_layer.group_add(self.group, self.channel_name)
        await self._send_from_database()
        await self.send_json({"type": "replayed", "last_seq": self.last_sent})

    async def disconnect(self, code: int) -> None:
        if self.group:
            await self.channel_layer.group_discard(self.group, self.channel_name)

    async def receive_json(self, content, **kwargs) -> None:
        """The stream is one-way; whatever a client sends is ignored."""

    async def job_event(self, message: dict) -> None:
        event = message["event"]
        seq = event["seq"]
        if seq <= self.last_sent:
            return
        if seq > self.last_sent + 1:
            await self._send_from_database()
            if seq <= self.last_sent:
                return
        await self._send_event(event)

    async def _send_from_database(self) -> None:
        while True:
            page = await self._events_after(self.last_sent)
            for event in page:
                await self._send_event(event)
            if len(page) < PAGE_SIZE:
                return

    async def _send_event(self, event: dict) -> None:
        await self.send_json({"type": "event", "event": event})
        self.last_sent = event["seq"]

    @database_sync_to_async
    def _may_see(self, user) -> bool:
        return Job.objects.filter(pk=self.job_id, team__in=teams_for(user)).exists()

    @database_sync_to_async
    def _events_after(self, after: int) -> list[dict]:
        events = JobEvent.objects.filter(job_id=self.job_id, seq__gt=after).order_by("seq")[:PAGE_SIZE]
        return [event.as_message() for event in events]


def _after(query_string: bytes) -> int:
    """The ``after`` query parameter: a seq the client already holds; 0 (everything) when absent or bad."""
    values = parse_qs(query_string.decode("latin-1")).get("after", [])
    try:
        return max(0, int(values[-1])) if values else 0
    except ValueError:
        return 0
