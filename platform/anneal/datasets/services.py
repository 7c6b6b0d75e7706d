"""Writes for datasets: store an upload, map its columns, ingest it, accept or reject it, delete.

An upload's life: ``mapping`` (stored, columns not chosen yet) -> ``pending`` -> ``processing`` ->
``ready`` (every row valid: a version exists), ``review`` (some rows bad: the valid ones wait, outside
every version, until the expert accepts them or rejects the upload) or ``failed`` (nothing usable).
A version's rows file is written once and never changed; nothing partial ever becomes a version.

Past 400 lines: the writes of uploads, versions and rows, which share the ingest's checks; uploads are the
next to move out.
"""

import hashlib
import json
import logging
import shutil
import uuid
from pathlib import Path

from django.conf import settings
from django.contrib.auth.models import User
from django.core.files.uploadedfile import UploadedFile
from django.db import transaction
from django.db.models import Max, ProtectedError
from django.utils import timezone

from anneal.accounts.models import Team
from anneal.accounts.services import audit
from anneal.datasets import storage
from anneal.datasets.ingest import IngestReport, Progress, ingest_file
from anneal.datasets.mapping import Mapping, MappingError
from anneal.datasets.models import Dataset, DatasetUpload, DatasetVersion, UploadState
from anneal.datasets.preview import UploadPreview, read_preview
from anneal.datasets.readers import FileRefused, ReadLimits, detect_format
from anneal.datasets.tokens import TokenizerUnavailable, token_counter
from anneal.errors import InputError
from anneal.request_limits import size_text
from anneal.tasks import DATASET_INGEST, DATASET_PREVIEW, enqueue

log = logging.getLogger(__name__)

SUPPORTED_SUFFIXES = (".jsonl", ".ndjson", ".json", ".csv", ".parquet", ".pq")
ACCEPTED_NAMES = SUPPORTED_SUFFIXES + tuple(s + ".gz" for s in SUPPORTED_SUFFIXES)


class InUse(InputError):
    """The object is referenced by a job: the API answers 409 Conflict."""


def read_limits() -> ReadLimits:
    return ReadLimits(
        max_line_bytes=settings.DATASET_MAX_LINE_BYTES,
        max_decompressed_bytes=settings.UPLOAD_MAX_DECOMPRESSED_BYTES,
        max_columns=settings.PARQUET_MAX_COLUMNS,
    )


class FileTooLarge(InputError):
    """The file is over ANNEAL_UPLOAD_MAX_MB: the API and the page answer 413."""


def check_upload_size(size: int | None) -> None:
    """FileTooLarge naming the limit when ``size`` (bytes) is over it. The request's body was already
    bounded while it streamed in (anneal.request_limits); this is the exact check on the file itself."""
    if size is not None and size > settings.UPLOAD_MAX_BYTES:
        raise FileTooLarge(
            f"the file is {size} bytes, over the limit of {size_text(settings.UPLOAD_MAX_BYTES)} "
            "(ANNEAL_UPLOAD_MAX_MB): split it into smaller files, or compress it with gzip",
            field="file",
        )


def check_mapping(mapping: dict) -> Mapping:
    try:
        return Mapping.from_dict(mapping)
    except MappingError as exc:
        raise InputError(exc.message, field=exc.field) from None


def check_tokenizer(name: str) -> str:
    """ "tiny", or the absolute path of a model folder inside ANNEAL_MODEL_STORE holding tokenizer.json.

    A user may not point the worker at arbitrary paths on the server: only the model store is searched.
    """
    name = (name or "tiny").strip()
    if name == "tiny":
        return name
    store = settings.MODEL_STORE.resolve()
    folder = (store / name).resolve()
    if store not in folder.parents:
        raise InputError(
            f"'{name}' is not a model folder inside the model store: use 'tiny'", field="tokenizer"
        )
    try:
        token_counter(str(folder))
    except TokenizerUnavailable:
        raise InputError(
            f"model '{name}' has no tokenizer.json: use 'tiny' or a model with one", field="tokenizer"
        ) from None
    return str(folder)


