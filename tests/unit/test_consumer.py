"""The job's websocket on the real ASGI application (session auth, origin check, router) and the Redis channel
layer: replay from the database, then live events, each exactly once and in order."""

import uuid

import pytest
from asgiref.sync import async_to_sync, sync_to_async
from channels.layers import get_channel_layer
from channels.testing import WebsocketCommunicator
from django.contrib.auth.models import User

from anneal.training.consumers import LIVE_ROLLOUT_BURST, PAGE_SIZE, REPLAY_ROLLOUTS
from anneal.training.events import job_events_record, job_group
from anneal.training.models import Job, JobEvent, JobState
from anneal.training.services import job_finish
from tests.world import page_client

pytestmark = pytest.mark.django_db(transaction=True)

ORIGIN = (b"origin", b"http://127.0.0.1:8000")
TIMEOUT = 5


@pytest.fixture(autouse=True)
def private_channel_layer(settings):
    # Each test gets its own key prefix: group names ("job-1") repeat across test databases and runs.
    layers = {**settings.CHANNEL_LAYERS}
    layers["default"] = {**layers["default"], "CONFIG": {**layers["default"]["CONFIG"]}}
    layers["default"]["CONFIG"]["prefix"] = f"test-{uuid.uuid4().hex[:8]}"
    settings.CHANNEL_LAYERS = layers


@pytest.fixture
def job(launch) -> Job:
    return launch("live")


def session_cookie(user: User | None) -> list[tuple[bytes, bytes]]:
    if user is None:
        return []
    session = page_client(user).cookies["sessionid"].value
    return [(b"cookie", f"sessionid={session}".encode())]


def communicator(job: Job, user: User | None, *, after: int = 0) -> WebsocketCommunicator:
    from anneal.asgi import application

    headers = [ORIGIN, *session_cookie(user)]
    return WebsocketCommunicator(application, f"/ws/jobs/{job.pk}/?after={after}", headers=headers)


def metrics(job: Job, count: int) -> None:
    job_events_record(job_id=job.pk, events=[("metric", {"step": i, "reward": i / 10}) for i in range(count)])


async def receive_events(ws: WebsocketCommunicator, count: int) -> list[int]:
    """Read frames until ``count`` seqs are covered; return the seqs of the events sent (not sampled out)."""
    seqs, covered = [], 0
    while covered < count:
        message = await ws.receive_json_from(timeout=TIMEOUT)
        assert message["type"] == "events", message
        seqs.extend(event["seq"] for event in message["events"])
        covered += len(message["events"]) + len(message["skipped"])
    return seqs


async def receive_frames(ws: WebsocketCommunicator, count: int) -> tuple[list[dict], list[int]]:
    """Read frames until ``count`` seqs are covered; return (events sent, seqs skipped)."""
    events, skipped = [], []
    while len(events) + len(skipped) < count:
        message = await ws.receive_json_from(timeout=TIMEOUT)
        assert message["type"] == "events", message
        events.extend(message["events"])
        skipped.extend(message["skipped"])
    return events, skipped


def test_replays_after_n_then_streams_a_live_event_once(world, job):
    # seq 1 is the "queued" state event
    metrics(job, 5)  # seqs 2..6
    ws = communicator(job, world["owner"], after=3)

    async def scenario():
        connected, _ = await ws.connect(timeout=TIMEOUT)
        assert connected
        assert await receive_events(ws, 3) == [4, 5, 6]
        assert await ws.receive_json_from(timeout=TIMEOUT) == {"type": "replayed", "last_seq": 6}
        await sync_to_async(job_events_record)(job_id=job.pk, events=[("log", {"message": "hello"})])
        live = await ws.receive_json_from(timeout=TIMEOUT)
        assert live["type"] == "events" and live["skipped"] == [] and len(live["events"]) == 1
        assert live["events"][0]["seq"] == 7
        assert live["events"][0]["kind"] == "log" and live["events"][0]["payload"] == {"message": "hello"}
        assert await ws.receive_nothing(timeout=0.3)
        await ws.disconnect()

    async_to_sync(scenario)()


