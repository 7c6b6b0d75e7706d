"""sql_result: the completion's SQL query, run against the row's fixture database, returns the reference
query's result set (in order or as a multiset, floats within a tolerance).

Both queries run in a sandbox (SQLite, each on a fresh in-memory copy of the fixture, so the model's query
cannot change what the reference sees), under a step limit and the sandbox's time and memory limits; the model's
query may only read (an authorizer refuses every write, ATTACH, PRAGMA and function outside SQLite's
built-ins). The sandbox sends back the two result sets as plain JSON; the comparison, and so the verdict, is
made here, outside it.
"""

from __future__ import annotations

import json
import math
import re
import secrets

from gpu_jobs.rewards.base import Scorer, ScoreResult, SpecError, SpecField, shorten
from gpu_jobs.rewards.sandboxed import run_or_outage
from sandboxes.client import SandboxClient
from sandboxes.types import Limits, RunRequest, RunResult, Status

MAX_ROWS = 1000  # rows kept of each result set; a query returning more is compared on these and says so
MAX_TIMEOUT_S = 30.0
CHUNK = 8  # samples per sandbox run
# Each result set comes back in at most this many bytes of JSON (else it is an error of its sample alone), so
# the run's report always fits the sandbox's output limit: one sample cannot cost the others their verdict.
MAX_RESULT_BYTES = 200_000
OUTPUT_BYTES = CHUNK * 2 * MAX_RESULT_BYTES + 65_536
# A text or blob longer than this crosses as its SHA-256 (equal values stay equal); SQLite refuses to build
# one past SQLITE_LENGTH, and each connection's heap is capped, so a query cannot take the sandbox's memory.
MAX_CELL_CHARS = 200
SQLITE_LENGTH = 1_000_000
SQLITE_HEAP_BYTES = 64 << 20
REPORT = "ANNEAL_SQL "
_FENCED_SQL = re.compile(r"```(?:sql|sqlite)?[ \t]*\n(.*?)(?:```|\Z)", re.DOTALL | re.IGNORECASE)

# Runs in the sandbox (standard library only): {"nonce", "max_rows", "deadline_s", "samples": [{"schema",
# "reference", "query"}]} on stdin; one line REPORT + {"nonce", "results": [{"reference": set, "answer": set}]}
# with set = {"columns", "rows", "truncated", "error"}.
PROGRAM = (
    r'''
import json, sqlite3, sys, time
job = json.loads(sys.stdin.read())
READS = {sqlite3.SQLITE_SELECT, sqlite3.SQLITE_READ, sqlite3.SQLITE_FUNCTION, getattr(sqlite3, "SQLITE_RECURSIVE", 33)}

import hashlib

def plain(value):
    if isinstance(value, bytes):
        value = "x'" + value.hex() + "'"
    if isinstance(value, str) and len(value) > job["max_cell_chars"]:
        return "sha256:" + hashlib.sha256(value.encode("utf-8", "surrogatepass")).hexdigest()
    if isinstance(value, float) and value != value:
        return None
    return value

def connect():
    db = sqlite3.connect(":memory:")
    db.setlimit(sqlite3.SQLITE_LIMIT_LENGTH, job["sqlite_length"])
    db.execute("PRAGMA hard_heap_limit = %d" % job["sqlite_heap_bytes"])
    return db

def run(fixture, sql, read_only, deadline):
    db = connect()
    fixture.backup(db)
    if read_only:
        db.set_authorizer(lambda action, *rest: sqlite3.SQLITE_OK if action in READS else sqlite3.SQLITE_DENY)
    db.set_progress_handler(lambda: 1 if time.monotonic() > deadline else 0, 1000)
    try:
        cursor = db.execute(sql)
        rows = cursor.fetchmany(job["max_rows"] + 1)
        columns = [d[0] for d in cursor.description or []]
    except Exception as exc:
        message = str(exc)
        if message == "interrupted":
            message = "ran past its time limit"
        return {"columns": [], "rows": [], "truncated": False, "error": type(exc).__name__ + ": " + message}
    finally:
        db.set_progress_handler(None, 0)
    result = {"columns": [plain(c) for c in columns], "rows": [[plain(v) for v in row] for row in rows[: job["max_rows"]]],
              "truncated": len(rows) > job["max_rows"], "error": None}
    if len(json.dumps(result)) > job["max_result_bytes"]:
        message = "its result is over %d bytes of JSON" % job["max_result_bytes"]
        return {"columns": [], "rows": [], "truncated": False, "error": "TooLarge: " + message}
    return result

results = []
for sample in job["samples"]:
    deadline = time.monotonic() + job["deadline_s"]
    fixture = connect()
    try:
        fixture.executescript(sample["schema"])
    except Exception as exc:
        error = {"columns": [], "rows": [], "truncated": False, "error": "fixture: " + type(exc).__name__ + ": " + str(exc)}
        results.append({"reference": error, "answer": error})
        continue
    results.append({"reference": run(fixture, sample["reference"], False, deadline),
                    "answer": run(fixture, sample["query"], True, deadline)})
sys.stdout.write("'''
    + REPORT
    + r"""" + json.dumps({"nonce": job["nonce"], "results": results}) + "\n")
"""
)


