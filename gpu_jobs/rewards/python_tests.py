"""python_tests: run the completion's program in a sandbox, then the row's tests against its namespace."""

from __future__ import annotations

import json
import secrets
from pathlib import Path

from gpu_jobs.rewards.base import Scorer, ScoreResult, SpecError, SpecField, shorten
from gpu_jobs.rewards.extract import extract_python_code
from gpu_jobs.rewards.python_harness import REPORT_PREFIX
from sandboxes.client import SandboxClient
from sandboxes.types import Limits, RunRequest, RunResult, Status

HARNESS_SOURCE = Path(__file__).with_name("python_harness.py").read_text(encoding="utf-8")
SCORING_MODES = ("all_or_nothing", "fraction")
MAX_TIMEOUT_S = 60.0


class PythonTests(Scorer):
    """Spec: exactly one of `tests_field` (default "tests", read from each row) or `tests` (fixed for all).

    A test is Python source (typically asserts) run after the program in the program's namespace; the value
    of the program's last expression statement is bound to `result`. Each sample runs in its own sandbox,
    all of a batch in one `run_many` call; `timeout_s` covers the program and all its tests together.
    """

    type_name = "python_tests"
    summary = "Python tests: run the model's program against tests in a sandbox"
    example = {"type": "python_tests", "tests_field": "tests", "scoring": "fraction", "timeout_s": 5}
    fields = (
        SpecField(
            "tests_field",
            (str,),
            default=None,
            help="The column holding each row's tests (a string or a list of strings); default tests.",
        ),
        SpecField(
            "tests",
            (str, list),
            default=None,
            help="Fixed tests for every row instead; `result` holds the value of the program's last expression.",
        ),
        SpecField(
            "scoring",
            (str,),
            default="all_or_nothing",
            choices=SCORING_MODES,
            help="all_or_nothing: 1 when every test passes; fraction: the share of tests passed.",
        ),
        SpecField(
            "timeout_s",
            (int, float),
            default=5,
            help="For the program and all its tests, per sample (max 60).",
        ),
    )

    def __init__(self, spec: dict, *, sandbox: SandboxClient | None = None) -> None:
        super().__init__(spec)
        self._sandbox = sandbox

    @classmethod
    def normalise_spec(cls, spec: dict) -> dict:
        clean = super().normalise_spec(spec)
        if clean["tests"] is not None and clean["tests_field"] is not None:
            raise SpecError("tests", "give either tests (fixed) or tests_field (per row), not both")
        if clean["tests"] is None and clean["tests_field"] is None:
            clean["tests_field"] = "tests"
        if clean["tests"] is not None:
            tests, problem = _as_test_list(clean["tests"])
            if problem:
                raise SpecError("tests", problem)
            clean["tests"] = tests
        if not 0 < clean["timeout_s"] <= MAX_TIMEOUT_S:
            raise SpecError("timeout_s", f"must be more than 0 and at most {MAX_TIMEOUT_S:g} seconds")
        return clean

    def score(self, row: dict, completion: str) -> ScoreResult:
        return self.score_batch([row], [completion])[0]

    def score_batch(self, rows: list[dict], completions: list[str]) -> list[ScoreResult]:
        if len(rows) != len(completions):
            raise ValueError(f"{len(rows)} rows but {len(completions)} completions")
        results: list[ScoreResult | None] = [None] * len(rows)
        requests: list[RunRequest] = []
        pending: list[tuple[int, str, int]] = []  # (index, nonce, number of tests) per request
        for index, (row, completion) in enumerate(zip(rows, completions, strict=True)):
            tests, problem = self._tests_for(row)
            if problem:
                results[index] = _zero(problem, total=0)
                continue
            nonce = secrets.token_hex(16)
            requests.append(self._request(extract_python_code(completion), tests, nonce))
            pending.append((index, nonce, len(tests)))
        if requests:
            try:
                runs = self._client().run_many(requests)
            except Exception as exc:  # a broker or host outage must not stop training: score 0 and say why
                runs = [RunResult(Status.SANDBOX_ERROR, None, "", f"sandbox unavailable: {exc}", 0.0)] * len(
                    requests
                )
            for (index, nonce, total), run in zip(pending, runs, strict=True):
                results[index] = self._from_run(run, nonce=nonce, total=total)
        return results

    def _client(self) -> SandboxClient:
        if self._sandbox is None:
            self._sandbox = SandboxClient()
        return self._sandbox

    def _tests_for(self, row: dict) -> tuple[list[str], str]:
        if self.spec["tests"] is not None:
            return self.spec["tests"], ""
        field = self.spec["tests_field"]
        if not isinstance(row, dict) or row.get(field) is None:
            return [], f"row has no {field!r} value with tests"
        tests, problem = _as_test_list(row[field])
        return tests, f"row's {field!r}: {problem}" if problem else ""

    def _request(self, program: str, tests: list[str], nonce: str) -> RunRequest:
        timeout = float(self.spec["timeout_s"])
        return RunRequest(
            language="python",
            code=HARNESS_SOURCE,
            stdin=nonce + "\n",
            files={"payload.json": json.dumps({"program": program, "tests": tests})},
            limits=Limits(wall_s=timeout, cpu_s=timeout),
        )

    def _from_run(self, run: RunResult, *, nonce: str, total: int) -> ScoreResult:
        result = self._verdict(run, nonce=nonce, total=total)
        result.output = sandbox_output(run)
        return result

    def _verdict(self, run: RunResult, *, nonce: str, total: int) -> ScoreResult:
        report = _find_report(run.stdout, nonce)
        if report is None:
            return _zero(_why_no_report(run), total=total)
        passed = sum(1 for ok in report["passed"] if ok is True)
        parts = {"tests_passed": float(passed), "tests_total": float(total)}
        if self.spec["scoring"] == "fraction":
            score = passed / total
        else:
            score = 1.0 if passed == total else 0.0
        if report.get("program_error"):
            reason = f"the program raised {shorten(str(report['program_error']))}"
        elif passed == total:
            reason = f"all {total} tests passed" if total > 1 else "the test passed"
        else:
            first = next(i for i, ok in enumerate(report["passed"]) if ok is not True)
            reason = (
                f"{passed}/{total} tests passed; test {first + 1}: {shorten(str(report['errors'][first]))}"
            )
        return ScoreResult(score, parts, reason)


