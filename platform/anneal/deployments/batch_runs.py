"""A batch's run on a default worker (the `deployments.run_batch` task): its lines sent to the batch-tier
replicas of the deployments they name, as many at once as each deployment allows, then a results file and an
errors file.

Each line is kept as it is answered (a BatchLine, saved with its usage in one transaction) while the run
heart-beats. A run lost with its worker is resumed by beat's reaper once its heartbeat lapses: the new run
sends only the lines not kept yet, so none is metered twice, up to MAX_RUN_ATTEMPTS; past that the batch fails
with why.
"""

import asyncio
import json
import time
from pathlib import Path

import httpx
from asgiref.sync import sync_to_async
from django.db import IntegrityError, connections, transaction
from django.db.models import F, Q
from django.utils import timezone

from anneal.deployments.batches import ENDPOINTS, REQUEST_TIMEOUT_S, parse_lines, store_file
from anneal.deployments.models import (
    BatchFile,
    BatchJob,
    BatchLine,
    BatchState,
    Deployment,
    DeploymentState,
    Tier,
)
from anneal.deployments.selectors import (
    budget_reached,
    deployments_for_key,
    ready_replicas,
    team_budget_cap,
    team_spend_month,
)
from anneal.deployments.services import usage_record
from anneal.tasks import BATCH_RUN, enqueue

HEARTBEAT_S = 5.0
MAX_RUN_ATTEMPTS = 3  # runs of one batch claimed, the earlier ones lost with their worker
RUNNING = (BatchState.IN_PROGRESS, BatchState.CANCELLING)


def batch_claim(*, batch_id: int, stale_after_s: int) -> bool:
    """A new batch (validating -> in progress), or one whose run went silent for `stale_after_s` (resumed)."""
    now = timezone.now()
    fresh = BatchJob.objects.filter(pk=batch_id, state=BatchState.VALIDATING).update(
        state=BatchState.IN_PROGRESS, in_progress_at=now, heartbeat_at=now, run_attempts=F("run_attempts") + 1
    )
    if fresh:
        return True
    silent = _silent_since(now - timezone.timedelta(seconds=stale_after_s))
    return bool(
        BatchJob.objects.filter(silent, pk=batch_id).update(
            heartbeat_at=now, run_attempts=F("run_attempts") + 1
        )
    )


def _silent_since(cutoff) -> Q:
    """Runs that have not heart-beaten since `cutoff` (one claimed before heartbeats were kept: not since it
    started): what the reaper sends again and what a new run may then claim, the same rule for both."""
    return Q(state__in=RUNNING) & (
        Q(heartbeat_at__lt=cutoff) | Q(heartbeat_at__isnull=True, in_progress_at__lt=cutoff)
    )


def batch_run(*, batch_id: int, stale_after_s: int) -> str:
    if not batch_claim(batch_id=batch_id, stale_after_s=stale_after_s):
        return "not claimed"
    batch = BatchJob.objects.select_related("key", "input_file").get(pk=batch_id)
    requests, _ = parse_lines(Path(batch.input_file.path).read_bytes())
    by_name = {d.name: d for d in deployments_for_key(batch.key)} if batch.key else {}
    done = set(batch.lines.values_list("number", flat=True))
    asyncio.run(_send_all(batch, requests, by_name, done))
    results = list(batch.lines.order_by("number").values_list("result", flat=True))
    outputs = [r for r in results if r["error"] is None]
    errors = [r for r in results if r["error"] is not None]
    with transaction.atomic():
        batch = BatchJob.objects.select_for_update().get(pk=batch_id)
        if outputs:
            batch.output_file = _result_file(batch, outputs, "output")
        if errors:
            batch.error_file = _result_file(batch, errors, "error")
        batch.completed, batch.failed = len(outputs), len(errors)
        cancelled = batch.state == BatchState.CANCELLING
        batch.state = BatchState.CANCELLED if cancelled else BatchState.COMPLETED
        batch.completed_at = timezone.now()
        batch.save()
    return batch.state


def batches_reap_stale(*, timeout_s: int) -> int:
    """Runs whose worker stopped heart-beating for `timeout_s`: each is sent again (batch_claim lets the new
    run resume it), up to MAX_RUN_ATTEMPTS; past that the batch fails, with why."""
    stale = list(
        BatchJob.objects.filter(_silent_since(timezone.now() - timezone.timedelta(seconds=timeout_s)))
    )
    for batch in stale:
        if batch.run_attempts < MAX_RUN_ATTEMPTS:
            enqueue(BATCH_RUN, batch.pk)
            continue
        message = (
            f"the worker running it stopped heart-beating (for {timeout_s} s) {batch.run_attempts} times"
        )
        BatchJob.objects.filter(pk=batch.pk, state__in=RUNNING).update(
            state=BatchState.FAILED,
            failed_at=timezone.now(),
            errors=[{"code": "worker_lost", "message": message, "param": None, "line": None}],
        )
    return len(stale)


def _heartbeat(batch_id: int) -> None:
    BatchJob.objects.filter(pk=batch_id, state__in=RUNNING).update(heartbeat_at=timezone.now())


def _line_done(batch: BatchJob, number: int, result: dict, usage: dict | None) -> None:
    """Keep the line's result and meter its usage together: a line kept is never sent (or metered) again."""
    try:
        with transaction.atomic():
            BatchLine.objects.create(batch=batch, number=number, result=result)
            if usage is not None:
                usage_record(key=batch.key, batch_id=batch.pk, **usage)
    except IntegrityError:
        if not BatchLine.objects.filter(batch=batch, number=number).exists():
            raise
        # else another run of the batch kept this line first, with its usage