def dataset_upload_create(
    *,
    team: Team,
    user: User,
    name: str,
    uploaded_file: UploadedFile,
    mapping: dict | None,
    tokenizer: str = "tiny",
) -> DatasetUpload:
    """Stream the file to storage. With a ``mapping`` the ingest is queued at once; without, the upload
    waits in state ``mapping`` for ``dataset_upload_map``. Nothing is stored when the request is bad."""
    name = (name or "").strip()
    if not name:
        raise InputError("give the dataset a name", field="name")
    try:
        fmt, gzipped = detect_format(uploaded_file.name or "")
    except FileRefused as exc:
        raise InputError(exc.message, field="file") from None
    check_upload_size(uploaded_file.size)
    if uploaded_file.size == 0:
        raise InputError("the file is empty: it has no rows", field="file")
    parsed = check_mapping(mapping) if mapping is not None else None
    tokenizer = check_tokenizer(tokenizer)
    location = storage.store_upload(area="uploads", name=f"{uuid.uuid4().hex}.upload", upload=uploaded_file)
    with transaction.atomic():
        upload = DatasetUpload.objects.create(
            team=team,
            created_by=user,
            dataset_name=name,
            file_name=uploaded_file.name[:255],
            file_path=location,
            file_format=fmt + (".gz" if gzipped else ""),
            size_bytes=uploaded_file.size,
            mapping=parsed.to_dict() if parsed else {},
            tokenizer=tokenizer,
            state=UploadState.PENDING if parsed else UploadState.MAPPING,
        )
        audit(team=team, user=user, action="dataset.upload", obj=upload, file=upload.file_name)
        enqueue(DATASET_INGEST if parsed else DATASET_PREVIEW, upload.id)
    return upload


def dataset_upload_preview(*, upload_id: int, redelivered: bool = False) -> DatasetUpload:
    """Read the columns and first rows of an upload waiting for its mapping and keep them on the upload.

    Runs in the worker (task ``datasets.preview``): even the first rows of a hostile file may be costly to
    refuse. Never raises for anything in the file. ``redelivered``: a worker died reading it; the preview
    then says so instead of reading the file again.
    """
    upload = DatasetUpload.objects.get(id=upload_id)
    if upload.state != UploadState.MAPPING or upload.preview:
        return upload
    if redelivered:
        preview = UploadPreview(
            refused="the worker stopped while reading this file (restarted or out of memory): upload it again"
        )
    else:
        preview = _read_preview(upload)
    DatasetUpload.objects.filter(id=upload_id, state=UploadState.MAPPING).update(preview=preview.to_dict())
    upload.refresh_from_db()
    return upload


def _read_preview(upload: DatasetUpload) -> UploadPreview:
    try:
        path = storage.local_copy(upload.file_path) if upload.file_path else None
    except storage.StoredFileMissing:
        path = None
    if path is None:
        return UploadPreview(refused="the uploaded file is no longer stored")
    try:
        return read_preview(path=path, file_name=upload.file_name, limits=read_limits())
    except Exception as exc:  # a bug must not leave the page waiting forever, nor kill the worker
        log.exception("preview of upload %s failed", upload.pk)
        return UploadPreview(refused=f"the file could not be read: {type(exc).__name__}: {exc}")


def dataset_upload_map(*, upload: DatasetUpload, user: User, mapping: dict, tokenizer: str) -> DatasetUpload:
    """Set the column mapping of an upload waiting for one, and queue its ingest."""
    parsed = check_mapping(mapping)
    tokenizer = check_tokenizer(tokenizer)
    with transaction.atomic():
        changed = DatasetUpload.objects.filter(id=upload.id, state=UploadState.MAPPING).update(
            mapping=parsed.to_dict(), tokenizer=tokenizer, state=UploadState.PENDING
        )
        if not changed:
            raise InputError(
                f"this upload is {upload.state}: its columns can only be mapped before the ingest starts",
                field="state",
            )
        audit(team=upload.team, user=user, action="dataset.map", obj=upload, mapping=parsed.to_dict())
        enqueue(DATASET_INGEST, upload.id)
    upload.refresh_from_db()
    return upload


def dataset_upload_ingest(*, upload_id: int, redelivered: bool = False) -> DatasetUpload:
    """Claim a pending upload, validate every row, and freeze a version, wait for review, or fail.

    Never raises for anything in the file: the worker carries on with the next task. ``redelivered``: the
    broker sent the task again because a worker died during it; an upload left processing then fails with
    a message instead of being read again (it may be what killed the worker).
    """
    claimed = DatasetUpload.objects.filter(id=upload_id, state=UploadState.PENDING).update(
        state=UploadState.PROCESSING, rows_seen=0, progress=0.0
    )
    upload = DatasetUpload.objects.get(id=upload_id)
    if not claimed:
        if redelivered and upload.state == UploadState.PROCESSING:
            message = (
                "the worker stopped while reading this file (restarted or out of memory): upload it again"
            )
            error = {"row": 0, "field": "(file)", "message": message}
            return _upload_fail(upload, IngestReport(errors=[error], error_count=1))
        return upload
    work = settings.DATA_DIR / "work" / f"upload-{upload.pk}-{uuid.uuid4().hex[:8]}"
    work.mkdir(parents=True, exist_ok=True)
    try:
        return _ingest_claimed(upload, work)
    finally:
        shutil.rmtree(work, ignore_errors=True)


