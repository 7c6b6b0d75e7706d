"""spreadsheet: the completion gives formulas for cells of the row's fixture sheet; LibreOffice evaluates them in
a sandbox (profile spreadsheet), beside the reference's formulas on the same sheet, and the computed values are
compared here, cell by cell (numbers within a tolerance), scoring the share of target cells right.

The row: `sheet` (the fixture: {"A1": 3, "B1": "north", ...}, numbers and texts), `targets` (the cells the
answer fills, e.g. ["C1", "C2"]) and `formulas` (the reference's formula for each target, {"C1": "=A1*B1"}).
The answer: one `C1: =A1*B1` (or `C1 = ...`) line per target, or a JSON object of them, fenced or not.

A cell counts as right when it computes the reference's value on the sheet and on a copy whose numbers are
changed (x -> 2x + 3), so an answer that types in the values it was shown (`=4`) instead of computing them
scores nothing for those cells.

Formulas are Excel's A1 syntax, checked here before anything runs: cell references and ranges on the one sheet,
numbers, quoted texts, operators and the functions of FUNCTIONS only. Nothing else can be written, so a formula
cannot reach another workbook (a neighbour's answer or the reference are files of the same run), a file, the
network or a macro, and INDIRECT, which builds a reference out of text, is not among the functions. Each
workbook is a flat ODF file that LibreOffice converts to CSV headless; what it computed comes back as text.
"""

from __future__ import annotations

import csv
import io
import json
import math
import re
import secrets
from xml.sax.saxutils import escape, quoteattr

from gpu_jobs.rewards.base import Scorer, ScoreResult, SpecError, SpecField, shorten
from gpu_jobs.rewards.sandboxed import run_or_outage
from sandboxes.client import SandboxClient
from sandboxes.types import Limits, RunRequest, RunResult, Status

CHUNK = 16  # samples per sandbox run: LibreOffice starts once (about 2.5 s here) for all their workbooks
MAX_ROWS, MAX_COLUMNS = 200, 26  # A..Z
MAX_FORMULA_CHARS = 500
REPORT = "ANNEAL_SHEETS "
FUNCTIONS = frozenset(
    "ABS AND AVERAGE AVERAGEIF AVERAGEIFS CEILING CHOOSE CONCATENATE COUNT COUNTA COUNTBLANK COUNTIF COUNTIFS "
    "EXACT FALSE FIND FLOOR HLOOKUP IF IFERROR INDEX INT ISBLANK ISNUMBER ISTEXT LARGE LEFT LEN LOWER MATCH MAX "
    "MEDIAN MID MIN MOD NOT OR POWER PRODUCT PROPER RANK REPT RIGHT ROUND ROUNDDOWN ROUNDUP SIGN SMALL SQRT "
    "SUBSTITUTE SUM SUMIF SUMIFS SUMPRODUCT TRIM TRUE TRUNC UPPER VALUE VLOOKUP XOR".split()
)
_CELL = re.compile(r"^([A-Z])([1-9][0-9]{0,2})$")
_TOKEN = re.compile(
    r"""\s+|(?P<string>"(?:[^"]|"")*")|(?P<range>\$?[A-Z]\$?[0-9]{1,3}(?::\$?[A-Z]\$?[0-9]{1,3})?)(?![A-Za-z0-9_(])"""
    r"""|(?P<function>[A-Z][A-Z0-9.]*)\s*\(|(?P<number>[0-9]+(?:\.[0-9]+)?(?:[eE][-+]?[0-9]+)?%?)"""
    r"""|(?P<boolean>TRUE|FALSE)(?![A-Z0-9(])|(?P<operator><=|>=|<>|[-+*/^&=<>(),;:%])"""
)
_ANSWER_LINE = re.compile(r"^\s*\$?([A-Za-z])\$?([0-9]{1,3})\s*[:=]\s*(=.+?)\s*$")
_FENCED = re.compile(r"```[A-Za-z]*[ \t]*\n(.*?)(?:```|\Z)", re.DOTALL)
NAMESPACES = (
    'xmlns:office="urn:oasis:names:tc:opendocument:xmlns:office:1.0" '
    'xmlns:table="urn:oasis:names:tc:opendocument:xmlns:table:1.0" '
    'xmlns:text="urn:oasis:names:tc:opendocument:xmlns:text:1.0" '
    'xmlns:msoxl="http://schemas.microsoft.com/office/excel/formula"'
)