OUTPUT_SHOWN_CHARS = 2000


def sandbox_output(run: RunResult) -> dict[str, str]:
    """What a person reading a rollout should see of a run: its status and the program's own output (the
    harness's report line left out), each cut to OUTPUT_SHOWN_CHARS."""
    stdout = "\n".join(line for line in run.stdout.splitlines() if not line.startswith(REPORT_PREFIX))
    return {
        "status": str(run.status),
        "stdout": stdout[-OUTPUT_SHOWN_CHARS:],
        "stderr": run.stderr[-OUTPUT_SHOWN_CHARS:],
    }


def _as_test_list(value: object) -> tuple[list[str], str]:
    """A test value (a string or a list of strings) as a non-empty list, or a problem to report."""
    tests = [value] if isinstance(value, str) else value
    if not isinstance(tests, list) or not all(isinstance(test, str) for test in tests):
        return [], "must be a string or a list of strings"
    if not tests:
        return [], "must hold at least one test"
    return tests, ""


def _find_report(stdout: str, nonce: str) -> dict | None:
    for line in reversed(stdout.splitlines()):
        if not line.startswith(REPORT_PREFIX):
            continue
        try:
            report = json.loads(line[len(REPORT_PREFIX) :])
        except ValueError:
            continue
        if (
            isinstance(report, dict)
            and report.get("nonce") == nonce
            and isinstance(report.get("passed"), list)
        ):
            return report
    return None


def _why_no_report(run: RunResult) -> str:
    tail = shorten(run.stderr.strip().splitlines()[-1], 200) if run.stderr.strip() else ""
    if run.status == Status.TIMEOUT:
        return f"timeout: {tail or 'the program or its tests ran too long'}"
    if run.status == Status.MEMORY:
        return f"out of memory: {tail}"
    if run.status == Status.OUTPUT_LIMIT:
        return "output limit: the program printed too much"
    if run.status == Status.SANDBOX_ERROR:
        return f"sandbox error: {tail}"
    return (
        f"no test report: the program exited before its tests ran (exit code {run.exit_code}) {tail}".strip()
    )


def _zero(reason: str, *, total: int) -> ScoreResult:
    return ScoreResult(0.0, {"tests_passed": 0.0, "tests_total": float(total)}, reason)