def _ingest_claimed(upload: DatasetUpload, work: Path) -> DatasetUpload:
    """Read the upload through a local copy, writing the kept rows and the errors under ``work`` first;
    only a finished file is handed to storage."""
    upload_id = upload.pk
    staged = work / "rows.jsonl"
    errors_path = work / "errors.jsonl"

    def progress(p: Progress) -> None:
        DatasetUpload.objects.filter(id=upload_id).update(
            rows_seen=p.rows_read, progress=round(p.fraction, 4)
        )

    try:
        report = ingest_file(
            path=storage.local_copy(upload.file_path),
            file_name=upload.file_name,
            mapping=Mapping.from_dict(upload.mapping),
            target=staged,
            limits=read_limits(),
            tokens=token_counter(upload.tokenizer),
            on_progress=progress,
            errors_to=errors_path,
        )
    except Exception as exc:  # a bug must not leave the upload "processing" forever, nor kill the worker
        log.exception("ingest of upload %s failed", upload_id)
        error = {"row": 0, "field": "(file)", "message": f"the ingest failed: {type(exc).__name__}: {exc}"}
        return _upload_fail(upload, IngestReport(errors=[error], error_count=1))
    if report.error_count and errors_path.exists():
        # Every error, for the download (the database lists only the first ones).
        upload.errors_path = storage.store_local_file(
            area="uploads", name=f"{upload.pk}-errors-{uuid.uuid4().hex[:8]}.jsonl", path=errors_path
        )
        DatasetUpload.objects.filter(id=upload_id).update(errors_path=upload.errors_path)
    if not report.ok:
        return _upload_fail(upload, report)
    upload.rows_seen = report.rows_read
    upload.rows_valid = report.rows
    upload.duplicate_count = report.duplicates
    upload.duplicates = report.duplicate_examples
    upload.errors = report.errors
    upload.error_count = report.error_count
    upload.progress = 1.0
    # Staged where the version will live: accepting it later (maybe on another host) only records it.
    upload.staged_path = storage.store_local_file(
        area="datasets",
        name=f"{upload.team_id}/{report.sha256[:16]}-{uuid.uuid4().hex[:8]}.jsonl",
        path=staged,
    )
    upload.staged = {"sha256": report.sha256, "columns": report.columns, "stats": report.stats}
    fields = ["rows_seen", "rows_valid", "duplicate_count", "duplicates", "errors", "error_count", "progress"]
    if report.error_count:
        upload.state = UploadState.REVIEW
        upload.finished_at = timezone.now()
        upload.save(update_fields=[*fields, "staged_path", "staged", "state", "finished_at"])
        return upload
    upload.save(update_fields=fields)
    _freeze(upload=upload, user=upload.created_by)
    upload.refresh_from_db()
    return upload


def _freeze(*, upload: DatasetUpload, user: User | None) -> DatasetVersion:
    """Record the staged rows as the version (the upload is READY after)."""
    with transaction.atomic():
        dataset, _ = Dataset.objects.get_or_create(
            team=upload.team, name=upload.dataset_name, defaults={"created_by": upload.created_by}
        )
        version = DatasetVersion.objects.create(
            dataset=dataset,
            number=_next_number(dataset),
            row_count=upload.rows_valid,
            columns=upload.staged["columns"],
            sha256=upload.staged["sha256"],
            rows_path=upload.staged_path,
            source_upload=upload,
            stats=upload.staged["stats"],
            created_by=user,
        )
        upload.state = UploadState.READY
        upload.staged_path = ""
        upload.finished_at = timezone.now()
        upload.save(update_fields=["state", "staged_path", "finished_at"])
        audit(team=upload.team, user=user, action="dataset_version.create", obj=version)
    storage.delete(upload.file_path)
    return version


def _next_number(dataset: Dataset) -> int:
    # Locks the dataset row so two versions made at once get different numbers.
    Dataset.objects.select_for_update().filter(pk=dataset.pk).first()
    return (dataset.versions.aggregate(n=Max("number"))["n"] or 0) + 1


def dataset_upload_accept(*, upload: DatasetUpload, user: User) -> DatasetVersion:
    """Freeze the valid rows of an upload in review as a new version; its bad rows are skipped."""
    claimed = DatasetUpload.objects.filter(id=upload.id, state=UploadState.REVIEW).update(
        state=UploadState.PROCESSING
    )
    if not claimed:
        raise InputError(
            f"this upload is {upload.state}: only an upload in review can be accepted", field="state"
        )
    upload.refresh_from_db()
    audit(team=upload.team, user=user, action="dataset.accept", obj=upload, skipped=upload.error_count)
    return _freeze(upload=upload, user=user)


