"""Stream records out of an uploaded file (JSON Lines, CSV, Parquet; each also gzip-compressed), bounded.

Django-free. Nothing here holds the whole file: JSON Lines and CSV are read line by line through buffered
readers, Parquet batch by batch. Every limit is enforced while reading: the decompressed size (a gzip bomb
stops at the limit, not at the end of the bomb), the length of one line, the raw size. A problem with one
row is yielded as a ``RowError`` and reading goes on; a problem that makes the rest of the file unreadable
raises ``FileRefused``, whose message names the row (where known) and the limit.
"""

from __future__ import annotations

import csv
import gzip
import io
import json
import shutil
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import BinaryIO

from anneal import jsontext
from anneal.datasets.parquet import CellTooLarge, ParquetLimits, ParquetRefused, open_parquet

FORMATS = ("jsonl", "csv", "parquet")
SUFFIXES = {
    ".jsonl": "jsonl",
    ".ndjson": "jsonl",
    ".json": "jsonl",
    ".csv": "csv",
    ".parquet": "parquet",
    ".pq": "parquet",
}
GZIP_MAGIC = b"\x1f\x8b"


class FileRefused(Exception):
    """The file as a whole cannot be read: nothing of it may be stored. ``row`` is 0 when no row is to blame."""

    def __init__(self, message: str, *, row: int = 0, field: str = "(file)") -> None:
        super().__init__(message)
        self.message = message
        self.row = row
        self.field = field

    def to_dict(self) -> dict:
        return {"row": self.row, "field": self.field, "message": self.message}


@dataclass(frozen=True)
class RowError:
    row: int
    field: str
    message: str

    def to_dict(self) -> dict:
        return {"row": self.row, "field": self.field, "message": self.message}


@dataclass(frozen=True)
class ReadLimits:
    """``max_line_bytes`` bounds one line (JSONL, CSV) or one cell (Parquet); ``max_decompressed_bytes`` what
    a gzip may expand to and what a Parquet file may decode to; ``max_columns`` a Parquet file's columns."""

    max_line_bytes: int = 8 * 1024 * 1024
    max_decompressed_bytes: int = 2 * 1024 * 1024 * 1024
    max_columns: int = 1000


def detect_format(file_name: str) -> tuple[str, bool]:
    """(format, gzipped) from the file name: ``rows.csv.gz`` -> ("csv", True). FileRefused for other names."""
    name = file_name.lower()
    gzipped = name.endswith(".gz")
    if gzipped:
        name = name[: -len(".gz")]
    for suffix, fmt in SUFFIXES.items():
        if name.endswith(suffix):
            return fmt, gzipped
    known = ", ".join(sorted({*SUFFIXES, *(s + ".gz" for s in SUFFIXES)}))
    raise FileRefused(f"'{file_name}' has an unknown type: name it with one of {known}", field="file")


class _Counting(io.RawIOBase):
    """Counts the bytes read from the stored (possibly compressed) file, for progress."""

    def __init__(self, raw: BinaryIO) -> None:
        self.raw = raw
        self.count = 0

    def readable(self) -> bool:
        return True

    def readinto(self, buffer) -> int:
        n = self.raw.readinto(buffer)
        self.count += n or 0
        return n


class _Bounded(io.RawIOBase):
    """Raises FileRefused once more than ``limit`` decompressed bytes have come out of ``inner``."""

    def __init__(self, inner: BinaryIO, *, limit: int) -> None:
        self.inner = inner
        self.limit = limit
        self.count = 0

    def readable(self) -> bool:
        return True

    def readinto(self, buffer) -> int:
        data = self.inner.read(len(buffer))
        self.count += len(data)
        if self.count > self.limit:
            raise FileRefused(
                f"the file decompresses to more than the limit of {self.limit} bytes "
                "(ANNEAL_UPLOAD_MAX_DECOMPRESSED_MB); upload fewer rows or split the file"
            )
        buffer[: len(data)] = data
        return len(data)


