"""The batch tier, in the shape of OpenAI's batch API: a JSONL file of requests is uploaded, a batch is
created from it, a Celery task sends its lines to the batch-tier replicas of the deployments they name (as
many at once as the deployment allows), and writes a results file and an errors file.

Every line's errors name the line, so a bad file is fixed in one go.

The worker's run (sending the lines, resuming a batch whose worker died) is in batch_runs.py.
"""

import json
import uuid
from pathlib import Path
from typing import IO

from django.conf import settings
from django.db import transaction
from django.db.models import QuerySet
from django.utils import timezone

from anneal import jsontext
from anneal.accounts.services import audit
from anneal.deployments.models import (
    BatchFile,
    BatchJob,
    BatchState,
    DeploymentKey,
    Tier,
)
from anneal.deployments.openai_shape import OpenAIError, check_request
from anneal.deployments.selectors import (
    deployments_for_key,
)
from anneal.errors import NUL_MESSAGE, holds_nul
from anneal.tasks import BATCH_RUN, enqueue

ENDPOINTS = {"/v1/chat/completions": "chat.completions", "/v1/completions": "completions"}
MAX_LINE_ERRORS = 20
REQUEST_TIMEOUT_S = 300.0
MB = 1024 * 1024
COPY_CHUNK = MB


def batch_dir(team_id: int) -> Path:
    path = settings.DATA_DIR / "batch_files" / f"team-{team_id}"
    path.mkdir(parents=True, exist_ok=True)
    return path


def store_file(team_id: int, data: bytes) -> Path:
    path = batch_dir(team_id) / f"{uuid.uuid4().hex}.jsonl"
    path.write_bytes(data)
    return path


def file_too_large() -> OpenAIError:
    limit = settings.UPLOAD_MAX_BYTES
    size = f"{limit // MB} MB ({limit} bytes)" if limit % MB == 0 else f"{limit} bytes"
    return OpenAIError(
        413,
        f"The file is larger than the limit of {size} (ANNEAL_UPLOAD_MAX_MB): split it into smaller batch files.",
        param="file",
        code="file_too_large",
    )


def _store_stream(team_id: int, source: IO[bytes]) -> Path:
    """Copy ``source`` to the team's batch folder a chunk at a time, refusing it (nothing kept) once it passes
    the upload limit: its size is known only by reading it."""
    path = batch_dir(team_id) / f"{uuid.uuid4().hex}.jsonl"
    size = 0
    try:
        with path.open("wb") as out:
            while chunk := source.read(COPY_CHUNK):
                size += len(chunk)
                if size > settings.UPLOAD_MAX_BYTES:
                    raise file_too_large()
                out.write(chunk)
    except BaseException:
        path.unlink(missing_ok=True)
        raise
    return path


def parse_lines(data: bytes) -> tuple[list[dict], list[str]]:
    """(requests, errors): every line checked as a batch request; errors name the line (1-based)."""
    requests, errors, seen = [], [], set()
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        return [], [f"the file is not UTF-8 text (byte {exc.start})"]
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        problem = _line_problem(line, seen)
        if isinstance(problem, str):
            errors.append(f"line {number}: {problem}")
            if len(errors) >= MAX_LINE_ERRORS:
                errors.append("… further lines not checked")
                break
        else:
            requests.append(problem)
    if not requests and not errors:
        errors.append("the file holds no requests: one JSON object per line")
    return requests, errors


def _line_problem(line: str, seen: set) -> dict | str:
    try:
        item = jsontext.loads(line)
    except json.JSONDecodeError as exc:
        return f"not valid JSON ({exc.msg})"
    if not isinstance(item, dict):
        return "must be a JSON object with custom_id, method, url and body"
    custom_id = item.get("custom_id")
    if not isinstance(custom_id, str) or not custom_id:
        return "custom_id must be a non-empty string"
    if custom_id in seen:
        return f"custom_id {custom_id!r} is used twice; each request needs its own"
    seen.add(custom_id)
    if item.get("method") != "POST":
        return "method must be POST"
    if item.get("url") not in ENDPOINTS:
        return f"url must be one of {', '.join(ENDPOINTS)}"
    body = item.get("body")
    if not isinstance(body, dict):
        return "body must be a JSON object (the request's body)"
    if body.get("stream"):
        return "body.stream must be false in a batch"
    try:
        check_request(body, ENDPOINTS[item["url"]])
    except OpenAIError as exc:
        return f"body: {exc.message}"
    return item