# The PostgreSQL engine (profile sql-postgres), in the sandbox: a server of its own started there (initdb in
# the run's tmpfs, a unix socket, no TCP), each sample a fresh database loaded with its fixture by the owner;
# both queries run as a role that may only SELECT the fixture's tables, in a read-only transaction, cancelled
# from the driver at the deadline whatever the query SET. Same stdin and report as PROGRAM.
PG_PROGRAM = r"""
import datetime, decimal, glob, hashlib, json, os, subprocess, sys, threading, time
sys.path.append("/usr/lib/python3/dist-packages")
import psycopg2
job = json.loads(sys.stdin.read())
BIN = sorted(glob.glob("/usr/lib/postgresql/*/bin"))[-1]
DATA, SOCKET = "/tmp/pg/data", "/tmp/pg/socket"

def failed(message):
    return {"columns": [], "rows": [], "truncated": False, "error": message}

def plain(value):
    if isinstance(value, decimal.Decimal):
        value = int(value) if value == value.to_integral_value() and abs(value) < 2 ** 53 else float(value)
    elif isinstance(value, (datetime.date, datetime.time, datetime.timedelta)):
        value = str(value)
    elif isinstance(value, (bytes, memoryview)):
        value = "x'" + bytes(value).hex() + "'"
    elif value is not None and not isinstance(value, (bool, int, float, str)):
        value = str(value)
    if isinstance(value, str) and len(value) > job["max_cell_chars"]:
        return "sha256:" + hashlib.sha256(value.encode("utf-8", "surrogatepass")).hexdigest()
    if isinstance(value, float) and value != value:
        return None
    return value

def run(database, sql, deadline):
    try:
        conn = psycopg2.connect(host=SOCKET, dbname=database, user="reader",
                                options="-c default_transaction_read_only=on")
    except psycopg2.Error as exc:
        return failed("could not connect: " + str(exc).strip()[:200])
    timer = threading.Timer(max(deadline - time.monotonic(), 0.01), conn.cancel)
    timer.start()
    try:
        cursor = conn.cursor()
        cursor.execute(sql)
        if cursor.description is None:
            return failed("ProgrammingError: the statement returns no rows")
        rows = cursor.fetchmany(job["max_rows"] + 1)
        columns = [d[0] for d in cursor.description]
    except psycopg2.extensions.QueryCanceledError:
        return failed("OperationalError: ran past its time limit")
    except psycopg2.Error as exc:
        return failed(type(exc).__name__ + ": " + str(exc).strip().splitlines()[0][:300])
    finally:
        timer.cancel()
        conn.close()
    result = {"columns": [plain(c) for c in columns], "rows": [[plain(v) for v in row] for row in rows[: job["max_rows"]]],
              "truncated": len(rows) > job["max_rows"], "error": None}
    if len(json.dumps(result)) > job["max_result_bytes"]:
        return failed("TooLarge: its result is over %d bytes of JSON" % job["max_result_bytes"])
    return result

os.makedirs(SOCKET)
made = subprocess.run([BIN + "/initdb", "-D", DATA, "-U", "owner", "--auth=trust", "-E", "UTF8", "--locale=C",
                       "--no-sync", "--no-instructions", "--wal-segsize=1"], capture_output=True, text=True)
server = subprocess.Popen([BIN + "/postgres", "-D", DATA, "-k", SOCKET, "-c", "listen_addresses=", "-c", "fsync=off",
                           "-c", "shared_buffers=8MB", "-c", "max_connections=8", "-c", "dynamic_shared_memory_type=mmap",
                           "-c", "max_wal_size=32MB"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
owner = None
for _ in range(500):
    try:
        owner = psycopg2.connect(host=SOCKET, dbname="postgres", user="owner")
        break
    except psycopg2.OperationalError:
        time.sleep(0.02)
results = []
if owner is None:
    error = failed("fixture: the PostgreSQL server did not start: " + (made.stderr.strip()[-200:] or "no message"))
    results = [{"reference": error, "answer": error} for _ in job["samples"]]
else:
    owner.autocommit = True
    owner.cursor().execute("CREATE ROLE reader LOGIN")
for number, sample in enumerate(job["samples"] if owner is not None else []):
    database = "sample%d" % number
    deadline = time.monotonic() + job["deadline_s"]
    try:
        owner.cursor().execute("CREATE DATABASE %s" % database)
        fixture = psycopg2.connect(host=SOCKET, dbname=database, user="owner")
        fixture.autocommit = True
        cursor = fixture.cursor()
        cursor.execute(sample["schema"])
        cursor.execute("REVOKE ALL ON DATABASE %s FROM PUBLIC; GRANT CONNECT ON DATABASE %s TO reader; "
                       "GRANT USAGE ON SCHEMA public TO reader; GRANT SELECT ON ALL TABLES IN SCHEMA public TO reader"
                       % (database, database))
        fixture.close()
    except psycopg2.Error as exc:
        error = failed("fixture: " + type(exc).__name__ + ": " + str(exc).strip().splitlines()[0][:300])
        results.append({"reference": error, "answer": error})
        continue
    results.append({"reference": run(database, sample["reference"], deadline), "answer": run(database, sample["query"], deadline)})
    try:
        owner.cursor().execute("DROP DATABASE %s WITH (FORCE)" % database)
    except psycopg2.Error:
        pass
server.terminate()
sys.stdout.write("ANNEAL_SQL " + json.dumps({"nonce": job["nonce"], "results": results}) + "\n")
"""
ENGINES = ("sqlite", "postgresql")
PG_START_S = 20.0  # initdb and the server's start, once a run (about 3 s here)