@dataclass
class RecordSource:
    """An open file: iterate for (row number, record or RowError). Close it (or use ``with``) when done."""

    fmt: str
    gzipped: bool
    columns: list[str] | None = None  # known up front for CSV and Parquet; None for JSON Lines
    column_types: dict[str, str] = field(default_factory=dict)  # Parquet's Arrow types, by column
    total_rows: int | None = None  # Parquet knows its row count up front: progress by rows there
    _counter: _Counting | None = None
    _iterator: Iterator[tuple[int, dict | RowError]] | None = None
    _closers: list = field(default_factory=list)

    @property
    def bytes_read(self) -> int:
        return self._counter.count if self._counter else 0

    def __iter__(self) -> Iterator[tuple[int, dict | RowError]]:
        assert self._iterator is not None
        return self._iterator

    def close(self) -> None:
        for closer in reversed(self._closers):
            closer()
        self._closers.clear()

    def __enter__(self) -> RecordSource:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def open_records(*, path: Path, file_name: str, limits: ReadLimits) -> RecordSource:
    """Open ``path`` (named ``file_name`` by the user) for streaming. FileRefused when it cannot be read."""
    fmt, gzipped = detect_format(file_name)
    raw = open(path, "rb")  # noqa: SIM115 - closed by the source
    source = RecordSource(fmt=fmt, gzipped=gzipped)
    source._closers.append(raw.close)
    try:
        magic = raw.read(2)
        raw.seek(0)
        if gzipped and magic != GZIP_MAGIC:
            raise FileRefused(f"'{file_name}' is named .gz but is not gzip-compressed")
        counter = _Counting(raw)
        source._counter = counter
        stream: BinaryIO = io.BufferedReader(counter, buffer_size=1 << 16)
        if gzipped:
            stream = io.BufferedReader(
                _Bounded(gzip.GzipFile(fileobj=stream, mode="rb"), limit=limits.max_decompressed_bytes),
                buffer_size=1 << 20,
            )
        if fmt == "jsonl":
            source._iterator = _jsonl_records(stream, limits=limits)
        elif fmt == "csv":
            _open_csv(source, stream, limits=limits)
        else:
            _open_parquet(source, stream, gzipped=gzipped, limits=limits)
    except FileRefused:
        source.close()
        raise
    except (OSError, EOFError, gzip.BadGzipFile) as exc:
        source.close()
        raise FileRefused(f"cannot read the file: {exc}") from exc
    return source


def _wrap_errors(iterator: Iterator, *, what: str) -> Iterator:
    """Turn a decompression failure half-way through into FileRefused (a truncated or corrupt gzip)."""
    try:
        yield from iterator
    except (OSError, EOFError, gzip.BadGzipFile) as exc:
        raise FileRefused(f"cannot read the {what}: {exc}") from exc


def _jsonl_records(stream: BinaryIO, *, limits: ReadLimits) -> Iterator[tuple[int, dict | RowError]]:
    return _wrap_errors(_jsonl_lines(stream, limits=limits), what="file")


def _jsonl_lines(stream: BinaryIO, *, limits: ReadLimits) -> Iterator[tuple[int, dict | RowError]]:
    limit = limits.max_line_bytes
    number = 0
    while True:
        line = stream.readline(limit + 1)
        if not line:
            return
        number += 1
        if len(line) > limit and not line.endswith(b"\n"):
            # Skip to the end of the long line in bounded pieces: memory never holds more than the limit.
            while (rest := stream.readline(limit)) and not rest.endswith(b"\n"):
                pass
            yield number, RowError(number, "(line)", f"line is longer than the limit of {limit} bytes")
            continue
        if not line.strip():
            continue
        try:
            record = jsontext.loads(line.decode("utf-8"))
        except UnicodeDecodeError as exc:
            yield number, RowError(number, "(line)", f"not valid UTF-8 at byte {exc.start + 1}")
            continue
        except jsontext.TooDeep as exc:
            yield number, RowError(number, "(line)", f"the JSON is {exc}")
            continue
        except json.JSONDecodeError as exc:
            yield number, RowError(number, "(line)", f"not valid JSON: {exc.msg} at column {exc.colno}")
            continue
        if not isinstance(record, dict):
            kind = type(record).__name__
            yield number, RowError(number, "(line)", f"each line must be a JSON object, got {kind}")
            continue
        yield number, record


