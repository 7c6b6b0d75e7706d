"""The Python client's HTTP behaviour against a small scripted server on 127.0.0.1: retries with backoff
that honour Retry-After, the API's errors as exceptions with status, field and message, lists that page by
themselves, and an event stream that resumes from its last seq after the server failed for a while.

The clock is the one fake: the transport's sleeps are recorded instead of slept."""

import asyncio

import pytest

from anneal_client import (
    Anneal,
    APIConnectionError,
    AsyncAnneal,
    BadRequestError,
    ConflictError,
    InternalServerError,
    NotFoundError,
    RateLimitError,
    _transport,
)
from anneal_client.resources import _base
from tests.fake_api import ScriptedApi
from tests.stack import free_port


@pytest.fixture
def server():
    with ScriptedApi() as api:
        yield api


@pytest.fixture
def sleeps(monkeypatch) -> list[float]:
    slept: list[float] = []

    class Clock:
        @staticmethod
        def sleep(seconds: float) -> None:
            slept.append(seconds)

    class AsyncClock:
        @staticmethod
        async def sleep(seconds: float) -> None:
            slept.append(seconds)

    monkeypatch.setattr(_transport, "time", Clock)
    monkeypatch.setattr(_transport, "asyncio", AsyncClock)
    monkeypatch.setattr(_base.time, "sleep", Clock.sleep)
    return slept


JOB = {"id": 7, "name": "adder", "state": "running", "step": 2, "max_steps": 4, "checkpoints": []}


def test_503_with_retry_after_is_retried_after_the_time_the_server_asked(server, sleeps):
    server.routes["/api/v1/jobs/7"] = [
        (503, {"Retry-After": "2"}, {"detail": "starting"}),
        (200, {}, JOB),
    ]
    with Anneal(api_key="ann_test", base_url=server.url) as client:
        job = client.jobs.get(7)
    assert (job.id, job.state, job.max_steps) == (7, "running", 4)
    assert [path for _, path, _, _ in server.seen] == ["/api/v1/jobs/7", "/api/v1/jobs/7"]
    assert sleeps == [2.0]
    assert server.seen[0][3]["Authorization"] == "Bearer ann_test"


def test_the_async_client_retries_the_same_way(server, sleeps):
    server.routes["/api/v1/jobs/7"] = [(503, {"Retry-After": "1"}, {}), (429, {}, {}), (200, {}, JOB)]

    async def fetch():
        async with AsyncAnneal(api_key="ann_test", base_url=server.url, max_retries=3) as client:
            return await client.jobs.get(7)

    assert asyncio.run(fetch()).name == "adder"
    # Retry-After first; then, without one, exponential backoff with jitter (0.375 to 0.5 s for retry 2).
    assert len(sleeps) == 2 and sleeps[0] == 1.0 and 0.5 * 2 * 0.75 <= sleeps[1] <= 0.5 * 2


def test_retries_give_up_after_max_retries_with_the_last_status(server, sleeps):
    server.routes["/api/v1/jobs/7"] = [(502, {}, {"detail": "bad gateway"})]
    with Anneal(api_key="ann_test", base_url=server.url, max_retries=2) as client:
        with pytest.raises(InternalServerError) as failed:
            client.jobs.get(7)
    assert failed.value.status_code == 502 and failed.value.message == "bad gateway"
    assert len(server.seen) == 3 and len(sleeps) == 2 and sleeps[1] > sleeps[0]


def test_errors_carry_status_field_and_message_and_are_not_retried(server, sleeps):
    server.routes["/api/v1/verifiers"] = [
        (
            400,
            {},
            {
                "detail": "spec.type: unknown verifier type 'telepathy'",
                "errors": [{"field": "spec.type", "message": "unknown verifier type 'telepathy'"}],
            },
        )
    ]
    server.routes["/api/v1/datasets/3"] = [(404, {}, {"detail": "No Dataset matches the given query."})]
    server.routes["/api/v1/jobs/7/pause"] = [
        (429, {"x-should-retry": "false"}, {"detail": "budget cap reached", "errors": []})
    ]
    with Anneal(api_key="ann_test", base_url=server.url) as client:
        with pytest.raises(BadRequestError) as bad:
            client.verifiers.create(name="weird", spec={"type": "telepathy"})
        with pytest.raises(NotFoundError) as missing:
            client.datasets.get(3)
        with pytest.raises(RateLimitError) as capped:
            client.jobs.pause(7)
    assert bad.value.status_code == 400 and bad.value.field == "spec.type"
    assert bad.value.message == "spec.type: unknown verifier type 'telepathy'"
    assert bad.value.errors == [{"field": "spec.type", "message": "unknown verifier type 'telepathy'"}]
    assert missing.value.status_code == 404 and missing.value.field is None
    assert capped.value.status_code == 429
    assert len(server.seen) == 3 and sleeps == []  # a 4xx the server says not to retry is final