@transaction.atomic
def batch_file_create(*, key: DeploymentKey, filename: str, source: IO[bytes], purpose: str) -> BatchFile:
    """A batch input file read from ``source``, checked line by line. Its size is checked as it is copied
    to storage, so an over-size file is refused (413) without ever being held whole."""
    if purpose != "batch":
        raise OpenAIError(400, f"purpose {purpose!r} is not supported: use 'batch'.", param="purpose")
    path = _store_stream(key.team_id, source)
    try:
        data = path.read_bytes()  # at most the upload limit, checked above
        requests, errors = parse_lines(data)
        if errors:
            raise OpenAIError(
                400, "The batch file is invalid: " + "; ".join(errors), param="file", code="invalid_file"
            )
        if len(requests) > settings.DEPLOY_BATCH_MAX_LINES:
            raise OpenAIError(
                400,
                f"The file holds {len(requests)} requests; a batch takes at most "
                f"{settings.DEPLOY_BATCH_MAX_LINES}.",
                param="file",
            )
        return BatchFile.objects.create(
            team_id=key.team_id,
            key=key,
            filename=filename[:255] or "batch.jsonl",
            purpose=purpose,
            path=str(path),
            bytes=len(data),
            lines=len(requests),
        )
    except BaseException:
        path.unlink(missing_ok=True)
        raise


@transaction.atomic
def batch_create(
    *, key: DeploymentKey, input_file_id: str, endpoint: str, completion_window: str, metadata: dict | None
) -> BatchJob:
    batch_file = file_for_key(key, input_file_id, param="input_file_id")
    if batch_file.purpose != "batch":
        raise OpenAIError(400, f"{input_file_id} is not a file of purpose 'batch'.", param="input_file_id")
    if endpoint not in ENDPOINTS:
        raise OpenAIError(400, f"endpoint must be one of {', '.join(ENDPOINTS)}.", param="endpoint")
    if completion_window != "24h":
        raise OpenAIError(400, "completion_window must be '24h'.", param="completion_window")
    if metadata is not None and not isinstance(metadata, dict):
        raise OpenAIError(400, "metadata must be an object of strings.", param="metadata")
    if holds_nul(metadata):  # PostgreSQL's jsonb cannot store it
        raise OpenAIError(400, f"metadata: {NUL_MESSAGE}", param="metadata")
    requests, _ = parse_lines(Path(batch_file.path).read_bytes())
    visible = {d.name: d for d in deployments_for_key(key)}
    for number, item in enumerate(requests, start=1):
        if item["url"] != endpoint:
            raise OpenAIError(
                400,
                f"line {number}: url {item['url']} differs from the batch's endpoint {endpoint}.",
                param="endpoint",
            )
        deployment = visible.get(item["body"]["model"])
        if deployment is None or deployment.tier != Tier.BATCH:
            raise OpenAIError(
                400,
                f"line {number}: model {item['body']['model']!r} is not a batch-tier deployment you can use: "
                "switch the deployment to the batch tier, or call it directly.",
                param="input_file_id",
                code="model_not_found",
            )
    batch = BatchJob.objects.create(
        team_id=key.team_id,
        key=key,
        endpoint=endpoint,
        completion_window=completion_window,
        input_file=batch_file,
        metadata=metadata or {},
        total=len(requests),
    )
    audit(team=key.team, user=None, action="batch.create", obj=batch, key=key.key_hint, lines=len(requests))
    enqueue(BATCH_RUN, batch.pk)
    return batch


