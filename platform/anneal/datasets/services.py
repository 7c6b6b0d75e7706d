"""Writes for datasets: accept an upload, ingest it into an immutable version."""

import hashlib
import json
import os
import uuid
from pathlib import Path

from django.conf import settings
from django.contrib.auth.models import User
from django.core.files.uploadedfile import UploadedFile
from django.db import transaction
from django.db.models import Max
from django.utils import timezone

from anneal.accounts.models import Team
from anneal.accounts.services import audit
from anneal.datasets.ingest import MAPPABLE_ROLES, ingest_jsonl
from anneal.datasets.models import Dataset, DatasetUpload, DatasetVersion, UploadState
from anneal.errors import InputError

SUPPORTED_SUFFIXES = (".jsonl", ".json", ".ndjson")


def _check_mapping(mapping: dict[str, str]) -> dict[str, str]:
    unknown = set(mapping) - set(MAPPABLE_ROLES)
    if unknown:
        raise InputError(f"unknown role(s) {sorted(unknown)}; known: {list(MAPPABLE_ROLES)}", field="mapping")
    if not mapping.get("prompt"):
        raise InputError("choose the column that holds the prompt", field="mapping.prompt")
    return {role: column for role, column in mapping.items() if column}


def dataset_upload_create(
    *, team: Team, user: User, name: str, uploaded_file: UploadedFile, mapping: dict[str, str]
) -> DatasetUpload:
    """Stream the file to storage and queue its ingest. Nothing is stored when the request itself is bad."""
    name = (name or "").strip()
    if not name:
        raise InputError("give the dataset a name", field="name")
    if not uploaded_file.name.lower().endswith(SUPPORTED_SUFFIXES):
        raise InputError(
            f"'{uploaded_file.name}' is not a JSONL file (expected one of {', '.join(SUPPORTED_SUFFIXES)})",
            field="file",
        )
    if uploaded_file.size > settings.UPLOAD_MAX_BYTES:
        raise InputError(
            f"the file is {uploaded_file.size} bytes, over the limit of {settings.UPLOAD_MAX_BYTES} bytes",
            field="file",
        )
    mapping = _check_mapping(mapping)
    settings.UPLOAD_DIR.mkdir(parents=True, exist_ok=True)
    path = settings.UPLOAD_DIR / f"{uuid.uuid4().hex}.jsonl"
    with path.open("wb") as out:
        for chunk in uploaded_file.chunks():
            out.write(chunk)
    with transaction.atomic():
        upload = DatasetUpload.objects.create(
            team=team,
            created_by=user,
            dataset_name=name,
            file_name=uploaded_file.name[:255],
            file_path=str(path),
            size_bytes=uploaded_file.size,
            mapping=mapping,
        )
        audit(team=team, user=user, action="dataset.upload", obj=upload, file=upload.file_name)

        def enqueue() -> None:
            from workers.tasks import dataset_ingest

            dataset_ingest.delay(upload.id)

        transaction.on_commit(enqueue)
    return upload


def dataset_upload_ingest(*, upload_id: int) -> DatasetUpload:
    """Claim a pending upload, validate every row and freeze a version; on any error store no rows."""
    claimed = DatasetUpload.objects.filter(id=upload_id, state=UploadState.PENDING).update(
        state=UploadState.PROCESSING
    )
    upload = DatasetUpload.objects.get(id=upload_id)
    if not claimed:
        return upload
    folder = settings.DATASET_DIR / str(upload.team_id)
    folder.mkdir(parents=True, exist_ok=True)
    partial = folder / f".{uuid.uuid4().hex}.partial"
    try:
        with open(upload.file_path, "rb") as source:
            report = ingest_jsonl(source=source, target=partial, mapping=upload.mapping)
    except OSError as exc:
        partial.unlink(missing_ok=True)
        return _upload_fail(
            upload, [{"row": 0, "field": "(file)", "message": f"cannot read the upload: {exc}"}], 1
        )
    if report.error_count:
        partial.unlink(missing_ok=True)
        return _upload_fail(upload, report.errors, report.error_count, rows_seen=report.rows)
    final = folder / f"{report.sha256}.jsonl"
    os.replace(partial, final)
    with transaction.atomic():
        dataset, _ = Dataset.objects.get_or_create(
            team=upload.team, name=upload.dataset_name, defaults={"created_by": upload.created_by}
        )
        number = (dataset.versions.aggregate(n=Max("number"))["n"] or 0) + 1
        version = DatasetVersion.objects.create(
            dataset=dataset,
            number=number,
            row_count=report.rows,
            columns=sorted(report.columns),
            sha256=report.sha256,
            rows_path=str(final),
            source_upload=upload,
        )
        upload.state = UploadState.READY
        upload.rows_seen = report.rows
        upload.finished_at = timezone.now()
        upload.save(update_fields=["state", "rows_seen", "finished_at"])
        audit(team=upload.team, user=upload.created_by, action="dataset_version.create", obj=version)
    Path(upload.file_path).unlink(missing_ok=True)
    return upload


def _upload_fail(
    upload: DatasetUpload, errors: list[dict], count: int, *, rows_seen: int = 0
) -> DatasetUpload:
    upload.state = UploadState.FAILED
    upload.errors = errors
    upload.error_count = count
    upload.rows_seen = rows_seen
    upload.finished_at = timezone.now()
    upload.save(update_fields=["state", "errors", "error_count", "rows_seen", "finished_at"])
    Path(upload.file_path).unlink(missing_ok=True)
    return upload


@transaction.atomic
def dataset_version_create_from_rows(
    *, team: Team, user: User | None, name: str, rows: list[dict]
) -> DatasetVersion:
    """Freeze rows made by the platform itself (demo data, domain packs) as a new version."""
    lines = [json.dumps(row, ensure_ascii=False, separators=(",", ":")) + "\n" for row in rows]
    body = "".join(lines).encode()
    sha = hashlib.sha256(body).hexdigest()
    folder = settings.DATASET_DIR / str(team.id)
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{sha}.jsonl"
    path.write_bytes(body)
    dataset, _ = Dataset.objects.get_or_create(team=team, name=name, defaults={"created_by": user})
    number = (dataset.versions.aggregate(n=Max("number"))["n"] or 0) + 1
    columns = sorted({key for row in rows for key in row})
    version = DatasetVersion.objects.create(
        dataset=dataset, number=number, row_count=len(rows), columns=columns, sha256=sha, rows_path=str(path)
    )
    audit(team=team, user=user, action="dataset_version.create", obj=version)
    return version