def dataset_upload_reject(*, upload: DatasetUpload, user: User) -> DatasetUpload:
    """Drop an upload in review (or still waiting for its mapping): nothing of it is kept."""
    changed = DatasetUpload.objects.filter(
        id=upload.id, state__in=[UploadState.REVIEW, UploadState.MAPPING]
    ).update(state=UploadState.REJECTED, finished_at=timezone.now())
    if not changed:
        raise InputError(
            f"this upload is {upload.state}: only an upload in review can be rejected", field="state"
        )
    upload.refresh_from_db()
    for location in (upload.staged_path, upload.file_path):
        storage.delete(location)
    DatasetUpload.objects.filter(id=upload.id).update(staged_path="")
    audit(team=upload.team, user=user, action="dataset.reject", obj=upload)
    upload.refresh_from_db()
    return upload


def _upload_fail(upload: DatasetUpload, report: IngestReport) -> DatasetUpload:
    upload.state = UploadState.FAILED
    upload.errors = report.errors
    upload.error_count = report.error_count
    upload.rows_seen = report.rows_read
    upload.rows_valid = 0
    upload.finished_at = timezone.now()
    upload.save(update_fields=["state", "errors", "error_count", "rows_seen", "rows_valid", "finished_at"])
    storage.delete(upload.file_path)
    return upload


def _job_using(versions) -> str | None:
    """Which job names one of ``versions`` (the first found, and how), or None: lineage never points at nothing."""
    from django.db.models import Q

    from anneal.training.models import Job

    # A job's first version, any of the versions it mixes (anneal.training.models.JobDataset), its held-out one.
    ids = {version.pk for version in versions}
    uses = (
        Q(dataset_version__in=ids)
        | Q(job_datasets__dataset_version__in=ids)
        | Q(eval_dataset_version__in=ids)
    )
    job = Job.objects.filter(uses).order_by("id").first()
    if job is None:
        return None
    trained = {job.dataset_version_id, *job.job_datasets.values_list("dataset_version_id", flat=True)}
    used = next(v for v in versions if v.pk in trained | {job.eval_dataset_version_id})
    return f"job #{job.pk} '{job.name}' {'uses' if used.pk in trained else 'is evaluated on'} {used}"


def _delete_unprotected(obj: Dataset | DatasetVersion) -> None:
    """Delete, or InUse when a key the checks above do not know of still protects it (never a 500)."""
    try:
        obj.delete()
    except ProtectedError as exc:
        holder = next(iter(exc.protected_objects), None)
        raise InUse(
            f"{obj} is still used by {holder._meta.verbose_name if holder else 'another object'} {holder}: "
            "it is kept so that what was made from it can be reproduced",
            field="version" if isinstance(obj, DatasetVersion) else "dataset",
        ) from None


@transaction.atomic
def dataset_version_delete(*, version: DatasetVersion, user: User) -> None:
    """Delete a version no job uses (a job's version is kept so the job can be reproduced)."""
    used = _job_using([version])
    if used:
        raise InUse(f"{used}: a version a job used is kept so the job can be reproduced", field="version")
    location = version.rows_path
    audit(team=version.dataset.team, user=user, action="dataset_version.delete", obj=version)
    _delete_unprotected(version)
    transaction.on_commit(lambda: storage.delete(location))


@transaction.atomic
def dataset_delete(*, dataset: Dataset, user: User) -> None:
    """Delete a dataset and its versions, when no job uses any of them."""
    versions = list(dataset.versions.all())
    used = _job_using(versions)
    if used:
        raise InUse(f"{used}: delete the dataset's unused versions instead, or keep it", field="dataset")
    locations = [v.rows_path for v in versions]
    audit(team=dataset.team, user=user, action="dataset.delete", obj=dataset, name=dataset.name)
    _delete_unprotected(dataset)
    transaction.on_commit(lambda: [storage.delete(location) for location in locations])


@transaction.atomic
def dataset_version_create_from_rows(
    *,
    team: Team,
    user: User | None,
    name: str,
    rows: list[dict],
    stats: dict | None = None,
    pack: dict | None = None,
) -> DatasetVersion:
    """Freeze rows made by the platform itself (demo data, domain packs) as a new version."""
    lines = [json.dumps(row, ensure_ascii=False, separators=(",", ":")) + "\n" for row in rows]
    body = "".join(lines).encode()
    sha = hashlib.sha256(body).hexdigest()
    location = storage.store_bytes(
        area="datasets", name=f"{team.id}/{sha[:16]}-{uuid.uuid4().hex[:8]}.jsonl", body=body
    )
    dataset, _ = Dataset.objects.get_or_create(team=team, name=name, defaults={"created_by": user})
    columns = sorted({key for row in rows for key in row})
    version = DatasetVersion.objects.create(
        dataset=dataset,
        number=_next_number(dataset),
        row_count=len(rows),
        columns=columns,
        sha256=sha,
        rows_path=location,
        stats=stats or {},
        pack=pack or {},
        created_by=user,
    )
    audit(team=team, user=user, action="dataset_version.create", obj=version)
    return version
