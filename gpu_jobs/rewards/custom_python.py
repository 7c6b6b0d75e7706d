"""custom_python: a user's `score(row, completion)` function, run ONLY inside a sandbox, never in-process.

The code runs in a runner process under code_judge's guard, a fresh one per sample; the judge process calls
score() and receives only a plain value, so nothing a sample does reaches another sample's score. Code that
needs to execute the completion should call `run_program(code, stdin="")` (given to the code), which runs it
as a separate process with no way back into score(); exec() of a completion inside score() is the weaker
form: the completion then runs next to score() and only the guard stands between it and the result.
"""

from __future__ import annotations

import ast
import secrets

from gpu_jobs.rewards import code_judge
from gpu_jobs.rewards.base import Scorer, ScoreResult, SpecError, SpecField, shorten
from gpu_jobs.rewards.python_tests import TAMPERING, tampering_result
from gpu_jobs.rewards.sandboxed import run_or_outage
from sandboxes.client import SandboxClient
from sandboxes.types import RunResult, Status

MAX_TIMEOUT_S = 60.0
# Samples per sandbox run: one process scores several, so a batch of 1,000 is not 1,000 process starts,
# while one sample that hangs costs only its chunk.
CHUNK = 16


class CustomPython(Scorer):
    type_name = "custom_python"
    slow = True
    summary = "Custom Python: your own score(row, completion) function, run in a sandbox"
    example = {
        "type": "custom_python",
        "code": "def score(row, completion):\n    return 1.0 if row['answer'] in completion else 0.0\n",
        "timeout_s": 5,
    }
    fields = (
        SpecField(
            "code",
            (str,),
            help="Python defining score(row, completion) that returns a number in 0..1, (number, reason) or "
            '{"score": ..., "reason": ...}. It runs in an isolated sandbox with no network. To execute the '
            'completion, call run_program(code, stdin="") -> {stdout, stderr, exit_code, timed_out}.',
        ),
        SpecField(
            "timeout_s", (int, float), default=5, help="Time limit per sandbox run (up to 16 samples)."
        ),
    )

    @classmethod
    def normalise_spec(cls, spec: dict) -> dict:
        clean = super().normalise_spec(spec)
        try:
            tree = ast.parse(clean["code"])
        except SyntaxError as exc:
            raise SpecError("code", f"line {exc.lineno}: {exc.msg}") from None
        if not any(isinstance(node, ast.FunctionDef) and node.name == "score" for node in tree.body):
            raise SpecError("code", "must define a function score(row, completion)")
        if not 0 < clean["timeout_s"] <= MAX_TIMEOUT_S:
            raise SpecError("timeout_s", f"must be more than 0 and at most {MAX_TIMEOUT_S:g} seconds")
        return clean

    def __init__(self, spec: dict, *, sandbox: SandboxClient | None = None) -> None:
        super().__init__(spec)
        self._sandbox = sandbox

    def _score(self, row: dict, completion: str) -> ScoreResult:
        return self.score_batch([row], [completion])[0]

    def score_batch(self, rows: list[dict], completions: list[str]) -> list[ScoreResult]:
        if len(rows) != len(completions):
            raise ValueError(f"{len(rows)} rows but {len(completions)} completions")
        chunks = [list(range(start, min(start + CHUNK, len(rows)))) for start in range(0, len(rows), CHUNK)]
        requests, nonces = [], []
        for chunk in chunks:
            nonce = secrets.token_hex(16)
            # str(): a row value JSON cannot hold (a date from a loader) reaches score() as its text.
            samples = [{"row": _plain(rows[i]), "completion": completions[i]} for i in chunk]
            payload = {"nonce": nonce, "mode": "custom", "code": self.spec["code"], "samples": samples}
            requests.append(code_judge.request(payload, time_s=float(self.spec["timeout_s"])))
            nonces.append(nonce)
        if self._sandbox is None:
            self._sandbox = SandboxClient()
        runs = run_or_outage(self._sandbox, requests)
        results: list[ScoreResult] = [ScoreResult(0.0, {}, "")] * len(rows)
        for chunk, nonce, run in zip(chunks, nonces, runs, strict=True):
            entries = _report(run.stdout, nonce, len(chunk))
            for offset, index in enumerate(chunk):
                results[index] = _result(entries[offset] if entries else None, run)
        return results


def _report(stdout: str, nonce: str, count: int) -> list[dict] | None:
    report = code_judge.find_report(stdout, nonce)
    if report is None or not isinstance(report.get("results"), list) or len(report["results"]) != count:
        return None
    return report["results"]


def _plain(value: object) -> object:
    """`value` with whatever JSON cannot hold turned into its text (json.dumps(default=str), without the trip)."""
    if isinstance(value, dict):
        return {str(key): _plain(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(item) for item in value]
    if value is None or isinstance(value, bool | int | float | str):
        return value
    return str(value)


def _result(entry: dict | None, run: RunResult) -> ScoreResult:
    if entry is None:
        tail = shorten(run.stderr.strip().splitlines()[-1], 200) if run.stderr.strip() else ""
        why = {
            Status.TIMEOUT: "timeout",
            Status.MEMORY: "out of memory",
            Status.OUTPUT_LIMIT: "output limit",
            Status.SANDBOX_ERROR: "sandbox error",
        }.get(run.status, f"no report (exit code {run.exit_code})")
        return ScoreResult(0.0, {TAMPERING: 0.0}, f"custom verifier: {why} {tail}".strip())
    if entry.get("tampering"):
        return tampering_result([str(what) for what in entry["tampering"]], {"custom": 0.0})
    if entry.get("score") is None:
        return ScoreResult(0.0, {TAMPERING: 0.0}, str(entry.get("reason", "")))
    score = float(entry["score"])
    clipped = min(1.0, max(0.0, score))
    note = "" if clipped == score else f" (returned {score:g}, kept within 0..1)"
    parts = {"custom": clipped, TAMPERING: 0.0}
    return ScoreResult(clipped, parts, (str(entry.get("reason") or "") + note).strip())