def test_a_replayed_log_event_reads_as_a_line_without_a_dict_repr_or_server_path(world, job):
    # What workers wrote before logs were written as text: a summary dict holding server paths.
    old = "training finished: {'steps': 2, 'reward': 0.5, 'model_dir': '/srv/anneal/job-1/final'}"
    job_events_record(job_id=job.pk, events=[("log", {"message": old})])
    ws = communicator(job, world["owner"], after=1)

    async def scenario():
        connected, _ = await ws.connect(timeout=TIMEOUT)
        assert connected
        events, _ = await receive_frames(ws, 1)
        assert events[0]["payload"] == {"message": "training finished: steps 2, reward 0.5", "level": "info"}
        await ws.disconnect()

    async_to_sync(scenario)()


def test_whatever_a_client_sends_is_ignored_and_the_stream_goes_on(world, job):
    # seq 1 is the "queued" state event
    ws = communicator(job, world["owner"], after=1)

    async def scenario():
        connected, _ = await ws.connect(timeout=TIMEOUT)
        assert connected
        assert await ws.receive_json_from(timeout=TIMEOUT) == {"type": "replayed", "last_seq": 1}
        await ws.send_to(text_data="not json {")
        await ws.send_to(bytes_data=b"\x00\xff")
        await ws.send_json_to({"type": "subscribe"})
        await sync_to_async(job_events_record)(job_id=job.pk, events=[("log", {"message": "still here"})])
        live = await ws.receive_json_from(timeout=TIMEOUT)
        assert [event["seq"] for event in live["events"]] == [2]
        await ws.disconnect()

    async_to_sync(scenario)()


def test_a_duplicate_is_dropped_and_a_gap_is_filled_from_the_database(world, job):
    ws = communicator(job, world["owner"])

    async def scenario():
        assert (await ws.connect(timeout=TIMEOUT))[0]
        assert await receive_events(ws, 1) == [1]
        assert (await ws.receive_json_from(timeout=TIMEOUT))["type"] == "replayed"
        layer = get_channel_layer()
        first = await sync_to_async(lambda: JobEvent.objects.get(job=job, seq=1).as_message())()
        await layer.group_send(job_group(job.pk), {"type": "job.events", "events": [first]})  # redelivered
        # Two events stored whose broadcasts were lost; then only the later one arrives live.
        stored = await sync_to_async(_store_without_broadcast)(job, 2)
        await layer.group_send(job_group(job.pk), {"type": "job.events", "events": [stored[-1]]})
        assert await receive_events(ws, 2) == [2, 3]
        assert await ws.receive_nothing(timeout=0.3)
        await ws.disconnect()

    async_to_sync(scenario)()


def test_replay_pages_through_long_histories_in_order(world, job):
    total = PAGE_SIZE * 2 + 7
    # No one listens yet, so these skip publishing: a thousand group sends would only cost time.
    _store_without_broadcast(job, total - 1)
    ws = communicator(job, world["owner"])

    async def scenario():
        assert (await ws.connect(timeout=TIMEOUT))[0]
        assert await receive_events(ws, total) == list(range(1, total + 1))
        assert await ws.receive_json_from(timeout=TIMEOUT) == {"type": "replayed", "last_seq": total}
        await ws.disconnect()

    async_to_sync(scenario)()


@pytest.mark.parametrize(("who", "code"), [("outsider", 4404), (None, 4401)])
def test_outsider_and_anonymous_are_closed_with_a_code(world, job, who, code):
    ws = communicator(job, world[who] if who else None)

    async def scenario():
        await ws.connect(timeout=TIMEOUT)
        assert await ws.receive_output(timeout=TIMEOUT) == {"type": "websocket.close", "code": code}

    async_to_sync(scenario)()


def test_a_job_that_does_not_exist_is_closed_like_another_teams(world, job):
    missing = Job(pk=job.pk + 1000)
    ws = communicator(missing, world["owner"])

    async def scenario():
        await ws.connect(timeout=TIMEOUT)
        assert await ws.receive_output(timeout=TIMEOUT) == {"type": "websocket.close", "code": 4404}

    async_to_sync(scenario)()


def test_a_long_replay_sends_only_the_newest_rollouts_and_lists_the_rest(world, job):
    _store_without_broadcast(job, REPLAY_ROLLOUTS + 50, kind="rollout")  # seqs 2..251
    metrics(job, 3)  # 252..254: metrics always go out
    ws = communicator(job, world["owner"])

    async def scenario():
        assert (await ws.connect(timeout=TIMEOUT))[0]
        events, skipped = await receive_frames(ws, REPLAY_ROLLOUTS + 54)
        assert await ws.receive_json_from(timeout=TIMEOUT) == {"type": "replayed", "last_seq": 254}
        assert sorted([e["seq"] for e in events] + skipped) == list(range(1, 255))
        assert skipped == list(range(2, 52))
        assert [e["seq"] for e in events if e["kind"] == "rollout"] == list(range(52, 252))
        await ws.disconnect()

    async_to_sync(scenario)()


