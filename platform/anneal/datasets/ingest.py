"""Turn an uploaded file into canonical rows: read (bounded, streamed), validate against the mapping,
drop exact duplicates, count statistics. Django-free, so the benchmark and unit tests run it directly.

Memory stays flat as files grow: rows are never held, only written. Duplicate detection keeps one
8-byte hash per row (8 MB per million rows), and the statistics keep counters of lengths and domains.
Two passes: the first validates and writes candidate rows (prefixed with their source row number) to a
scratch file; the second drops repeats of an earlier row and writes the final file.
"""

from __future__ import annotations

import hashlib
import json
from array import array
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import BinaryIO

from anneal.datasets.mapping import Mapping, canonical_row, nul_errors, prompt_text
from anneal.datasets.openai_chat import chat_mapping, chat_row
from anneal.datasets.readers import FileRefused, ReadLimits, RowError, open_records
from anneal.datasets.tokens import TokenCounter

MAX_LISTED_ERRORS = 200
MAX_LISTED_DUPLICATES = 20
MAX_DOMAINS = 1000
TOKEN_BATCH = 1024
PROGRESS_EVERY_ROWS = 5000


@dataclass
class Progress:
    rows_read: int
    fraction: float  # of the file read, 0..1


@dataclass
class IngestReport:
    rows: int = 0  # kept: valid and unique
    rows_read: int = 0
    duplicates: int = 0
    error_count: int = 0
    errors: list[dict] = field(default_factory=list)
    duplicate_examples: list[dict] = field(default_factory=list)
    columns: list[str] = field(default_factory=list)
    sha256: str = ""
    stats: dict = field(default_factory=dict)
    refused: dict | None = None  # the file-level error that stopped reading, if any
    error_sink: BinaryIO | None = None  # every error as a JSON line, beyond the listed ones

    def add_error(self, error: RowError) -> None:
        self.error_count += 1
        if len(self.errors) < MAX_LISTED_ERRORS:
            self.errors.append(error.to_dict())
        if self.error_sink is not None:
            self.error_sink.write(_encode(error.to_dict()) + b"\n")

    @property
    def ok(self) -> bool:
        return self.refused is None and self.rows > 0


class _Lengths:
    """A histogram of token lengths: min, mean, percentiles and max without keeping every value."""

    def __init__(self) -> None:
        self.counts: Counter[int] = Counter()

    def summary(self) -> dict:
        counts = +self.counts  # drops lengths whose rows were all taken back as duplicates
        total = sum(counts.values())
        if not total:
            return {}
        ordered = sorted(counts.items())
        mean = sum(length * count for length, count in ordered) / total

        def percentile(p: float) -> int:
            goal, seen = p * total, 0
            for length, count in ordered:
                seen += count
                if seen >= goal:
                    return length
            return ordered[-1][0]

        return {
            "min": ordered[0][0],
            "mean": round(mean, 2),
            "p50": percentile(0.5),
            "p95": percentile(0.95),
            "max": ordered[-1][0],
        }


class _Stats:
    def __init__(self, counter: TokenCounter) -> None:
        self.counter = counter
        self.domains: Counter[str] = Counter()
        self.prompt = _Lengths()
        self.answer = _Lengths()
        self.pending: list[dict] = []

    def add(self, row: dict) -> None:
        self.pending.append(row)
        if len(self.pending) >= TOKEN_BATCH:
            self._flush()

    def remove(self, row: dict) -> None:
        """Take back a row counted before (a duplicate found in the second pass)."""
        self._flush()
        self.pending.append(row)
        self._flush(sign=-1)

    def _flush(self, *, sign: int = 1) -> None:
        rows, self.pending = self.pending, []
        if not rows:
            return
        prompts = self.counter.count([prompt_text(r["prompt"]) for r in rows])
        with_answer = [r for r in rows if "answer" in r]
        answers = self.counter.count([r["answer"] for r in with_answer])
        for row, length in zip(rows, prompts, strict=True):
            self.prompt.counts[length] += sign
            domain = row.get("domain", "(none)")
            if domain not in self.domains and len(self.domains) >= MAX_DOMAINS:
                domain = "(other)"
            self.domains[domain] += sign
        for length in answers:
            self.answer.counts[length] += sign

    def summary(self, *, rows: int, duplicates: int, skipped: int) -> dict:
        self._flush()
        return {
            "rows": rows,
            "duplicates_removed": duplicates,
            "rows_skipped": skipped,
            "tokenizer": self.counter.name,
            "domains": dict(sorted((+self.domains).items(), key=lambda kv: (-kv[1], kv[0]))),
            "prompt_tokens": self.prompt.summary(),
            "answer_tokens": self.answer.summary(),
        }


def _encode(row: dict) -> bytes:
    return json.dumps(row, ensure_ascii=False, separators=(",", ":"), default=str).encode()


def _hash64(line: bytes) -> int:
    return int.from_bytes(hashlib.blake2b(line, digest_size=8).digest(), "little")


