"""Reads for datasets: the first rows of an upload (for the mapping page), errors as CSV, pages of rows."""

import csv
import io
import json
from collections.abc import Iterator
from dataclasses import dataclass, field

from anneal.datasets import storage
from anneal.datasets.models import DatasetUpload
from anneal.datasets.readers import FileRefused, ReadLimits, RowError, open_records
from anneal.datasets.services import read_limits
from anneal.datasets.storage import StoredFileMissing

PREVIEW_ROWS = 5
PREVIEW_SCAN_ROWS = 200  # JSON Lines has no header: columns are the keys seen in the first rows
# The page view reads at most this much (decompressed): a hostile file cannot hold a web process for long.
PREVIEW_MAX_BYTES = 64 * 1024 * 1024


@dataclass
class UploadPreview:
    columns: list[str] = field(default_factory=list)
    rows: list[dict] = field(default_factory=list)
    problems: list[dict] = field(default_factory=list)  # row errors among the first rows
    refused: str = ""  # why the file cannot be read at all


def upload_preview(*, upload: DatasetUpload) -> UploadPreview:
    """The columns and the first rows of a stored upload. Reads only the beginning of the file."""
    preview = UploadPreview()
    try:
        local = storage.local_copy(upload.file_path) if upload.file_path else None
    except StoredFileMissing:
        local = None
    if local is None:
        preview.refused = "the uploaded file is no longer stored"
        return preview
    seen: dict[str, None] = {}
    try:
        full = read_limits()
        limits = ReadLimits(
            max_line_bytes=full.max_line_bytes,
            max_decompressed_bytes=min(full.max_decompressed_bytes, PREVIEW_MAX_BYTES),
        )
        with open_records(path=local, file_name=upload.file_name, limits=limits) as source:
            for index, (_, record) in enumerate(source):
                if index >= PREVIEW_SCAN_ROWS:
                    break
                if isinstance(record, RowError):
                    if len(preview.problems) < PREVIEW_ROWS:
                        preview.problems.append(record.to_dict())
                    continue
                seen.update(dict.fromkeys(record))
                if len(preview.rows) < PREVIEW_ROWS:
                    preview.rows.append(json.loads(json.dumps(record, default=str)))
            preview.columns = source.columns if source.columns is not None else list(seen)
    except FileRefused as exc:
        preview.refused = exc.message
        if (
            "decompresses to more than" in exc.message
            and PREVIEW_MAX_BYTES < read_limits().max_decompressed_bytes
        ):
            preview.refused = (
                f"the first {PREVIEW_SCAN_ROWS} rows of the file expand to more than {PREVIEW_MAX_BYTES} bytes, "
                "so no preview is shown; map the columns by name (or check the file)"
            )
    return preview


def upload_errors(*, upload: DatasetUpload) -> Iterator[dict]:
    """Every error of an upload: from its errors file when there is one, else the listed ones."""
    try:
        path = storage.local_copy(upload.errors_path) if upload.errors_path else None
    except StoredFileMissing:
        path = None
    if path is None:
        yield from upload.errors
        return
    with path.open("rb") as handle:
        for line in handle:
            yield json.loads(line)


def upload_errors_csv(*, upload: DatasetUpload) -> Iterator[str]:
    """The errors as CSV text, a line at a time (for a streaming download)."""
    buffer = io.StringIO()
    writer = csv.writer(buffer)
    writer.writerow(["row", "field", "problem"])
    for error in upload_errors(upload=upload):
        writer.writerow([error.get("row", ""), error.get("field", ""), error.get("message", "")])
        yield buffer.getvalue()
        buffer.seek(0)
        buffer.truncate(0)
    yield buffer.getvalue()