def extract_sql(text: str) -> str:
    """The first ```sql (or bare ```) block of the completion, else all of it; one statement, trimmed."""
    match = _FENCED_SQL.search(text)
    sql = (match.group(1) if match else text).strip()
    return sql[:-1].strip() if sql.endswith(";") else sql


class SqlResult(Scorer):
    type_name = "sql_result"
    slow = True
    summary = (
        "SQL result: the answer's query returns the reference query's rows on the row's fixture database"
    )
    example = {
        "type": "sql_result",
        "schema_field": "schema",
        "reference_field": "answer",
        "order_sensitive": False,
    }
    fields = (
        SpecField(
            "schema_field",
            (str,),
            default="schema",
            help="The column holding the fixture database as SQL (CREATE TABLE and INSERT statements).",
        ),
        SpecField(
            "reference_field", (str,), default="answer", help="The column holding the reference query."
        ),
        SpecField(
            "order_sensitive",
            (bool,),
            default=False,
            help="Rows must come in the reference's order (for queries with ORDER BY); else any order.",
        ),
        SpecField(
            "float_tolerance",
            (int, float),
            default=1e-6,
            help="Relative or absolute difference within which two numbers count as equal.",
        ),
        SpecField("timeout_s", (int, float), default=5, help="For both queries of one sample (max 30)."),
        SpecField(
            "engine",
            (str,),
            default="sqlite",
            choices=ENGINES,
            help="sqlite: in-memory SQLite; postgresql: a PostgreSQL server started in the sandbox for the "
            "run, each sample a fresh database with its fixture (profile sql-postgres).",
        ),
    )

    def __init__(self, spec: dict, *, sandbox: SandboxClient | None = None) -> None:
        super().__init__(spec)
        self._sandbox = sandbox

    @classmethod
    def normalise_spec(cls, spec: dict) -> dict:
        clean = super().normalise_spec(spec)
        if not 0 < clean["timeout_s"] <= MAX_TIMEOUT_S:
            raise SpecError("timeout_s", f"must be more than 0 and at most {MAX_TIMEOUT_S:g} seconds")
        if not 0 <= clean["float_tolerance"] < 1:
            raise SpecError("float_tolerance", "must be at least 0 and less than 1")
        return clean

    def score(self, row: dict, completion: str) -> ScoreResult:
        return self.score_batch([row], [completion])[0]

    def score_batch(self, rows: list[dict], completions: list[str]) -> list[ScoreResult]:
        results: list[ScoreResult | None] = [None] * len(rows)
        samples: list[tuple[int, dict]] = []
        for index, (row, completion) in enumerate(zip(rows, completions, strict=True)):
            schema, reference = row.get(self.spec["schema_field"]), row.get(self.spec["reference_field"])
            query = extract_sql(completion)
            if not isinstance(schema, str) or not schema.strip():
                results[index] = _zero(
                    f"row has no {self.spec['schema_field']!r} fixture (SQL) to run against"
                )
            elif not isinstance(reference, str) or not reference.strip():
                results[index] = _zero(f"row has no {self.spec['reference_field']!r} reference query")
            elif not query:
                results[index] = _zero("no SQL query in the answer")
            else:
                samples.append((index, {"schema": schema, "reference": reference, "query": query}))
        chunks = [samples[start : start + CHUNK] for start in range(0, len(samples), CHUNK)]
        nonces = [secrets.token_hex(16) for _ in chunks]
        if chunks:
            requests = [
                self._request([s for _, s in chunk], nonce)
                for chunk, nonce in zip(chunks, nonces, strict=True)
            ]
            runs = run_or_outage(self._client(), requests)
            for chunk, nonce, run in zip(chunks, nonces, runs, strict=True):
                entries = _report(run, nonce, len(chunk))
                for (index, _), entry in zip(chunk, entries, strict=True):
                    results[index] = self._verdict(entry, run)
        return [result for result in results if result is not None]

    def _client(self) -> SandboxClient:
        if self._sandbox is None:
            self._sandbox = SandboxClient()
        return self._sandbox

    def _request(self, samples: list[dict], nonce: str) -> RunRequest:
        timeout = float(self.spec["timeout_s"])
        job = {
            "nonce": nonce,
            "max_rows": MAX_ROWS,
            "max_result_bytes": MAX_RESULT_BYTES,
            "max_cell_chars": MAX_CELL_CHARS,
            "sqlite_length": SQLITE_LENGTH,
            "sqlite_heap_bytes": SQLITE_HEAP_BYTES,
            "deadline_s": timeout,
            "samples": samples,
        }
        limit = timeout * len(samples) + 2
        if self.spec.get("engine") == "postgresql":
            # The server's data folder and WAL are files of the run's disk; it runs as processes of the run.
            limit += PG_START_S
            limits = Limits(wall_s=limit, cpu_s=limit, output_bytes=OUTPUT_BYTES, memory_mb=1024, tmpfs_mb=128,
                            file_size_mb=32, pids=64)  # fmt: skip
            return RunRequest(
                language="python",
                code=PG_PROGRAM,
                stdin=json.dumps(job),
                limits=limits,
                profile="sql-postgres",
            )
        limits = Limits(wall_s=limit, cpu_s=limit, output_bytes=OUTPUT_BYTES)
        return RunRequest(language="python", code=PROGRAM, stdin=json.dumps(job), limits=limits)

    def _verdict(self, entry: dict | None, run: RunResult) -> ScoreResult:
        if entry is None:
            tail = (
                shorten(run.stderr.strip().splitlines()[-1], 200) if run.stderr.strip() else str(run.status)
            )
            return _zero(f"{'timeout' if run.status == Status.TIMEOUT else 'sandbox error'}: {tail}")
        want, got = entry["reference"], entry["answer"]
        if want.get("error"):
            return _zero(f"the reference query failed: {shorten(str(want['error']), 200)}")
        expected = len(want["rows"])
        if got.get("error"):
            return _zero(f"the query failed: {shorten(str(got['error']), 200)}", expected=expected)
        returned = len(got["rows"])
        parts = {"match": 0.0, "rows_expected": float(expected), "rows_returned": float(returned)}
        if len(got["columns"]) != len(want["columns"]):
            return ScoreResult(
                0.0, parts, f"{len(got['columns'])} columns, the reference has {len(want['columns'])}"
            )
        if got.get("truncated") != want.get("truncated") or returned != expected:
            more = "+" if got.get("truncated") else ""
            return ScoreResult(0.0, parts, f"{returned}{more} rows, the reference has {expected}")
        tolerance = float(self.spec["float_tolerance"])
        if self.spec["order_sensitive"]:
            for number, (a, b) in enumerate(zip(want["rows"], got["rows"], strict=True), start=1):
                if not _same_row(a, b, tolerance):
                    return ScoreResult(
                        0.0,
                        parts,
                        f"row {number} differs: expected {shorten(str(a), 80)}, got {shorten(str(b), 80)}",
                    )
        else:
            unmatched = _unmatched(want["rows"], got["rows"], tolerance)
            if unmatched is not None:
                return ScoreResult(
                    0.0, parts, f"the reference's row {shorten(str(unmatched), 80)} is not in the result"
                )
        return ScoreResult(
            1.0,
            {**parts, "match": 1.0},
            f"the same {expected} row{'s' if expected != 1 else ''} as the reference",
        )


