"""exact_match: the (extracted) completion equals the row's reference, after the chosen normalisation."""

from __future__ import annotations

from decimal import Decimal, InvalidOperation

from gpu_jobs.rewards.base import Scorer, ScoreResult, SpecField, shorten
from gpu_jobs.rewards.extract import check_extract_fields, extract_fields, extract_from_spec
from gpu_jobs.rewards.normalise import normalise_fields, normaliser_from_spec

COMPARE_MODES = ("equal", "contains")


def references_in(row: dict, field: str) -> list[str] | None:
    """The row's reference answers as strings (a list column means "any of these"); None when absent."""
    value = row.get(field)
    if value is None:
        return None
    values = value if isinstance(value, list) else [value]
    return [str(item) for item in values if item is not None] or None


class ExactMatch(Scorer):
    type_name = "exact_match"
    summary = "Exact match: compare the model's answer with a reference column"
    example = {
        "type": "exact_match",
        "reference_field": "answer",
        "extract": "last_line",
        "case_sensitive": False,
    }
    fields = (
        SpecField(
            "reference_field",
            (str,),
            default="answer",
            help="The dataset column with the right answer (a list there means any of them).",
        ),
        SpecField(
            "compare",
            (str,),
            default="equal",
            choices=COMPARE_MODES,
            help="equal: the answer is the reference; contains: the reference appears somewhere in the answer "
            "(both after the normalisation below).",
        ),
        *extract_fields(),
        *normalise_fields(),
    )

    @classmethod
    def normalise_spec(cls, spec: dict) -> dict:
        clean = super().normalise_spec(spec)
        check_extract_fields(clean)
        return clean

    def _score(self, row: dict, completion: str) -> ScoreResult:
        field = self.spec["reference_field"]
        references = references_in(row, field)
        if references is None:
            return ScoreResult(0.0, {"match": 0.0}, f"row has no {field!r} value to compare with")
        answer = extract_from_spec(completion, self.spec)
        if answer is None:
            return ScoreResult(
                0.0, {"match": 0.0}, f"no answer found in the completion ({self.spec['extract']})"
            )
        if any(self._equal(answer, reference) for reference in references):
            return ScoreResult(1.0, {"match": 1.0}, "match")
        expected = "expected" if self.spec["compare"] == "equal" else "expected it to contain"
        return ScoreResult(
            0.0,
            {"match": 0.0},
            f"{expected} {shorten(references[0], 80)!r}, got {shorten(answer.strip(), 80)!r}",
        )

    def _equal(self, answer: str, reference: str) -> bool:
        if self.spec["compare"] == "contains":
            normalise = normaliser_from_spec(self.spec)
            return normalise(reference) in normalise(answer)
        if self.spec["extract"] == "last_number":
            # "57.0" answers "57": compare the numbers when the reference is one.
            try:
                return Decimal(answer.strip()) == Decimal(reference.strip().replace(",", ""))
            except InvalidOperation:
                pass
        normalise = normaliser_from_spec(self.spec)
        return normalise(answer) == normalise(reference)
