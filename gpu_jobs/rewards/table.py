"""table: a table in the completion (CSV, Markdown or JSON rows) against the row's reference table, cell by cell.

The score is the share of the reference's cells the completion got right, where rows the completion adds
beyond the reference's count against it (so listing every candidate row is no way to match them all): matched
cells / ((reference rows + extra rows) x reference columns). Cells compare after trimming (and folding case
unless ``case_sensitive``); two cells that both read as numbers ("1,200", "$3.5", "45%") compare within
``abs_tol`` / ``rel_tol``. Columns match by header name when both tables have one (``columns: "name"``), else
by position; rows in order (``row_order: "strict"``) or each reference row to the best unused completion row
(``"any"``, for tables whose order the task leaves open). No code runs: the table is parsed as data.
"""

from __future__ import annotations

import csv
import io
import json
import math
import re

from gpu_jobs.rewards.base import Scorer, ScoreResult, SpecError, SpecField, shorten
from gpu_jobs.rewards.numeric import parse_number

FORMATS = ("auto", "csv", "markdown", "json")
ROW_ORDERS = ("strict", "any")
COLUMN_MODES = ("name", "position")
MAX_CELLS = 20_000  # a completion's table past this is refused, not compared (a flood is not an answer)
_FENCE = re.compile(r"```[a-zA-Z]*\n(.*?)```", re.DOTALL)
_MD_SEPARATOR = re.compile(r"^\s*\|?\s*:?-{2,}:?\s*(\|\s*:?-{2,}:?\s*)*\|?\s*$")
_NUMBERISH = re.compile(r"^[\s$€£¥+−-]*[\d.,]+\s*[%a-zA-Z]*\s*$")

Table = tuple[list[str] | None, list[list[str]]]  # (header or None, rows of cells)


def _cell(value: object) -> str:
    if value is None:
        return ""
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value).strip()


def from_json(value: object) -> Table | None:
    """A list of objects (keys: the header) or of lists (no header), as a table; None for anything else."""
    if not isinstance(value, list) or not value:
        return None
    if all(isinstance(item, dict) for item in value):
        header: list[str] = []
        for item in value:
            header += [str(k) for k in item if str(k) not in header]
        return header, [[_cell(item.get(k)) for k in header] for item in value]
    if all(isinstance(item, list) for item in value):
        return None, [[_cell(cell) for cell in item] for item in value]
    return None


def _json_table(text: str) -> Table | None:
    start = text.find("[")
    while start != -1:
        try:
            value, _ = json.JSONDecoder().raw_decode(text[start:])
        except RecursionError:  # nested past the interpreter's limit: no table, and no point trying on
            return None
        except ValueError:
            start = text.find("[", start + 1)
            continue
        found = from_json(value)
        if found is not None:
            return found
        start = text.find("[", start + 1)
    return None


def _markdown_table(text: str) -> Table | None:
    lines = [line.strip() for line in text.splitlines() if line.count("|") >= 1 and line.strip()]
    rows: list[list[str]] = []
    header: list[str] | None = None
    for index, line in enumerate(lines):
        if _MD_SEPARATOR.match(line):
            if index == 1 and rows:
                header = rows.pop()
            continue
        rows.append([cell.strip() for cell in line.strip().strip("|").split("|")])
    if not rows and header is None:
        return None
    return header, rows


def _csv_table(text: str, *, header: bool) -> Table | None:
    lines = [line for line in text.strip().splitlines() if line.strip()]
    if not lines:
        return None
    try:
        dialect = csv.Sniffer().sniff("\n".join(lines[:20]), delimiters=",;\t")
        delimiter = dialect.delimiter
    except csv.Error:
        delimiter = ","
    rows = [
        [cell.strip() for cell in row]
        for row in csv.reader(io.StringIO("\n".join(lines)), delimiter=delimiter)
    ]
    rows = [row for row in rows if any(row)]
    if not rows or max(len(row) for row in rows) < 2 and len(rows) < 2:
        return None
    return (rows[0], rows[1:]) if header else (None, rows)


def parse_table(text: str, *, how: str = "auto", header: bool = True) -> Table | None:
    """The first table in ``text`` (a fenced block first, else the whole text), or None."""
    fenced = _FENCE.findall(text)
    sources = [*fenced, text] if fenced else [text]
    for source in sources:
        if how in ("auto", "json"):
            found = _json_table(source)
            if found is not None:
                return found
        if how in ("auto", "markdown") and "|" in source:
            found = _markdown_table(source)
            if found is not None:
                return found if header or found[0] is None else (None, [found[0], *found[1]])
        if how in ("auto", "csv"):
            found = _csv_table(source, header=header)
            if found is not None:
                return found
    return None


def reference_table(value: object, *, header: bool) -> Table | None:
    """The row's reference: JSON rows (a list, or its text), or a CSV/Markdown text."""
    if isinstance(value, str):
        try:
            decoded = json.loads(value)
        except ValueError:
            return parse_table(value, header=header)
        value = decoded
    return from_json(value)