def _report(run: RunResult, nonce: str, count: int) -> list[dict | None]:
    for line in reversed(run.stdout.splitlines()):
        if not line.startswith(REPORT):
            continue
        try:
            report = json.loads(line[len(REPORT) :])
        except ValueError:
            continue
        results = report.get("results") if isinstance(report, dict) and report.get("nonce") == nonce else None
        if isinstance(results, list) and len(results) == count and all(_well_formed(r) for r in results):
            return results
    return [None] * count


def _well_formed(entry: object) -> bool:
    if not isinstance(entry, dict):
        return False
    for side in ("reference", "answer"):
        value = entry.get(side)
        if (
            not isinstance(value, dict)
            or not isinstance(value.get("rows"), list)
            or not isinstance(value.get("columns"), list)
        ):
            return False
    return True


def _same_cell(a: object, b: object, tolerance: float) -> bool:
    if isinstance(a, bool) or isinstance(b, bool):
        return a == b
    if isinstance(a, int | float) and isinstance(b, int | float):
        return a == b or math.isclose(a, b, rel_tol=tolerance, abs_tol=tolerance)
    return a == b


def _same_row(a: list, b: list, tolerance: float) -> bool:
    return len(a) == len(b) and all(_same_cell(x, y, tolerance) for x, y in zip(a, b, strict=True))


def _unmatched(want: list[list], got: list[list], tolerance: float) -> list | None:
    """The first reference row with no equal row left in ``got`` (each used once), or None."""
    free = list(got)
    for row in want:
        for position, candidate in enumerate(free):
            if _same_row(row, candidate, tolerance):
                del free[position]
                break
        else:
            return row
    return None


def _zero(reason: str, *, expected: int = 0) -> ScoreResult:
    return ScoreResult(0.0, {"match": 0.0, "rows_expected": float(expected), "rows_returned": 0.0}, reason)
