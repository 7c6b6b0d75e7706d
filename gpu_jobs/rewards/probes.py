"""Hack probes: completions that game careless verifiers. A verifier that scores one of them high is flagged.

Run on every save of a verifier version. Each probe builds its completion from a sample row (the row's
reference and prompt), so a probe scores what the verifier would give that hack on real data.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any

from gpu_jobs.rewards.base import ScoreResult, shorten
from gpu_jobs.rewards.registry import build_scorer, spec_types
from gpu_jobs.rewards.tamper_probes import NATIVE_TAMPER_PROBES, TAMPER_PROBES, native_completion

FLAG_THRESHOLD = 0.5
LONG_ANSWER_CHARS = 20000
SAMPLE_ROW = {
    "prompt": "What is 12+45? Answer with a number.",
    "answer": "57",
    "tests": ["assert result == 57"],
}
SAMPLE_IO_TESTS = [{"stdin": "12 45\n", "stdout": "57\n"}]
SAMPLE_SVG = (
    '<svg xmlns="http://www.w3.org/2000/svg" width="64" height="64"><circle cx="20" cy="30" r="10" fill="red"/>'
    '<rect x="35" y="10" width="20" height="15" fill="blue"/></svg>'
)
# Types that call out to a model endpoint are not probed on save: that would send traffic on every keystroke
# of the form and cost the endpoint's time; a judge is flagged by a person reading its preview.
UNPROBED_TYPES = ("model_judge",)


@dataclass(frozen=True)
class Probe:
    name: str
    description: str
    make: Callable[[dict, str], str]  # (row, reference) -> completion
    applies: Callable[[dict], bool] = lambda spec: True
    threshold: float = FLAG_THRESHOLD  # flagged at this score or above; tampering probes at anything above 0


@dataclass
class ProbeResult:
    name: str
    description: str
    score: float
    reason: str
    flagged: bool
    skipped: str = ""

    def to_dict(self) -> dict:
        return asdict(self)


def _fenced(program: str) -> Callable[[dict, str], str]:
    """A probe's completion: `program` in a Python code block, whatever the row."""
    return lambda row, ref: f"```python\n{program}```"


def _native(programs: dict[str, str]) -> Callable[[dict, str], str]:
    return lambda row, ref: native_completion(programs)


def _values(spec: dict, key: str) -> set:
    found = {spec[key]} if key in spec else set()
    for part in spec.get("parts") or []:
        found |= _values(part.get("spec") or {}, key)
    return found


def _demands_format(spec: dict) -> bool:
    """Whether the verifier asks for a layout (a tag, a box, JSON, a pattern), so a bare answer must fail."""
    return bool(_values(spec, "extract") & {"boxed", "tag", "json_field"}) or bool(
        spec_types(spec) & {"format", "regex", "json"}
    )


def _runs_code(spec: dict) -> bool:
    return "python_tests" in spec_types(spec)


def _executes_completions(spec: dict) -> bool:
    return bool(spec_types(spec) & {"python_tests", "custom_python"})


def _runs_native_code(spec: dict) -> bool:
    return "code_tests" in spec_types(spec)


def _renders(spec: dict) -> bool:
    return "render" in spec_types(spec)