# Runs in the sandbox: {"nonce", "books": [flat ODF text]} on stdin; each book converted to CSV by one soffice
# run; one line REPORT + {"nonce", "csv": [text | None], "error": str | None}.
PROGRAM = r"""
import json, os, subprocess, sys
job = json.loads(sys.stdin.read())
os.makedirs("books"); os.makedirs("out")
names = []
for index, book in enumerate(job["books"]):
    names.append(f"books/b{index}.fods")
    with open(names[-1], "w", encoding="utf-8") as f:
        f.write(book)
error = None
try:
    done = subprocess.run(
        ["soffice", "--headless", "--norestore", "--nolockcheck", "--convert-to", "csv", "--outdir", "out", *names],
        capture_output=True, timeout=job["timeout_s"], env={"PATH": "/usr/bin:/bin", "HOME": os.getcwd()},
    )
    if done.returncode != 0:
        error = (done.stderr.decode(errors="replace").strip().splitlines() or ["soffice failed"])[-1][:300]
except subprocess.TimeoutExpired:
    error = "LibreOffice ran past its time limit"
texts = []
for index in range(len(names)):
    path = f"out/b{index}.csv"
    texts.append(open(path, encoding="utf-8", errors="replace").read() if os.path.exists(path) else None)
print("ANNEAL_SHEETS " + json.dumps({"nonce": job["nonce"], "csv": texts, "error": error}))
"""


class FormulaError(ValueError):
    pass


def check_formula(formula: str) -> str:
    """`formula` ("=..."), its cell references upper-cased, if only what FUNCTIONS allows is in it; else
    FormulaError saying what is not."""
    if not isinstance(formula, str) or not formula.startswith("="):
        raise FormulaError("a formula starts with =")
    if len(formula) > MAX_FORMULA_CHARS:
        raise FormulaError(f"a formula is at most {MAX_FORMULA_CHARS} characters")
    body, position, out = _upper_outside_strings(formula[1:]), 0, []
    while position < len(body):
        match = _TOKEN.match(body, position)
        if match is None or match.end() == position:
            raise FormulaError(f"cannot read {body[position : position + 20]!r}")
        if match.group("function") and match.group("function") not in FUNCTIONS:
            raise FormulaError(f"the function {match.group('function')} is not allowed")
        if match.group("range"):
            for cell in match.group("range").replace("$", "").split(":"):
                found = _CELL.match(cell)  # None for row 0 (A0), which the range pattern lets through
                if found is None or int(found.group(2)) > MAX_ROWS:
                    raise FormulaError(f"{cell} is outside the sheet")
        out.append(match.group(0))
        position = match.end()
    return "=" + "".join(out)


def _upper_outside_strings(text: str) -> str:
    parts = re.split(r'("(?:[^"]|"")*")', text)
    return "".join(part if part.startswith('"') else part.upper() for part in parts)


def answer_formulas(completion: str) -> dict[str, str]:
    """The answer's formulas by cell: `C1: =...` lines, or a JSON object {"C1": "=..."}, fenced or not."""
    texts = [*_FENCED.findall(completion), completion]
    for text in texts:
        stripped = text.strip()
        if stripped.startswith("{"):
            try:
                value = json.loads(stripped)
            except ValueError:
                value = None
            if isinstance(value, dict):
                return {str(k).upper().replace("$", ""): v for k, v in value.items() if isinstance(v, str)}
        found: dict[str, str] = {}
        for line in text.splitlines():
            match = _ANSWER_LINE.match(line)
            if match:
                found.setdefault(f"{match.group(1).upper()}{match.group(2)}", match.group(3))
        if found:
            return found
    return {}


def workbook(sheet: dict, formulas: dict[str, str]) -> str:
    """A flat ODF spreadsheet of `sheet`'s values with `formulas` (checked) in their cells."""
    cells: dict[tuple[int, int], str] = {}
    for name, value in sheet.items():
        row, column = _position(name)
        if isinstance(value, bool) or not isinstance(value, (int, float, str)):
            raise FormulaError(f"cell {name} of the sheet holds {type(value).__name__}, not a number or text")
        if isinstance(value, str):
            cells[(row, column)] = (
                f'<table:table-cell office:value-type="string"><text:p>{escape(value)}</text:p></table:table-cell>'
            )
        else:
            cells[(row, column)] = f'<table:table-cell office:value-type="float" office:value="{value!r}"/>'
    for name, formula in formulas.items():
        cells[_position(name)] = f"<table:table-cell table:formula={quoteattr('msoxl:' + formula)}/>"
    rows = []
    height = max([row for row, _ in cells] or [0]) + 1
    width = max([column for _, column in cells] or [0]) + 1
    for row in range(height):
        line = "".join(cells.get((row, column), "<table:table-cell/>") for column in range(width))
        rows.append(f"<table:table-row>{line}</table:table-row>")
    return (
        f'<?xml version="1.0" encoding="UTF-8"?><office:document {NAMESPACES} office:version="1.2" '
        'office:mimetype="application/vnd.oasis.opendocument.spreadsheet"><office:body><office:spreadsheet>'
        f'<table:table table:name="Sheet1">{"".join(rows)}</table:table></office:spreadsheet></office:body>'
        "</office:document>"
    )