def ingest_file(
    *,
    path: Path,
    file_name: str,
    mapping: Mapping,
    target: Path,
    limits: ReadLimits,
    tokens: TokenCounter,
    on_progress: Callable[[Progress], None] | None = None,
    errors_to: Path | None = None,
) -> IngestReport:
    """Validate every record of ``path``; write the kept rows as JSON Lines to ``target``.

    Precondition: ``target``'s folder exists. On a file-level problem ``report.refused`` is set and
    ``target`` does not exist; the caller decides from the report whether to keep ``target``.
    Every error (not only the first listed ones) goes to ``errors_to`` as JSON Lines when given.
    """
    if errors_to is None:
        return _ingest(
            path=path,
            file_name=file_name,
            mapping=mapping,
            target=target,
            limits=limits,
            tokens=tokens,
            on_progress=on_progress,
            report=IngestReport(),
        )
    with errors_to.open("wb") as sink:
        return _ingest(
            path=path,
            file_name=file_name,
            mapping=mapping,
            target=target,
            limits=limits,
            tokens=tokens,
            on_progress=on_progress,
            report=IngestReport(error_sink=sink),
        )


def _ingest(
    *,
    path: Path,
    file_name: str,
    mapping: Mapping,
    target: Path,
    limits: ReadLimits,
    tokens: TokenCounter,
    on_progress: Callable[[Progress], None] | None,
    report: IngestReport,
) -> IngestReport:
    scratch = target.with_name(target.name + ".pass1")
    stats = _Stats(tokens)
    hashes = array("Q")
    columns: set[str] = set()
    chat: Mapping | None = None  # set when the first record is OpenAI's chat format (no mapping step)
    first = True
    try:
        with open_records(path=path, file_name=file_name, limits=limits) as source:
            mapping.check_columns(columns=source.columns, column_types=source.column_types)
            with scratch.open("wb") as out:
                for number, record in source:
                    report.rows_read += 1
                    if on_progress and report.rows_read % PROGRESS_EVERY_ROWS == 0:
                        on_progress(Progress(report.rows_read, _fraction(source, path, report.rows_read)))
                    if isinstance(record, RowError):
                        report.add_error(record)
                        continue
                    if first:
                        chat, first = chat_mapping(record, mapping), False
                    if chat is not None:
                        row, errors = chat_row(record, mapping=chat, row=number)
                    else:
                        row, errors = canonical_row(record, mapping=mapping, row=number)
                    if row is None:
                        for error in errors:
                            report.add_error(error)
                        continue
                    line = _encode(row)
                    # JSON escapes NUL as \u0000: a bytes search spares a walk over the values of every row.
                    if b"\\u0000" in line and (
                        problems := nul_errors(row, mapping=chat or mapping, row=number)
                    ):
                        for error in problems:
                            report.add_error(error)
                        continue
                    hashes.append(_hash64(line))
                    out.write(b"%d\t%s\n" % (number, line))
                    stats.add(row)
                    columns.update(row)
    except FileRefused as exc:
        scratch.unlink(missing_ok=True)
        report.refused = exc.to_dict()
        report.add_error(RowError(exc.row, exc.field, exc.message))
        return report
    if not hashes:
        scratch.unlink(missing_ok=True)
        if report.error_count == 0:
            report.refused = {"row": 0, "field": "(file)", "message": "the file has no rows"}
            report.add_error(RowError(0, "(file)", "the file has no rows"))
        return report
    _second_pass(scratch=scratch, target=target, hashes=hashes, report=report, stats=stats)
    report.columns = sorted(columns)
    report.stats = stats.summary(rows=report.rows, duplicates=report.duplicates, skipped=report.error_count)
    if on_progress:
        on_progress(Progress(report.rows_read, 1.0))
    return report


def _fraction(source, path: Path, rows_read: int) -> float:
    if source.total_rows:
        return min(1.0, rows_read / source.total_rows)
    size = path.stat().st_size or 1
    return min(1.0, source.bytes_read / size)


def _second_pass(*, scratch: Path, target: Path, hashes: array, report: IngestReport, stats: _Stats) -> None:
    """Copy the first occurrence of each row to ``target``; subtract repeats from the statistics.

    The hashes are sorted in place (no copy) to find the values that occur more than once; only those are
    kept in a set, so the extra memory is bounded by the number of repeated rows, not the file.
    """
    import numpy as np

    values = np.frombuffer(hashes, dtype=np.uint64)
    values.sort()
    repeated = values[1:][values[1:] == values[:-1]]
    repeated_hashes = set(repeated.tolist())
    del values, repeated
    del hashes[:]  # 8 bytes a row, no longer needed
    first_row: dict[int, int] = {}  # a repeated hash -> the row number where it was first seen
    digest = hashlib.sha256()
    with scratch.open("rb") as source, target.open("wb") as out:
        for raw in source:
            number, _, line = raw.partition(b"\t")
            if repeated_hashes:
                key = _hash64(line[:-1])
                if key in repeated_hashes:
                    if key in first_row:
                        report.duplicates += 1
                        stats.remove(json.loads(line))
                        if len(report.duplicate_examples) < MAX_LISTED_DUPLICATES:
                            report.duplicate_examples.append(
                                {"row": int(number), "duplicate_of": first_row[key]}
                            )
                        continue
                    first_row[key] = int(number)
            out.write(line)
            digest.update(line)
            report.rows += 1
    scratch.unlink(missing_ok=True)
    report.sha256 = digest.hexdigest()


def read_rows(path: str | Path, *, offset: int = 0, limit: int | None = None) -> list[dict]:
    """Rows ``offset`` .. ``offset + limit`` of a frozen version's file (streamed to the offset)."""
    rows = []
    with open(path, encoding="utf-8") as handle:
        for index, line in enumerate(handle):
            if index < offset:
                continue
            if limit is not None and len(rows) >= limit:
                break
            rows.append(json.loads(line))
    return rows