def test_a_live_flood_of_rollouts_is_sampled_but_every_metric_arrives(world, job):
    ws = communicator(job, world["owner"])
    flood = [("rollout", {"step": 1, "reward": 0.5}) for _ in range(150)] + [("metric", {"step": 1})]

    async def scenario():
        assert (await ws.connect(timeout=TIMEOUT))[0]
        await receive_frames(ws, 1)
        assert (await ws.receive_json_from(timeout=TIMEOUT))["type"] == "replayed"
        await sync_to_async(job_events_record)(job_id=job.pk, events=flood)
        events, skipped = await receive_frames(ws, len(flood))
        rollouts = [e for e in events if e["kind"] == "rollout"]
        assert len(rollouts) <= LIVE_ROLLOUT_BURST < len(flood) - 1
        assert [e["kind"] for e in events][-1] == "metric"
        assert sorted([e["seq"] for e in events] + skipped) == list(range(2, 2 + len(flood)))
        await ws.disconnect()

    async_to_sync(scenario)()


def test_reconnecting_mid_stream_leaves_no_gap_and_no_duplicate(world, job):
    held: list[int] = []
    first = communicator(job, world["owner"])
    again = communicator(job, world["owner"], after=11)  # the last seq the first connection will hold

    async def scenario():
        assert (await first.connect(timeout=TIMEOUT))[0]
        held.extend(await receive_events(first, 1))
        assert (await first.receive_json_from(timeout=TIMEOUT))["type"] == "replayed"
        await sync_to_async(metrics)(job, 10)  # 2..11 live
        held.extend(await receive_events(first, 10))
        await first.disconnect()
        assert max(held) == 11
        await sync_to_async(metrics)(job, 10)  # 12..21 while disconnected
        assert (await again.connect(timeout=TIMEOUT))[0]
        held.extend(await receive_events(again, 10))
        assert (await again.receive_json_from(timeout=TIMEOUT)) == {"type": "replayed", "last_seq": 21}
        await sync_to_async(metrics)(job, 5)  # 22..26 live again
        held.extend(await receive_events(again, 5))
        await again.disconnect()

    async_to_sync(scenario)()
    assert held == list(range(1, 27))


def _store_without_broadcast(job: Job, count: int, *, kind: str = "log") -> list[dict]:
    """Append events the way the writer does but without publishing them: a lost broadcast."""
    from django.db.models import F

    Job.objects.filter(pk=job.pk).update(last_seq=F("last_seq") + count)
    last = Job.objects.values_list("last_seq", flat=True).get(pk=job.pk)
    events = [
        JobEvent(job=job, seq=last - count + 1 + i, kind=kind, payload={"message": f"lost {i}"})
        for i in range(count)
    ]
    return [event.as_message() for event in JobEvent.objects.bulk_create(events)]


def test_a_nul_character_in_a_rollout_is_stored_as_the_replacement_character(job):
    # A byte-level model can sample NUL, and a sandbox can print it; PostgreSQL's jsonb refuses \u0000.
    # A literal backslash-u0000 typed as text is not a NUL and stays as it was.
    payload = {
        "step": 1,
        "completion": "\x0042\x00",
        "output": {"\x00key": ["a\x00"]},
        "text": "\\u0000 stays",
    }
    job_events_record(job_id=job.pk, events=[("rollout", payload)])
    stored = JobEvent.objects.get(job=job, kind="rollout").payload
    assert stored == {
        "step": 1,
        "completion": "\ufffd42\ufffd",
        "output": {"\ufffdkey": ["a\ufffd"]},
        "text": "\\u0000 stays",
    }


def test_a_job_whose_log_tail_holds_a_nul_still_ends_with_its_error(job):
    # job_finish stores the end of the child's log; whatever the job printed must not keep it from ending.
    job_finish(job_id=job.pk, state=JobState.FAILED, error="Traceback\nValueError: \x00")
    job.refresh_from_db()
    assert job.state == JobState.FAILED and job.error == "Traceback\nValueError: \ufffd"
    assert JobEvent.objects.filter(job=job, kind="state").last().payload["error"].endswith("\ufffd")