def changed(sheet: dict) -> dict:
    """`sheet` with every number x made 2x + 3 (texts kept): formulas that compute follow, typed-in values do not."""
    return {
        name: value * 2 + 3 if isinstance(value, (int, float)) and not isinstance(value, bool) else value
        for name, value in sheet.items()
    }


def _position(name: str) -> tuple[int, int]:
    match = _CELL.match(str(name).upper().replace("$", ""))
    if not match or int(match.group(2)) > MAX_ROWS:
        raise FormulaError(f"{name!r} is not a cell from A1 to Z{MAX_ROWS}")
    return int(match.group(2)) - 1, ord(match.group(1)) - ord("A")


def computed(text: str, name: str) -> str:
    row, column = _position(name)
    lines = list(csv.reader(io.StringIO(text)))
    if row >= len(lines) or column >= len(lines[row]):
        return ""
    return lines[row][column]


def same_value(got: str, want: str, tolerance: float) -> bool:
    if got == want:
        return True
    try:
        a, b = float(got), float(want)
    except ValueError:
        return False
    return math.isfinite(a) and math.isclose(a, b, rel_tol=tolerance, abs_tol=tolerance)


class Spreadsheet(Scorer):
    type_name = "spreadsheet"
    slow = True
    summary = (
        "Spreadsheet: the answer's formulas evaluated by LibreOffice in a sandbox, against the reference's"
    )
    example = {
        "type": "spreadsheet",
        "sheet_field": "sheet",
        "targets_field": "targets",
        "reference_field": "formulas",
    }
    fields = (
        SpecField(
            "sheet_field", (str,), default="sheet", help='The column holding the fixture: {"A1": 3, ...}.'
        ),
        SpecField(
            "targets_field", (str,), default="targets", help='The column listing the cells to fill: ["C1"].'
        ),
        SpecField(
            "reference_field",
            (str,),
            default="formulas",
            help='The column of the reference formulas: {"C1": "=A1*2"}.',
        ),
        SpecField(
            "tolerance", (int, float), default=1e-6, help="Relative or absolute difference for numbers."
        ),
        SpecField(
            "timeout_s", (int, float), default=60, help="For LibreOffice to evaluate one run's workbooks."
        ),
    )

    def __init__(self, spec: dict, *, sandbox: SandboxClient | None = None) -> None:
        super().__init__(spec)
        self._sandbox = sandbox

    @classmethod
    def normalise_spec(cls, spec: dict) -> dict:
        clean = super().normalise_spec(spec)
        if not 0 <= clean["tolerance"] < 1:
            raise SpecError("tolerance", "must be at least 0 and less than 1")
        if not 5 <= clean["timeout_s"] <= 300:
            raise SpecError("timeout_s", "must be between 5 and 300 seconds")
        return clean

    def score(self, row: dict, completion: str) -> ScoreResult:
        return self.score_batch([row], [completion])[0]

    def score_batch(self, rows: list[dict], completions: list[str]) -> list[ScoreResult]:
        if len(rows) != len(completions):
            raise ValueError(f"{len(rows)} rows but {len(completions)} completions")
        results: list[ScoreResult | None] = [None] * len(rows)
        todo: list[
            tuple[int, list[str], list[str]]
        ] = []  # (index, targets, 4 books: answer and reference, x2)
        for index, (row, completion) in enumerate(zip(rows, completions, strict=True)):
            prepared = self._prepare(row, completion)
            if isinstance(prepared, ScoreResult):
                results[index] = prepared
            else:
                todo.append((index, *prepared))
        chunks = [todo[start : start + CHUNK] for start in range(0, len(todo), CHUNK)]
        nonces = [secrets.token_hex(16) for _ in chunks]
        requests = [self._request(chunk, nonce) for chunk, nonce in zip(chunks, nonces, strict=True)]
        for chunk, nonce, run in zip(chunks, nonces, run_or_outage(self._client(), requests), strict=True):
            texts, problem = _report(run, nonce, 4 * len(chunk))
            for position, (index, targets, _) in enumerate(chunk):
                four = texts[4 * position : 4 * position + 4] if texts else [None] * 4
                if any(text is None for text in four):
                    results[index] = _zero(f"the sheets were not evaluated: {problem}", total=len(targets))
                else:
                    results[index] = self._compare(targets, *four)
        return [result for result in results if result is not None]  # every index is filled above

    def _prepare(self, row: dict, completion: str) -> ScoreResult | tuple[list[str], list[str]]:
        spec = self.spec
        sheet, targets, reference = (row.get(spec[k]) if isinstance(row, dict) else None
                                     for k in ("sheet_field", "targets_field", "reference_field"))  # fmt: skip
        if not isinstance(sheet, dict) or not isinstance(targets, list) or not targets:
            return _zero(
                f"row has no {spec['sheet_field']!r} sheet or {spec['targets_field']!r} cells", total=0
            )
        targets = [str(t).upper().replace("$", "") for t in targets]
        if not isinstance(reference, dict) or any(
            t not in {str(k).upper() for k in reference} for t in targets
        ):
            return _zero(
                f"row's {spec['reference_field']!r} has no formula for every target cell", total=len(targets)
            )
        reference = {str(k).upper().replace("$", ""): v for k, v in reference.items()}
        try:
            reference_formulas = {t: check_formula(reference[t]) for t in targets}
            books = [workbook(sheet, reference_formulas), workbook(changed(sheet), reference_formulas)]
        except FormulaError as exc:
            return _zero(f"row's reference: {exc}", total=len(targets))
        given = answer_formulas(completion if isinstance(completion, str) else "")
        missing = [t for t in targets if t not in given]
        if len(missing) == len(targets):
            return _zero(f"no formula for {', '.join(targets)} in the answer", total=len(targets))
        try:
            formulas = {t: check_formula(given[t]) for t in targets if t in given}
        except FormulaError as exc:
            return _zero(f"the answer's formulas: {exc}", total=len(targets))
        if any(t in {str(k).upper() for k in sheet} for t in targets):
            return _zero("row's sheet already holds a target cell", total=len(targets))
        answer_books = [workbook(sheet, formulas), workbook(changed(sheet), formulas)]
        return targets, [answer_books[0], books[0], answer_books[1], books[1]]

    def _client(self) -> SandboxClient:
        if self._sandbox is None:
            self._sandbox = SandboxClient()
        return self._sandbox

    def _request(self, chunk: list, nonce: str) -> RunRequest:
        books = [book for _, _, four in chunk for book in four]
        job = {"nonce": nonce, "books": books, "timeout_s": float(self.spec["timeout_s"])}
        limit = float(self.spec["timeout_s"]) + 5
        return RunRequest(
            language="python",
            code=PROGRAM,
            stdin=json.dumps(job),
            limits=Limits(wall_s=limit, cpu_s=limit, memory_mb=2048, pids=128, output_bytes=4 << 20),
            profile="spreadsheet",
        )

    def _compare(
        self, targets: list[str], answer: str, reference: str, answer_changed: str, reference_changed: str
    ) -> ScoreResult:
        """Cells right on the sheet and on its changed copy; the first one wrong, said."""
        right, first_wrong = 0, ""
        tolerance = self.spec["tolerance"]
        for target in targets:
            got, want = computed(answer, target), computed(reference, target)
            if not same_value(got, want, tolerance):
                wrong = (
                    f"{target} computed {shorten(got or '(nothing)', 40)!r}, expected {shorten(want, 40)!r}"
                )
            elif not same_value(
                computed(answer_changed, target), computed(reference_changed, target), tolerance
            ):
                wrong = f"{target} is right on the sheet but not once its numbers change (a typed-in value?)"
            else:
                right += 1
                continue
            first_wrong = first_wrong or wrong
        parts = {"cells_right": float(right), "cells_total": float(len(targets))}
        if right == len(targets):
            return ScoreResult(1.0, parts, f"all {len(targets)} cells right")
        return ScoreResult(right / len(targets), parts, f"{right}/{len(targets)} cells right; {first_wrong}")


def _report(run: RunResult, nonce: str, count: int) -> tuple[list | None, str]:
    for line in reversed(run.stdout.splitlines()):
        if line.startswith(REPORT):
            try:
                report = json.loads(line[len(REPORT) :])
            except ValueError:
                break
            texts = report.get("csv") if isinstance(report, dict) and report.get("nonce") == nonce else None
            if isinstance(texts, list) and len(texts) == count:
                return texts, str(report.get("error") or "LibreOffice wrote no result")
            break
    tail = shorten(run.stderr.strip().splitlines()[-1], 200) if run.stderr.strip() else str(run.status)
    return None, ("sandbox error: " if run.status == Status.SANDBOX_ERROR else "") + tail


def _zero(reason: str, *, total: int) -> ScoreResult:
    return ScoreResult(0.0, {"cells_right": 0.0, "cells_total": float(total)}, reason)
