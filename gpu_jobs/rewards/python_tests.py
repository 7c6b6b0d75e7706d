"""python_tests: run the completion's program in a sandbox against the row's tests, judged where it cannot reach.

Three test forms, each judged by trusted code in another process than the program (code_judge/judge.py):
- `io`: {"stdin": ..., "stdout": ...}: the program runs as a script on stdin; its stdout is compared;
- `call`: {"call": "f", "args": [...], "kwargs": {...}, "expected": value}: a call with JSON arguments whose
  result is compared as JSON (so an object that claims to equal anything cannot pass), floats within
  `float_tolerance`;
- assert scripts (a string, as HumanEval and MBPP ship them): run by the judge, where every function of the
  program is a stand-in that calls it in the program's process and brings back a plain value. Weaker than the
  other two only in what a test may do: it reaches the program through calls with plain values.
A row's tests may also be APPS-style {"inputs": [...], "outputs": [...], "fn_name"?: "f"}.
"""

from __future__ import annotations

import ast
import secrets
from typing import Any, ClassVar

from gpu_jobs.rewards import code_judge
from gpu_jobs.rewards.base import Scorer, ScoreResult, SpecError, SpecField, shorten
from gpu_jobs.rewards.extract import extract_python_code
from gpu_jobs.rewards.sandboxed import run_or_outage
from sandboxes.client import SandboxClient
from sandboxes.profiles import PROFILES
from sandboxes.types import RunRequest, RunResult, Status

SCORING_MODES = ("all_or_nothing", "fraction")
IO_COMPARE = ("lines", "exact", "tokens")
MAX_TIMEOUT_S = 60.0
# Samples judged in one sandbox run: the judge's start (and the sandbox's, ~15 ms of CPU together) is paid once
# for them, while each sample still gets runners and `timeout_s` of its own. A batch is cut into as few runs as
# CHUNK allows, a whole number of them for each sandbox worker (so that every worker gets some, and they finish
# together), or into RUNS where the workers are not known here (remote hosts), of MIN_CHUNK to CHUNK samples: a
# small batch stays in one run, as one sample's neighbours in it are what the judge's wipe and sweep are for.
# Fewer, larger runs matter for small checks: the demo's 128 a step took ~530 ms as 16 runs of 8 and ~390 ms as
# 4 runs of 32 on 2 workers (now 2 runs of 64); a batch of 32 takes 140 ms of CPU as 2 runs, 170 ms as 4.
MIN_CHUNK = 8
CHUNK = 64
RUNS = 16
REPORT_PREFIX = code_judge.REPORT_PREFIX
SCIENCE_LIBRARIES = ("numpy", "scipy", "pandas", "sympy")
SCIENCE_PATH = "/usr/lib/python3/dist-packages"  # where Debian's python3-numpy and the others install
SCIENCE_IMPORT_S = 10.0  # for the judge and its zygote to import them, once a run
TAMPERING = "tampering"


