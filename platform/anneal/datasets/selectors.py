"""Reads for datasets: the first rows of an upload (for the mapping page), errors as CSV, pages of rows."""

import csv
import io
import json
from collections.abc import Iterator

from anneal.datasets import storage
from anneal.datasets.models import DatasetUpload
from anneal.datasets.preview import UploadPreview
from anneal.datasets.storage import StoredFileMissing


def upload_preview(*, upload: DatasetUpload) -> UploadPreview | None:
    """The columns and first rows the worker read from an upload (anneal.datasets.preview); None until then."""
    return UploadPreview.from_dict(upload.preview) if upload.preview else None


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
