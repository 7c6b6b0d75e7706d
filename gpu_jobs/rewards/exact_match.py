"""exact_match: the (extracted) completion equals the row's reference, up to case and outer whitespace."""

from __future__ import annotations

from decimal import Decimal, InvalidOperation

from gpu_jobs.rewards.base import Scorer, ScoreResult, SpecField, shorten
from gpu_jobs.rewards.extract import EXTRACT_MODES, extract_answer


class ExactMatch(Scorer):
    type_name = "exact_match"
    fields = (
        SpecField("reference_field", (str,), default="answer"),
        SpecField("case_sensitive", (bool,), default=False),
        SpecField("strip_whitespace", (bool,), default=True),
        SpecField("extract", (str,), default="none", choices=EXTRACT_MODES),
    )

    def score(self, row: dict, completion: str) -> ScoreResult:
        field = self.spec["reference_field"]
        if not isinstance(row, dict) or row.get(field) is None:
            return ScoreResult(0.0, {"match": 0.0}, f"row has no {field!r} value to compare with")
        answer = extract_answer(completion, mode=self.spec["extract"])
        if answer is None:
            return ScoreResult(
                0.0, {"match": 0.0}, f"no answer found in the completion ({self.spec['extract']})"
            )
        reference = str(row[field])
        if self._equal(answer, reference):
            return ScoreResult(1.0, {"match": 1.0}, "match")
        return ScoreResult(
            0.0, {"match": 0.0}, f"expected {shorten(reference, 80)!r}, got {shorten(answer.strip(), 80)!r}"
        )

    def _equal(self, answer: str, reference: str) -> bool:
        if self.spec["strip_whitespace"]:
            answer, reference = answer.strip(), reference.strip()
        if self.spec["extract"] == "last_number":
            # "57.0" answers "57": compare the numbers when the reference is one.
            try:
                return Decimal(answer) == Decimal(reference.replace(",", ""))
            except InvalidOperation:
                pass
        if not self.spec["case_sensitive"]:
            answer, reference = answer.casefold(), reference.casefold()
        return answer == reference