def _result_file(batch: BatchJob, rows: list[dict], kind: str) -> BatchFile:
    data = "".join(json.dumps(row) + "\n" for row in rows).encode()
    return BatchFile.objects.create(
        team_id=batch.team_id,
        key=batch.key,
        filename=f"batch_{batch.pk}_{kind}.jsonl",
        purpose=f"batch_{kind}",
        path=str(store_file(batch.team_id, data)),
        bytes=len(data),
        lines=len(rows),
    )


def _line_error(
    batch: BatchJob, number: int, item: dict, code: str, message: str, status: int | None = None
) -> dict:
    response = None
    if status is not None:
        error = {"message": message, "type": "invalid_request_error", "param": None, "code": code}
        response = {"status_code": status, "request_id": f"req_{batch.pk}_{number}", "body": {"error": error}}
    return {
        "id": f"batch_req_{batch.pk}_{number}",
        "custom_id": item["custom_id"],
        "response": response,
        "error": {"code": code, "message": message},
    }


async def _send_all(
    batch: BatchJob, requests: list[dict], by_name: dict[str, Deployment], done: set[int]
) -> None:
    limits: dict[int, asyncio.Semaphore] = {}
    turn = {"n": 0}

    def route(deployment: Deployment):
        deployment.refresh_from_db()
        if deployment.state != DeploymentState.READY or deployment.tier != Tier.BATCH:
            return f"the deployment `{deployment.name}` is {deployment.state} at the {deployment.tier} tier"
        cap = team_budget_cap(deployment.team_id)
        if budget_reached(team_spend_month(deployment.team_id), cap):
            return "insufficient_quota"
        replicas = ready_replicas(deployment)
        if not replicas:
            return f"no replica of `{deployment.name}` is ready"
        turn["n"] += 1
        return replicas[turn["n"] % len(replicas)]

    def cancelled() -> bool:
        return BatchJob.objects.filter(pk=batch.pk, state=BatchState.CANCELLING).exists()

    async def answer(client: httpx.AsyncClient, number: int, item: dict) -> tuple[dict, dict | None]:
        """The line's result and, when a replica answered it, its usage to meter."""
        deployment = by_name.get(item["body"]["model"])
        if deployment is None:
            error = _line_error(
                batch, number, item, "model_not_found", f"no deployment {item['body']['model']!r}"
            )
            return error, None
        semaphore = limits.setdefault(deployment.pk, asyncio.Semaphore(deployment.max_concurrency))
        async with semaphore:
            if await sync_to_async(cancelled)():
                return _line_error(batch, number, item, "batch_cancelled", "the batch was cancelled"), None
            replica = await sync_to_async(route)(deployment)
            if isinstance(replica, str):
                code = "insufficient_quota" if replica == "insufficient_quota" else "model_not_ready"
                message = "the team's budget cap is reached" if code == "insufficient_quota" else replica
                status = 429 if code != "model_not_ready" else 503
                return _line_error(batch, number, item, code, message, status=status), None
            started = time.monotonic()
            try:
                response = await client.post(
                    replica.base_url + item["url"], json=item["body"], headers=replica.auth_headers
                )
                body = response.json()
            except (httpx.HTTPError, json.JSONDecodeError) as exc:
                return _line_error(
                    batch, number, item, "replica_unavailable", f"{type(exc).__name__}: {exc}"
                ), None
        usage = body.get("usage") if isinstance(body, dict) else None
        metered = None
        if response.status_code == 200 and isinstance(usage, dict):
            metered = {
                "deployment": deployment,
                "tier": replica.tier,
                "endpoint": ENDPOINTS[item["url"]],
                "stream": False,
                "prompt_tokens": int(usage.get("prompt_tokens") or 0),
                "completion_tokens": int(usage.get("completion_tokens") or 0),
                "latency_ms": int((time.monotonic() - started) * 1000),
            }
        result = {
            "id": f"batch_req_{batch.pk}_{number}",
            "custom_id": item["custom_id"],
            "response": {
                "status_code": response.status_code,
                "request_id": f"req_{batch.pk}_{number}",
                "body": body,
            },
            "error": None,
        }
        if response.status_code != 200:
            error = body.get("error") if isinstance(body, dict) else None
            result["error"] = {
                "code": (error or {}).get("code") or "request_failed",
                "message": (error or {}).get("message") or f"status {response.status_code}",
            }
        return result, metered

    async def one(client: httpx.AsyncClient, number: int, item: dict) -> None:
        result, usage = await answer(client, number, item)
        await sync_to_async(_line_done)(batch, number, result, usage)

    async def beat() -> None:
        while True:
            await asyncio.sleep(HEARTBEAT_S)
            await sync_to_async(_heartbeat)(batch.pk)

    heart = asyncio.create_task(beat())
    try:
        async with httpx.AsyncClient(timeout=REQUEST_TIMEOUT_S) as client:
            pending = [one(client, n, item) for n, item in enumerate(requests, start=1) if n not in done]
            await asyncio.gather(*pending)
    finally:
        heart.cancel()
        # The database connection of sync_to_async's thread would otherwise stay open, idle, until the next run.
        await sync_to_async(connections.close_all)()
