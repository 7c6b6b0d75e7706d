"""The columns and first rows of an uploaded file, for the expert to choose the mapping. Django-free.

Read by the worker (anneal.datasets.services.dataset_upload_preview), never the web process: even the first
rows of a hostile file (a Parquet or gzip bomb) may take seconds and memory to refuse.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path

from anneal.datasets.readers import FileRefused, ReadLimits, RowError, detect_format, open_records

PREVIEW_ROWS = 5
PREVIEW_SCAN_ROWS = 200  # JSON Lines has no header: columns are the keys seen in the first rows
# At most this much is read (decompressed): a preview is the beginning of a file, not a full pass.
PREVIEW_MAX_BYTES = 64 * 1024 * 1024


@dataclass
class UploadPreview:
    columns: list[str] = field(default_factory=list)
    rows: list[dict] = field(default_factory=list)
    problems: list[dict] = field(default_factory=list)  # row errors among the first rows
    refused: str = ""  # why the file cannot be read at all

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict) -> UploadPreview:
        return cls(
            **{name: data[name] for name in ("columns", "rows", "problems", "refused") if name in data}
        )


def read_preview(*, path: Path, file_name: str, limits: ReadLimits) -> UploadPreview:
    """The columns and the first rows of the file at ``path``. Reads only the beginning of it."""
    preview = UploadPreview()
    seen: dict[str, None] = {}
    bounded = limits
    if detect_format(file_name)[0] != "parquet":
        # Parquet expands only the rows read (anneal.datasets.parquet); a text stream is held to its beginning.
        bounded = ReadLimits(
            max_line_bytes=limits.max_line_bytes,
            max_decompressed_bytes=min(limits.max_decompressed_bytes, PREVIEW_MAX_BYTES),
            max_columns=limits.max_columns,
        )
    try:
        with open_records(path=path, file_name=file_name, limits=bounded) as source:
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
        if "decompresses to more than" in exc.message and bounded is not limits:
            preview.refused = (
                f"the first {PREVIEW_SCAN_ROWS} rows of the file expand to more than {PREVIEW_MAX_BYTES} bytes, "
                "so no preview is shown; map the columns by name (or check the file)"
            )
    return preview