def files_for_key(key: DeploymentKey) -> QuerySet[BatchFile]:
    """The batch files a key sees: its team's; for a key bound to one deployment, only the files made with a
    key bound to that deployment (its uploads and the results of its batches)."""
    files = BatchFile.objects.filter(team_id=key.team_id)
    if key.deployment_id is not None:
        files = files.filter(key__deployment_id=key.deployment_id)
    return files


def batches_for_key(key: DeploymentKey) -> QuerySet[BatchJob]:
    """The batches a key sees, by the rule of files_for_key."""
    batches = BatchJob.objects.filter(team_id=key.team_id)
    if key.deployment_id is not None:
        batches = batches.filter(key__deployment_id=key.deployment_id)
    return batches


def _pk(text: str) -> int | None:
    """The number in an id such as file-12, if it could be a row's: "²" or 30 digits find nothing, no 500."""
    return int(text) if text.isascii() and text.isdigit() and len(text) < 19 else None


def file_for_key(key: DeploymentKey, file_id: str, *, param: str | None = None) -> BatchFile:
    number = _pk(file_id.removeprefix("file-"))
    batch_file = files_for_key(key).filter(pk=number).first() if number is not None else None
    if batch_file is None:
        raise OpenAIError(404, f"No such File object: {file_id}", param=param, code="file_not_found")
    return batch_file


def batch_for_key(key: DeploymentKey, batch_id: str) -> BatchJob:
    number = _pk(batch_id.removeprefix("batch_"))
    batch = batches_for_key(key).filter(pk=number).first() if number is not None else None
    if batch is None:
        raise OpenAIError(404, f"No such Batch object: {batch_id}", code="batch_not_found")
    return batch


def batch_cancel(*, batch: BatchJob) -> BatchJob:
    BatchJob.objects.filter(pk=batch.pk, state__in=[BatchState.VALIDATING, BatchState.IN_PROGRESS]).update(
        state=BatchState.CANCELLING
    )
    batch.refresh_from_db()
    return batch


# --- the runner (Celery task deployments.run_batch) ---------------------------------------------------------


def batch_object(batch: BatchJob) -> dict:
    def ts(value):
        return int(value.timestamp()) if value else None

    errors = None
    if batch.errors:
        errors = {"object": "list", "data": batch.errors}
    counts = {"total": batch.total, "completed": batch.completed, "failed": batch.failed}
    if batch.state in (BatchState.IN_PROGRESS, BatchState.CANCELLING):  # its progress: the lines kept so far
        answered = batch.lines.count()
        counts["completed"] = batch.lines.filter(result__error=None).count()
        counts["failed"] = answered - counts["completed"]
    return {
        "id": batch.openai_id,
        "object": "batch",
        "endpoint": batch.endpoint,
        "errors": errors,
        "input_file_id": batch.input_file.openai_id,
        "completion_window": batch.completion_window,
        "status": batch.state,
        "output_file_id": batch.output_file.openai_id if batch.output_file_id else None,
        "error_file_id": batch.error_file.openai_id if batch.error_file_id else None,
        "created_at": ts(batch.created_at),
        "in_progress_at": ts(batch.in_progress_at),
        "expires_at": ts(batch.created_at + timezone.timedelta(hours=24)),
        "finalizing_at": None,
        "completed_at": ts(batch.completed_at),
        "failed_at": ts(batch.failed_at),
        "expired_at": None,
        "cancelling_at": None,
        "cancelled_at": ts(batch.completed_at) if batch.state == BatchState.CANCELLED else None,
        "request_counts": counts,
        "metadata": batch.metadata or None,
    }


def file_object(batch_file: BatchFile) -> dict:
    return {
        "id": batch_file.openai_id,
        "object": "file",
        "bytes": batch_file.bytes,
        "created_at": int(batch_file.created_at.timestamp()),
        "filename": batch_file.filename,
        "purpose": batch_file.purpose,
        "status": "processed",
        "expires_at": None,
        "status_details": None,
    }
