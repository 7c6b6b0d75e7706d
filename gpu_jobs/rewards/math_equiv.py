"""math: the answer is mathematically equal to the reference (math-verify: LaTeX, fractions, sets, intervals)."""

from __future__ import annotations

import threading

from gpu_jobs.rewards.base import Scorer, ScoreResult, SpecField, shorten
from gpu_jobs.rewards.extract import check_extract_fields, extract_fields, extract_from_spec

# math-verify's timeouts use SIGALRM, which only the main thread may set; elsewhere (a web server's
# worker thread) it runs without one, so the input is cut to a size sympy handles quickly.
TIMEOUT_S = 5
MAX_ANSWER_CHARS = 2000


class MathEquivalence(Scorer):
    type_name = "math"
    summary = "Math equivalence: the answer equals the reference as mathematics (1/2 = 0.5 = \\frac{1}{2})"
    example = {"type": "math", "reference_field": "answer", "extract": "none"}
    fields = (
        SpecField("reference_field", (str,), default="answer", help="The column holding the right answer."),
        SpecField(
            "float_rounding",
            (int,),
            default=6,
            help="Decimal places numbers are rounded to before comparing.",
        ),
        *extract_fields(default="none"),
    )

    @classmethod
    def normalise_spec(cls, spec: dict) -> dict:
        clean = super().normalise_spec(spec)
        check_extract_fields(clean)
        return clean

    def _score(self, row: dict, completion: str) -> ScoreResult:
        from math_verify import ExprExtractionConfig, LatexExtractionConfig, parse, verify

        field = self.spec["reference_field"]
        if row.get(field) is None:
            return ScoreResult(0.0, {"match": 0.0}, f"row has no {field!r} value to compare with")
        text = extract_from_spec(completion, self.spec)
        if text is None or not text.strip():
            return ScoreResult(
                0.0, {"match": 0.0}, f"no answer found in the completion ({self.spec['extract']})"
            )
        timeout = TIMEOUT_S if threading.current_thread() is threading.main_thread() else None
        configs = [LatexExtractionConfig(), ExprExtractionConfig()]
        reference_text = str(row[field])
        # A bare reference such as "1/2" is an expression, not LaTeX: wrap it so both parsers see it.
        gold = parse(f"${reference_text}$", extraction_config=configs, parsing_timeout=timeout)
        if not gold:
            gold = parse(reference_text, extraction_config=configs, parsing_timeout=timeout)
        if not gold:
            return ScoreResult(0.0, {"match": 0.0}, f"row's {field!r} could not be read as mathematics")
        answer_text = text[-MAX_ANSWER_CHARS:]
        answer = parse(answer_text, extraction_config=configs, parsing_timeout=timeout)
        if not answer and self.spec["extract"] != "none":
            answer = parse(f"${answer_text}$", extraction_config=configs, parsing_timeout=timeout)
        if not answer:
            return ScoreResult(0.0, {"match": 0.0}, f"no mathematical answer found in {shorten(text, 80)!r}")
        equal = verify(gold, answer, float_rounding=self.spec["float_rounding"], timeout_seconds=timeout)
        shown = shorten(str(answer[-1]), 80)
        if equal:
            return ScoreResult(1.0, {"match": 1.0}, f"{shown} equals {shorten(reference_text, 80)}")
        return ScoreResult(0.0, {"match": 0.0}, f"{shown} does not equal {shorten(reference_text, 80)}")
