"""Parse and validate an uploaded JSONL file row by row, streaming: memory stays flat as files grow."""

import hashlib
import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import BinaryIO

MAX_LINE_BYTES = 8 * 1024 * 1024
MAX_LISTED_ERRORS = 200
REQUIRED_ROLES = ("prompt",)
MAPPABLE_ROLES = ("prompt", "answer")


@dataclass
class IngestReport:
    rows: int = 0
    columns: set[str] = field(default_factory=set)
    errors: list[dict] = field(default_factory=list)
    error_count: int = 0
    sha256: str = ""

    def add_error(self, row: int, field_name: str, message: str) -> None:
        self.error_count += 1
        if len(self.errors) < MAX_LISTED_ERRORS:
            self.errors.append({"row": row, "field": field_name, "message": message})


def _lines(stream: BinaryIO) -> Iterator[tuple[int, bytes | None]]:
    """Yield (line number, raw line); a line over the limit yields None after skipping to its end."""
    number = 0
    while True:
        line = stream.readline(MAX_LINE_BYTES + 1)
        if not line:
            return
        number += 1
        if len(line) > MAX_LINE_BYTES and not line.endswith(b"\n"):
            while (rest := stream.readline(MAX_LINE_BYTES)) and not rest.endswith(b"\n"):
                pass
            yield number, None
            continue
        yield number, line


def _canonical(record: dict, mapping: dict[str, str], row: int, report: IngestReport) -> dict | None:
    out: dict = {}
    ok = True
    for role in MAPPABLE_ROLES:
        column = mapping.get(role)
        if not column:
            continue
        if column not in record:
            report.add_error(row, column, f"missing column '{column}' (mapped to {role})")
            ok = False
            continue
        value = record[column]
        if isinstance(value, int | float) and not isinstance(value, bool):
            value = str(value)
        if not isinstance(value, str):
            report.add_error(row, column, f"{role} must be text, got {type(value).__name__}")
            ok = False
        elif role in REQUIRED_ROLES and not value.strip():
            report.add_error(row, column, f"{role} is empty")
            ok = False
        else:
            out[role] = value
    if not ok:
        return None
    mapped = {mapping[r] for r in MAPPABLE_ROLES if mapping.get(r)}
    for key, value in record.items():
        if key not in mapped and key not in out:
            out[key] = value
    return out


def ingest_jsonl(*, source: BinaryIO, target: Path, mapping: dict[str, str]) -> IngestReport:
    """Validate every line of ``source``; write canonical rows to ``target`` (the caller deletes it on errors)."""
    report = IngestReport()
    digest = hashlib.sha256()
    with target.open("wb") as out:
        for row, raw in _lines(source):
            if raw is None:
                report.add_error(row, "(line)", f"line is longer than the limit of {MAX_LINE_BYTES} bytes")
                continue
            if not raw.strip():
                continue
            try:
                record = json.loads(raw.decode("utf-8"))
            except UnicodeDecodeError as exc:
                report.add_error(row, "(line)", f"not valid UTF-8 at byte {exc.start}")
                continue
            except json.JSONDecodeError as exc:
                report.add_error(row, "(line)", f"not valid JSON: {exc.msg} at column {exc.colno}")
                continue
            if not isinstance(record, dict):
                report.add_error(
                    row, "(line)", f"each line must be a JSON object, got {type(record).__name__}"
                )
                continue
            canonical = _canonical(record, mapping, row, report)
            if canonical is None:
                continue
            encoded = (json.dumps(canonical, ensure_ascii=False, separators=(",", ":")) + "\n").encode()
            out.write(encoded)
            digest.update(encoded)
            report.rows += 1
            report.columns.update(canonical)
    if report.rows == 0 and report.error_count == 0:
        report.add_error(0, "(file)", "the file has no rows")
    report.sha256 = digest.hexdigest()
    return report


def read_rows(path: str | Path, *, offset: int = 0, limit: int | None = None) -> list[dict]:
    rows = []
    with open(path, encoding="utf-8") as handle:
        for index, line in enumerate(handle):
            if index < offset:
                continue
            if limit is not None and len(rows) >= limit:
                break
            rows.append(json.loads(line))
    return rows