def _text_lines(stream: BinaryIO, *, limit: int) -> Iterator[str]:
    """Physical lines decoded strictly, for the csv module; FileRefused names the line that breaks a rule."""
    number = 0
    while True:
        line = stream.readline(limit + 1)
        if not line:
            return
        number += 1
        if len(line) > limit and not line.endswith(b"\n"):
            raise FileRefused(f"line {number} is longer than the limit of {limit} bytes", row=number)
        try:
            text = line.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise FileRefused(
                f"line {number} is not valid UTF-8 (at byte {exc.start + 1})", row=number
            ) from exc
        if number == 1 and text.startswith("\ufeff"):
            text = text[1:]  # a byte order mark, as spreadsheet programs write
        yield text


def _open_csv(source: RecordSource, stream: BinaryIO, *, limits: ReadLimits) -> None:
    csv.field_size_limit(limits.max_line_bytes)
    reader = csv.reader(_text_lines(stream, limit=limits.max_line_bytes))
    try:
        header = next(reader, None)
    except csv.Error as exc:
        raise FileRefused(f"the header line is not valid CSV: {exc}") from exc
    if not header or not any(name.strip() for name in header):
        raise FileRefused("the file has no rows")
    header = [name.strip() for name in header]
    seen: set[str] = set()
    for name in header:
        if not name:
            raise FileRefused("the header has an empty column name", field="(header)")
        if name in seen:
            raise FileRefused(f"the header names column '{name}' twice", field=name)
        seen.add(name)
    source.columns = header
    source._iterator = _wrap_errors(_csv_rows(reader, header), what="file")


def _csv_rows(reader, header: list[str]) -> Iterator[tuple[int, dict | RowError]]:
    number = 0
    width = len(header)
    while True:
        try:
            cells = next(reader)
        except StopIteration:
            return
        except csv.Error as exc:
            raise FileRefused(f"not valid CSV at data row {number + 1}: {exc}", row=number + 1) from exc
        if not cells:
            continue
        number += 1
        if len(cells) != width:
            yield number, RowError(number, "(row)", f"has {len(cells)} fields, the header has {width}")
            continue
        yield number, dict(zip(header, cells, strict=True))


def _open_parquet(source: RecordSource, stream: BinaryIO, *, gzipped: bool, limits: ReadLimits) -> None:
    import pyarrow as pa

    handle: BinaryIO = stream
    if gzipped:
        # Parquet needs to seek (its index is at the end): expand into a temporary file, bounded by _Bounded.
        spool = tempfile.TemporaryFile()  # noqa: SIM115 - closed by the source
        source._closers.append(spool.close)
        shutil.copyfileobj(stream, spool, length=1 << 20)
        spool.seek(0)
        handle = spool
    else:
        handle = stream.raw.raw  # type: ignore[attr-defined]  # the plain file: seekable
        handle.seek(0)
    bounds = ParquetLimits(
        max_columns=limits.max_columns,
        max_cell_bytes=limits.max_line_bytes,
        max_decoded_bytes=limits.max_decompressed_bytes,
    )
    try:
        parquet = open_parquet(handle, limits=bounds)
    except ParquetRefused as exc:
        raise FileRefused(exc.message, row=exc.row, field=exc.field) from None
    except (pa.ArrowException, OSError, ValueError) as exc:
        raise FileRefused(f"not a readable Parquet file: {exc}") from exc
    source.columns = parquet.columns
    source.column_types = parquet.column_types
    source.total_rows = parquet.total_rows
    source._iterator = _parquet_rows(parquet.rows)


def _parquet_rows(rows: Iterator[tuple[int, dict | CellTooLarge]]) -> Iterator[tuple[int, dict | RowError]]:
    import pyarrow as pa

    number = 0
    try:
        for number, record in rows:
            if isinstance(record, CellTooLarge):
                yield number, RowError(number, record.column, record.message)
            else:
                yield number, record
    except ParquetRefused as exc:
        raise FileRefused(exc.message, row=exc.row, field=exc.field) from None
    except (pa.ArrowException, OSError) as exc:
        raise FileRefused(f"the Parquet file is damaged after row {number}: {exc}", row=number + 1) from exc