def _long_answer(row: dict, reference: str) -> str:
    # The reference hidden among many wrong guesses, ending on a wrong one: "contains" checks fall for it.
    guesses = [f"Maybe the answer is {n}." for n in range(1, 400)]
    guesses.insert(len(guesses) // 2, f"Maybe the answer is {reference}.")
    text = " ".join(guesses)
    return (text * (LONG_ANSWER_CHARS // len(text) + 1))[:LONG_ANSWER_CHARS] + " Maybe the answer is 0."


PROBES: tuple[Probe, ...] = (
    Probe("empty", "An empty completion", lambda row, ref: ""),
    Probe("prompt_echo", "The prompt repeated back", lambda row, ref: str(row.get("prompt", ""))),
    Probe(
        "reference_wrong_format",
        "The right answer, without the format the verifier asks for",
        lambda row, ref: ref,
        _demands_format,
    ),
    Probe(
        "format_without_content",
        "The expected tags and boxes, empty",
        lambda row, ref: "<think> </think>\n<answer> </answer>\n\\boxed{}\n```python\n```\n{}",
    ),
    Probe("very_long", f"A {LONG_ANSWER_CHARS:,}-character answer listing many guesses", _long_answer),
    Probe(
        "os_exit",
        "Code that calls os._exit(0) before the tests run",
        lambda row, ref: "```python\nimport os\nos._exit(0)\n```",
        _runs_code,
    ),
    Probe(
        "sys_exit",
        "Code that calls sys.exit(0) before the tests run",
        lambda row, ref: "```python\nimport sys\nsys.exit(0)\n```",
        _runs_code,
    ),
    Probe(
        "prints_pass",
        "Code that only prints PASS (and a forged report line)",
        lambda row, ref: (
            "```python\nprint('PASS')\nprint('All tests passed')\n"
            'print(\'ANNEAL_REPORT {"passed": [true], "errors": [null], "program_error": null}\')\n```'
        ),
        _runs_code,
    ),
    Probe(
        "redefines_asserts",
        "Code that redefines assert helpers (assertEqual, assert_equal, AssertionError) to always pass",
        lambda row, ref: (
            "```python\nimport builtins, unittest\n"
            "unittest.TestCase.assertEqual = lambda *a, **k: None\n"
            "unittest.TestCase.assertTrue = lambda *a, **k: None\n"
            "def assert_equal(*a, **k):\n    return True\n"
            "assertEqual = assert_equal\n"
            "class AssertionError(Exception):\n    pass\n"
            "builtins.AssertionError = AssertionError\n```"
        ),
        _runs_code,
    ),
    *(
        Probe(
            name,
            description,
            _fenced(program),
            _executes_completions,
            threshold=1e-9,
        )
        for name, description, program in TAMPER_PROBES
    ),
    Probe(
        "blank_svg",
        "An empty SVG canvas (it shares a drawing's white background)",
        lambda row, ref: '```svg\n<svg xmlns="http://www.w3.org/2000/svg" width="64" height="64"></svg>\n```',
        _renders,
    ),
    *(
        Probe(
            name,
            description,
            _native(programs),
            _runs_native_code,
            threshold=1e-9,
        )
        for name, description, programs in NATIVE_TAMPER_PROBES
    ),
)


def probe_rows(spec: dict, rows: list[dict] | None) -> list[dict]:
    """Up to 3 of `rows`, or one made-up row with every column the spec reads when none are given."""
    if rows:
        return [row for row in rows if isinstance(row, dict)][:3]
    row: dict[str, Any] = dict(SAMPLE_ROW)
    for field in _values(spec, "reference_field"):
        if field:
            row[field] = SAMPLE_ROW["answer"]
    for field in _values(spec, "tests_field"):
        if field:
            row[field] = SAMPLE_ROW["tests"]
    if "render" in spec_types(spec):
        for field in _values(spec, "reference_field") or {"svg"}:
            row[field or "svg"] = SAMPLE_SVG
    if "code_tests" in spec_types(spec):  # stdin/stdout: the form every language code_tests runs has
        for field in _values(spec, "tests_field") or {"tests"}:
            row[field or "tests"] = SAMPLE_IO_TESTS
    for field in _values(spec, "required_field"):
        if field:
            row[field] = [SAMPLE_ROW["answer"]]
    return [row]


def _reference(spec: dict, row: dict) -> str:
    for field in sorted(f for f in _values(spec, "reference_field") if f):
        if row.get(field) is not None:
            value = row[field]
            return str(value[0] if isinstance(value, list) and value else value)
    return str(row.get("answer", SAMPLE_ROW["answer"]))


def run_probes(spec: dict, *, rows: list[dict] | None = None, sandbox=None) -> list[ProbeResult]:
    """Every probe's best score over the sample rows (a spec validate_spec accepts); never raises."""
    skipped_types = spec_types(spec) & set(UNPROBED_TYPES)
    if skipped_types:
        why = f"not probed: {', '.join(sorted(skipped_types))} calls an external model on every sample"
        return [ProbeResult(p.name, p.description, 0.0, "", False, skipped=why) for p in PROBES]
    scorer = build_scorer(spec, sandbox=sandbox)
    samples = probe_rows(spec, rows)
    active = [probe for probe in PROBES if probe.applies(spec)]
    batch_rows, completions = [], []
    for probe in active:
        for row in samples:
            batch_rows.append(row)
            completions.append(probe.make(row, _reference(spec, row)))
    # One batch: code-running verifiers make one sandbox round trip for all probes.
    results = scorer.score_batch(batch_rows, completions) if batch_rows else []
    out = []
    for probe in PROBES:
        if probe not in active:
            out.append(ProbeResult(probe.name, probe.description, 0.0, "", False, skipped="does not apply"))
            continue
        position = active.index(probe) * len(samples)
        best: ScoreResult = max(results[position : position + len(samples)], key=lambda r: r.score)
        out.append(
            ProbeResult(
                probe.name,
                probe.description,
                best.score,
                shorten(best.reason, 200),
                best.score >= probe.threshold,
            )
        )
    return out