class PythonTests(Scorer):
    """Spec: exactly one of `tests_field` (default "tests", read from each row) or `tests` (fixed for all).

    Each sample runs in its own sandbox, all of a batch in one `run_many` call; `timeout_s` covers the program
    and all its tests together. The value of the program's last expression statement is bound to `result`.
    """

    type_name = "python_tests"
    slow = True
    summary = (
        "Python tests: run the model's program against tests (stdin/stdout, calls or asserts) in a sandbox"
    )
    example = {"type": "python_tests", "tests_field": "tests", "scoring": "fraction", "timeout_s": 5}
    fields: ClassVar[tuple[SpecField, ...]] = (
        SpecField(
            "tests_field",
            (str,),
            default=None,
            help="The column holding each row's tests: assert scripts, {stdin, stdout} pairs, "
            "{call, args, expected} calls (a list may mix them); default tests.",
        ),
        SpecField(
            "tests",
            (str, list, dict),
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
        SpecField(
            "io_compare",
            (str,),
            default="lines",
            choices=IO_COMPARE,
            help="stdin/stdout tests: lines ignores trailing spaces and blank lines at the end; exact compares "
            "every byte; tokens compares whitespace-separated tokens, numbers within float_tolerance.",
        ),
        SpecField(
            "float_tolerance",
            (int, float),
            default=1e-6,
            help="Relative or absolute difference within which two floats count as equal (calls, tokens).",
        ),
        SpecField(
            "libraries",
            (list,),
            default=None,
            help="Scientific libraries the program may import (the python-science sandbox): any of "
            + ", ".join(SCIENCE_LIBRARIES)
            + ". numpy arrays and scalars then cross as plain values.",
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
            _, problem = as_tests(clean["tests"])
            if problem:
                raise SpecError("tests", problem)
            if isinstance(clean["tests"], str):
                clean["tests"] = [clean["tests"]]
        if not 0 < clean["timeout_s"] <= MAX_TIMEOUT_S:
            raise SpecError("timeout_s", f"must be more than 0 and at most {MAX_TIMEOUT_S:g} seconds")
        if not 0 <= clean["float_tolerance"] < 1:
            raise SpecError("float_tolerance", "must be at least 0 and less than 1")
        libraries = clean.get("libraries")
        if libraries is not None:
            unknown = [name for name in libraries if name not in SCIENCE_LIBRARIES]
            if unknown or not libraries:
                raise SpecError(
                    "libraries", f"must list some of {', '.join(SCIENCE_LIBRARIES)}; got {unknown or 'none'}"
                )
            # numpy first: the others import it.
            clean["libraries"] = sorted(set(libraries), key=SCIENCE_LIBRARIES.index)
        return clean

    def score(self, row: dict, completion: str) -> ScoreResult:
        return self.score_batch([row], [completion])[0]

    def score_batch(self, rows: list[dict], completions: list[str]) -> list[ScoreResult]:
        """Samples go to the sandbox in chunks (chunk_size), each chunk one run of the judge (every sample still
        in runners of its own, with `timeout_s` of its own), all chunks in one `run_many` call."""
        if len(rows) != len(completions):
            raise ValueError(f"{len(rows)} rows but {len(completions)} completions")
        results: list[ScoreResult | None] = [None] * len(rows)
        checks: list[tuple[int, str, list[dict]]] = []  # (index, program, tests)
        for index, (row, completion) in enumerate(zip(rows, completions, strict=True)):
            tests, problem = self._tests_for(row)
            if problem:
                results[index] = _zero(problem, total=0)
            else:
                checks.append((index, self._program(completion), tests))
        size = chunk_size(len(checks), runs=planned_runs(self._client(), len(checks)))
        alone = self._judge([checks[start : start + size] for start in range(0, len(checks), size)], results)
        # A sample of a batch that the judge did not report on (the run lost its judge, or its zygote, or
        # the judge stopped at a sample that left the sandbox unclean) is judged again in a run of its own:
        # one sample cannot cost the others of its batch their verdicts.
        self._judge([[check] for check in alone], results)
        return [result for result in results if result is not None]  # every index is filled above

    def _judge(self, chunks: list[list[tuple[int, str, list[dict]]]], results: list) -> list:
        """Judge each chunk in one sandbox run, all in one `run_many` call, filling `results`; the checks of
        batches (more than one sample) whose entry the judge's report lacks are returned instead."""
        nonces = [secrets.token_hex(16) for _ in chunks]
        unreported: list[tuple[int, str, list[dict]]] = []
        if not chunks:
            return unreported
        requests = [self._request(chunk, nonce) for chunk, nonce in zip(chunks, nonces, strict=True)]
        runs = run_or_outage(self._client(), requests)
        for chunk, nonce, run in zip(chunks, nonces, runs, strict=True):
            report = code_judge.find_report(run.stdout, nonce)
            entries = report.get("results") if report else None
            if not isinstance(entries, list) or len(entries) > len(chunk):
                entries = []
            if run.status == Status.SANDBOX_ERROR and not entries:
                entries = [None] * len(chunk)  # the sandbox itself failed: a second run would not help
            for position, (index, program, tests) in enumerate(chunk):
                entry = entries[position] if position < len(entries) else None
                if entry is None and len(chunk) > 1 and position >= len(entries):
                    unreported.append((index, program, tests))
                    continue
                # A lone sample printed to the run's own stderr; those of a batch each to their runner's.
                shown = run.stderr if len(chunk) == 1 else str((entry or {}).get("printed", ""))
                result = self._verdict(entry, run, total=len(tests), printed=shown)
                result.output = sandbox_output(run, stderr=shown)
                result.output["tests"] = describe_tests(tests)
                results[index] = result
        return unreported

    def _program(self, completion: str) -> str:
        return extract_python_code(completion)

    def _client(self) -> SandboxClient:
        if self._sandbox is None:
            self._sandbox = SandboxClient()
        return self._sandbox

    def _tests_for(self, row: dict) -> tuple[list[dict], str]:
        if self.spec["tests"] is not None:
            return as_tests(self.spec["tests"])
        field = self.spec["tests_field"]
        if not isinstance(row, dict) or row.get(field) is None:
            return [], f"row has no {field!r} value with tests"
        tests, problem = as_tests(row[field])
        return tests, f"row's {field!r}: {problem}" if problem else ""

    def _request(self, chunk: list[tuple[int, str, list[dict]]], nonce: str) -> RunRequest:
        timeout = float(self.spec["timeout_s"])
        payload = self._payload(chunk, nonce)
        if not self.spec.get("libraries"):
            return code_judge.request(payload, time_s=timeout, run_s=timeout * len(chunk))
        payload["preload"] = {"paths": [SCIENCE_PATH], "modules": self.spec["libraries"]}
        return code_judge.request(
            payload,
            time_s=timeout,
            run_s=timeout * len(chunk) + SCIENCE_IMPORT_S,
            profile="python-science",
            memory_mb=PROFILES["python-science"].memory_mb,
        )

    def _payload(self, chunk: list[tuple[int, str, list[dict]]], nonce: str) -> dict:
        return {
            "nonce": nonce,
            "mode": "tests_batch",
            "samples": [
                {"program": program, "tests": tests, "bind": binds_result(program)}
                for _, program, tests in chunk
            ],
            "io_compare": self.spec["io_compare"],
            "float_tolerance": self.spec["float_tolerance"],
        }

    def _verdict(self, report: dict | None, run: RunResult, *, total: int, printed: str) -> ScoreResult:
        """The score of one sample from its entry in the judge's report (None: the run gave none);
        `printed`: what its program printed."""
        if not isinstance(report, dict) or not isinstance(report.get("passed"), list):
            return _zero(_why_no_report(run), total=total)
        tampering = [str(what) for what in report.get("tampering") or []]
        if REPORT_PREFIX in printed:
            tampering.append("printed a forged report line")
        if tampering:
            return tampering_result(tampering, {"tests_passed": 0.0, "tests_total": float(total)})
        passed = sum(1 for ok in report["passed"] if ok is True)
        parts = {"tests_passed": float(passed), "tests_total": float(total), TAMPERING: 0.0}
        if self.spec["scoring"] == "fraction":
            score = passed / total
        else:
            score = 1.0 if passed == total else 0.0
        if report.get("program_error"):
            error = str(report["program_error"])
            reason = f"the program {shorten(error)}"
            if error.startswith("ran past its time limit"):
                reason = f"timeout: {reason}"
        elif passed == total:
            reason = f"all {total} tests passed" if total > 1 else "the test passed"
        else:
            first = next(i for i, ok in enumerate(report["passed"]) if ok is not True)
            reason = (
                f"{passed}/{total} tests passed; test {first + 1}: {shorten(str(report['errors'][first]))}"
            )
        return ScoreResult(score, parts, reason)


def chunk_size(count: int, *, runs: int = RUNS) -> int:
    """Samples per sandbox run for a batch of `count`: at least `runs` runs (more where CHUNK caps them, the
    batch shared out evenly over them, so that no run is left with a short tail), of MIN_CHUNK to CHUNK each."""
    runs = max(1, runs, -(-count // CHUNK))
    return max(MIN_CHUNK, -(-count // runs))


def planned_runs(sandbox: Any, count: int) -> int:
    """How many runs to cut a batch of `count` samples into for `sandbox` (a SandboxClient or a backend): as
    few as CHUNK allows, rounded up to a whole number for each of its workers; RUNS where it does not know its
    workers (remote mode)."""
    workers = getattr(sandbox, "workers", None)
    if not isinstance(workers, int) or workers <= 0:
        return RUNS
    capped = max(1, -(-count // CHUNK))
    return workers * -(-capped // workers)


def binds_result(program: str) -> bool:
    """Whether the judge's runner must bind the program's last statement to `result` (it is an expression),
    or may compile the program as it is: parsed here, once, rather than in each fresh runner. A program that
    does not parse takes the runner's own path, which reports the error."""
    try:
        body = ast.parse(program).body
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return True
    return bool(body) and isinstance(body[-1], ast.Expr)


FORM_NAMES = {"assert": "assert script", "call": "call", "io": "stdin/stdout"}


def describe_tests(tests: list[dict]) -> str:
    """Which test forms a row's tests use, for a person reading a preview: "2 calls", "3 stdin/stdout"."""
    counts = {kind: sum(1 for test in tests if test["kind"] == kind) for kind in FORM_NAMES}
    words = []
    for kind, count in counts.items():
        if count:
            name = FORM_NAMES[kind]
            words.append(f"{count} {name}{'s' if count > 1 and kind != 'io' else ''}")
    return ", ".join(words)


def tampering_result(what: list[str], parts: dict[str, float]) -> ScoreResult:
    """Score 0 for a sample whose program reached for the grader, saying what it tried."""
    return ScoreResult(0.0, {**parts, TAMPERING: 1.0}, shorten(f"{TAMPERING}: {'; '.join(what)}", 300))


def as_tests(value: object) -> tuple[list[dict], str]:
    """A row's or spec's tests as the judge's list of {"kind", ...}, or a problem to report (naming the test)."""
    if isinstance(value, dict) and "inputs" in value and "outputs" in value:
        return _apps_tests(value)
    items = [value] if isinstance(value, str | dict) else value
    if not isinstance(items, list):
        return [], "must be a string, a list of tests or {inputs, outputs}"
    if not items:
        return [], "must hold at least one test"
    tests = []
    for number, item in enumerate(items, start=1):
        test, problem = _one_test(item)
        if problem:
            return [], f"test {number}: {problem}" if len(items) > 1 else problem
        tests.append(test)
    return tests, ""


def _one_test(item: object) -> tuple[dict, str]:
    if isinstance(item, str):
        return {"kind": "assert", "source": item}, ""
    if not isinstance(item, dict):
        return {}, "must be a string or a list of strings, {stdin, stdout} or {call, args, expected}"
    if "stdin" in item or "stdout" in item:
        stdin, stdout = item.get("stdin", ""), item.get("stdout")
        if not isinstance(stdin, str) or not isinstance(stdout, str):
            return {}, "an io test needs stdin and stdout as strings"
        return {"kind": "io", "stdin": stdin, "stdout": stdout}, ""
    if "call" in item:
        fn, args, kwargs = item.get("call"), item.get("args", []), item.get("kwargs", {})
        if not isinstance(fn, str) or not fn.isidentifier():
            return {}, "call must name a function of the program"
        if not isinstance(args, list) or not isinstance(kwargs, dict) or "expected" not in item:
            return {}, "a call test needs args (a list), optional kwargs (an object) and expected"
        return {"kind": "call", "fn": fn, "args": args, "kwargs": kwargs, "expected": item["expected"]}, ""
    return {}, "a test object needs stdin and stdout, or call, args and expected"


def _apps_tests(value: dict) -> tuple[list[dict], str]:
    inputs, outputs, fn = value["inputs"], value["outputs"], value.get("fn_name")
    if not isinstance(inputs, list) or not isinstance(outputs, list) or len(inputs) != len(outputs):
        return [], "inputs and outputs must be lists of the same length"
    if not inputs:
        return [], "must hold at least one test"
    if fn is not None:
        if not isinstance(fn, str) or not fn.isidentifier():
            return [], "fn_name must name a function of the program"
        tests = []
        for args, expected in zip(inputs, outputs, strict=True):
            # APPS wraps each call's expected value in a one-item list.
            if isinstance(expected, list) and len(expected) == 1:
                expected = expected[0]
            tests.append(
                {
                    "kind": "call",
                    "fn": fn,
                    "args": args if isinstance(args, list) else [args],
                    "kwargs": {},
                    "expected": expected,
                }
            )
        return tests, ""
    if not all(isinstance(x, str) for x in [*inputs, *outputs]):
        return [], "inputs and outputs must be strings (stdin and expected stdout)"
    return [{"kind": "io", "stdin": i, "stdout": o} for i, o in zip(inputs, outputs, strict=True)], ""


OUTPUT_SHOWN_CHARS = 2000


def sandbox_output(run: RunResult, *, stderr: str | None = None) -> dict[str, str]:
    """What a person reading a rollout should see of a run: its status and the program's own output (the
    judge's report line left out; `stderr`: the sample's own, when the run judged several), each cut to
    OUTPUT_SHOWN_CHARS."""
    stdout = "\n".join(line for line in run.stdout.splitlines() if not line.startswith(REPORT_PREFIX))
    return {
        "status": str(run.status),
        "stdout": stdout[-OUTPUT_SHOWN_CHARS:],
        "stderr": (run.stderr if stderr is None else stderr)[-OUTPUT_SHOWN_CHARS:],
    }


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
    return ScoreResult(0.0, {"tests_passed": 0.0, "tests_total": float(total), TAMPERING: 0.0}, reason)