class TableMatch(Scorer):
    type_name = "table"
    summary = "Table: a table in the answer (CSV, Markdown or JSON rows) matches the reference cell by cell"
    example = {"type": "table", "reference_field": "table", "row_order": "any", "rel_tol": 0.01}
    fields = (
        SpecField(
            "reference_field",
            (str,),
            default="table",
            help="The column holding the expected table: JSON rows (objects or lists), or CSV/Markdown text.",
        ),
        SpecField(
            "format",
            (str,),
            default="auto",
            choices=FORMATS,
            help="How the answer writes its table; auto tries JSON rows, then Markdown, then CSV.",
        ),
        SpecField(
            "header",
            (bool,),
            default=True,
            help="CSV and Markdown tables start with a header row (JSON objects always name their columns).",
        ),
        SpecField(
            "columns",
            (str,),
            default="name",
            choices=COLUMN_MODES,
            help="Match columns by header name (case and spaces ignored) or by position.",
        ),
        SpecField(
            "row_order",
            (str,),
            default="strict",
            choices=ROW_ORDERS,
            help="strict: row i against row i; any: each reference row against the best unused answer row.",
        ),
        SpecField("abs_tol", (int, float), default=0, help="Numbers within this absolute difference match."),
        SpecField(
            "rel_tol", (int, float), default=1e-9, help="Numbers within this share of the reference match."
        ),
        SpecField("case_sensitive", (bool,), default=False, help="Compare text cells with case."),
    )

    @classmethod
    def normalise_spec(cls, spec: dict) -> dict:
        clean = super().normalise_spec(spec)
        for name in ("abs_tol", "rel_tol"):
            if not 0 <= clean[name] < math.inf:
                raise SpecError(name, "must be 0 or more")
        return clean

    def _score(self, row: dict, completion: str) -> ScoreResult:
        field = self.spec["reference_field"]
        reference = reference_table(row.get(field), header=self.spec["header"]) if row.get(field) else None
        if reference is None:
            return ScoreResult(0.0, _parts(0, 0), f"row's {field!r} holds no table to compare with")
        answer = parse_table(completion, how=self.spec["format"], header=self.spec["header"])
        if answer is None:
            return ScoreResult(
                0.0, _parts(0, _count(reference)), f"no table found in the answer ({self.spec['format']})"
            )
        if sum(len(r) for r in answer[1]) > MAX_CELLS:
            return ScoreResult(
                0.0, _parts(0, _count(reference)), f"the answer's table is past {MAX_CELLS:,} cells"
            )
        columns, missing = self._columns(reference[0], answer[0])
        ref_rows, got_rows = reference[1], answer[1]
        width = max((len(r) for r in ref_rows), default=0) if reference[0] is None else len(reference[0])
        pairs = self._pairs(ref_rows, got_rows, columns)
        matched = sum(self._matches(ref, got, columns) for ref, got in pairs)
        extra = max(0, len(got_rows) - len(ref_rows))
        total = (len(ref_rows) + extra) * width
        score = matched / total if total else 0.0
        reason = f"{matched}/{total} cells match"
        if extra:
            reason += f"; {extra} row{'s' if extra > 1 else ''} more than the reference's {len(ref_rows)}"
        elif len(got_rows) < len(ref_rows):
            reason += f"; {len(ref_rows) - len(got_rows)} of the reference's {len(ref_rows)} rows missing"
        if missing:
            reason += f"; columns missing: {shorten(', '.join(missing), 80)}"
        return ScoreResult(score, _parts(matched, total), reason)

    def _columns(
        self, ref_header: list[str] | None, got_header: list[str] | None
    ) -> tuple[list[int | None], list[str]]:
        """For each reference column, the answer's column index (None: absent), and the missing names."""
        width = len(ref_header) if ref_header is not None else 0
        if self.spec["columns"] == "position" or ref_header is None or got_header is None:
            return list(range(width)) if ref_header is not None else [], []
        names = [_name(h) for h in got_header]
        found: list[int | None] = []
        missing = []
        for name in ref_header:
            key = _name(name)
            found.append(names.index(key) if key in names else None)
            if key not in names:
                missing.append(name)
        return found, missing

    def _pairs(self, ref_rows: list[list[str]], got_rows: list[list[str]], columns: list[int | None]):
        if self.spec["row_order"] == "strict":
            return list(zip(ref_rows, got_rows, strict=False))
        free = list(range(len(got_rows)))
        pairs = []
        for ref in ref_rows:  # greedy: each reference row takes the answer row it matches best
            if not free:
                break
            best = max(free, key=lambda i: self._matches(ref, got_rows[i], columns))
            free.remove(best)
            pairs.append((ref, got_rows[best]))
        return pairs

    def _matches(self, ref: list[str], got: list[str], columns: list[int | None]) -> int:
        positions = columns or list(range(len(ref)))
        count = 0
        for ref_index, got_index in enumerate(positions):
            if ref_index >= len(ref) or got_index is None or got_index >= len(got):
                continue
            count += self._same(ref[ref_index], got[got_index])
        return count

    def _same(self, want: str, got: str) -> bool:
        want, got = want.strip(), got.strip()
        if _NUMBERISH.match(want) and _NUMBERISH.match(got):
            a, b = parse_number(want), parse_number(got)
            if a is not None and b is not None:
                return a == b or math.isclose(
                    b, a, rel_tol=self.spec["rel_tol"], abs_tol=self.spec["abs_tol"]
                )
        if not self.spec["case_sensitive"]:
            want, got = want.casefold(), got.casefold()
        return " ".join(want.split()) == " ".join(got.split())


def _name(header: str) -> str:
    return " ".join(str(header).casefold().replace("_", " ").split())


def _count(table: Table) -> int:
    header, rows = table
    width = len(header) if header is not None else max((len(r) for r in rows), default=0)
    return len(rows) * width


def _parts(matched: int, total: int) -> dict[str, float]:
    return {"cells_matched": float(matched), "cells_total": float(total)}