def test_409_is_retried_then_surfaces_as_a_conflict(server, sleeps):
    server.routes["/api/v1/jobs/7/retry"] = [
        (
            409,
            {},
            {"detail": "a dataset version it names was deleted", "errors": [{"field": "dataset_version"}]},
        )
    ]
    with Anneal(api_key="ann_test", base_url=server.url, max_retries=1) as client:
        with pytest.raises(ConflictError) as conflict:
            client.jobs.retry(7)
    assert conflict.value.field == "dataset_version" and len(server.seen) == 2


def test_connection_refused_is_retried_with_backoff_then_raised(sleeps):
    url = f"http://127.0.0.1:{free_port()}"
    with Anneal(api_key="ann_test", base_url=url, max_retries=3) as client:
        with pytest.raises(APIConnectionError) as refused:
            client.jobs.list()
    assert "could not reach" in refused.value.message and url in refused.value.message
    assert len(sleeps) == 3 and sleeps[0] < sleeps[1] < sleeps[2]


def test_lists_follow_next_links(server, sleeps):
    page2 = f"{server.url}/api/v1/jobs?offset=1"
    server.routes["/api/v1/jobs"] = lambda q: (
        (200, {}, {"results": [JOB], "next": page2})
        if "offset" not in q
        else (200, {}, {"results": [{**JOB, "id": 8}], "next": None})
    )
    with Anneal(api_key="ann_test", base_url=server.url) as client:
        assert [j.id for j in client.jobs.list()] == [7, 8]


def test_events_resume_from_the_last_seq_after_the_server_failed_for_a_while(server, sleeps):
    """Ten events in pages of three; the server fails more times than the client retries a request, and
    the stream goes on from where it stopped: every seq once, in order."""
    failures = {"left": 4}

    def events(query):
        after = int(query["after"])
        if after == 6 and failures["left"]:
            failures["left"] -= 1
            return 503, {}, {"detail": "restarting"}
        seqs = [s for s in range(after + 1, 11)][: int(query["limit"])]
        page = [{"seq": s, "kind": "metric", "payload": {"step": s}, "created_at": None} for s in seqs]
        state = "succeeded" if after >= 9 else "running"
        return 200, {}, {"job": 7, "state": state, "last_seq": 10, "results": page}

    server.routes["/api/v1/jobs/7/events"] = events
    with Anneal(api_key="ann_test", base_url=server.url, max_retries=1) as client:
        seen = [e.seq for e in client.jobs.events(7, follow=True, page_size=3)]
    assert seen == list(range(1, 11))
    afters = [int(q["after"]) for _, path, q, _ in server.seen if path.endswith("/events")]
    assert afters == [0, 3, 6, 6, 6, 6, 6, 9]


def test_a_retried_write_carries_one_idempotency_key_on_every_try_and_reads_carry_none(server, sleeps):
    server.routes["/api/v1/jobs/7/cancel"] = [(503, {}, {}), (200, {}, {**JOB, "state": "cancelled"})]
    server.routes["/api/v1/jobs/7"] = [(200, {}, JOB)]
    with Anneal(api_key="ann_test", base_url=server.url) as client:
        assert client.jobs.cancel(7).state == "cancelled"
        client.jobs.get(7)
    tries = [headers.get("Idempotency-Key") for method, _, _, headers in server.seen if method == "POST"]
    assert len(tries) == 2 and tries[0] and tries[0] == tries[1]
    assert all("Idempotency-Key" not in headers for method, _, _, headers in server.seen if method == "GET")
