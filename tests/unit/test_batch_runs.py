"""A batch's run lost with its worker: resumed by beat's reaper once its heartbeat lapses, sending only the lines
not kept yet (none metered twice), and failed with why after MAX_RUN_ATTEMPTS (anneal.deployments.batch_runs)."""

import json

import pytest
from django.utils import timezone

from anneal.deployments import services
from anneal.deployments.batch_runs import MAX_RUN_ATTEMPTS, batch_claim, batch_run, batches_reap_stale
from anneal.deployments.batches import batch_object, store_file
from anneal.deployments.models import BatchFile, BatchJob, BatchLine, BatchState

pytestmark = pytest.mark.django_db
LONG_AGO = timezone.now() - timezone.timedelta(hours=1)


def running_batch(world, lines: int) -> BatchJob:
    """A batch of `lines` requests to a model no deployment has (each is answered at once, without a replica),
    in progress, whose run went silent an hour ago after one attempt."""
    key, _ = services.deployment_key_create(team=world["core"], user=world["owner"], name="batch")
    rows = [
        {
            "custom_id": f"row-{n}",
            "method": "POST",
            "url": "/v1/completions",
            "body": {"model": "gone", "prompt": "1+1="},
        }
        for n in range(1, lines + 1)
    ]
    data = "".join(json.dumps(row) + "\n" for row in rows).encode()
    source = BatchFile.objects.create(
        team=world["core"], key=key, filename="in.jsonl", purpose="batch",
        path=str(store_file(world["core"].pk, data)), bytes=len(data), lines=lines,
    )  # fmt: skip
    return BatchJob.objects.create(
        team=world["core"], key=key, endpoint="/v1/completions", input_file=source, total=lines,
        state=BatchState.IN_PROGRESS, in_progress_at=LONG_AGO, heartbeat_at=LONG_AGO, run_attempts=1,
    )  # fmt: skip


# Committed for real: a run writes its lines from sync_to_async's thread, on a connection of its own.
@pytest.mark.django_db(transaction=True)
def test_a_resumed_run_sends_only_the_lines_not_kept_and_returns_them_all_in_order(world):
    batch = running_batch(world, lines=4)
    kept = {"id": "kept", "custom_id": "row-2", "response": {"status_code": 200, "body": {}}, "error": None}
    BatchLine.objects.create(batch=batch, number=2, result=kept)  # answered before the worker died
    failed = {"id": "x", "custom_id": "row-4", "response": None, "error": {"code": "c", "message": "m"}}
    BatchLine.objects.create(batch=batch, number=4, result=failed)
    # While it runs, the batch's counts are its progress.
    assert batch_object(batch)["request_counts"] == {"total": 4, "completed": 1, "failed": 1}

    assert batch_run(batch_id=batch.pk, stale_after_s=60) == BatchState.COMPLETED
    batch.refresh_from_db()
    assert (batch.completed, batch.failed, batch.run_attempts) == (1, 3, 2)
    outputs = [json.loads(line) for line in open(batch.output_file.path)]
    errors = [json.loads(line) for line in open(batch.error_file.path)]
    assert outputs == [kept], "the line kept before the worker died was sent again"
    assert [e["custom_id"] for e in errors] == ["row-1", "row-3", "row-4"]
    assert [e["error"]["code"] for e in errors] == ["model_not_found", "model_not_found", "c"]


def test_a_run_that_heart_beats_is_not_claimed_twice(world):
    batch = running_batch(world, lines=1)
    BatchJob.objects.filter(pk=batch.pk).update(heartbeat_at=timezone.now())
    assert not batch_claim(batch_id=batch.pk, stale_after_s=60)
    assert batch_run(batch_id=batch.pk, stale_after_s=60) == "not claimed"
    BatchJob.objects.filter(pk=batch.pk).update(heartbeat_at=LONG_AGO)
    assert batch_claim(batch_id=batch.pk, stale_after_s=60)
    assert not batch_claim(batch_id=batch.pk, stale_after_s=60), "a second delivery resumed it again"
    # One claimed before heartbeats were kept: silent since it started, for the claim as for the reaper.
    BatchJob.objects.filter(pk=batch.pk).update(heartbeat_at=None)
    assert batch_claim(batch_id=batch.pk, stale_after_s=60)


def test_the_reaper_sends_a_silent_run_again_then_fails_it_with_why(
    world, django_capture_on_commit_callbacks
):
    batch = running_batch(world, lines=1)
    fresh = running_batch(world, lines=1)
    BatchJob.objects.filter(pk=fresh.pk).update(heartbeat_at=timezone.now())
    with django_capture_on_commit_callbacks() as sent:
        assert batches_reap_stale(timeout_s=60) == 1
    assert len(sent) == 1
    BatchJob.objects.filter(pk=batch.pk).update(run_attempts=MAX_RUN_ATTEMPTS)
    with django_capture_on_commit_callbacks() as sent:
        batches_reap_stale(timeout_s=60)
    batch.refresh_from_db()
    assert not sent and batch.state == BatchState.FAILED and batch.failed_at
    assert batch.errors[0]["code"] == "worker_lost"
    assert f"{MAX_RUN_ATTEMPTS} times" in batch.errors[0]["message"]
    assert BatchJob.objects.get(pk=fresh.pk).state == BatchState.IN_PROGRESS
