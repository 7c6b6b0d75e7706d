"""numeric: the answer's number is within an absolute or relative tolerance of the row's reference number."""

from __future__ import annotations

import math
import re
from fractions import Fraction

from gpu_jobs.rewards.base import Scorer, ScoreResult, SpecError, SpecField, shorten
from gpu_jobs.rewards.extract import check_extract_fields, extract_fields, extract_from_spec

# A number as people write it: -1,234.5, 3e8, .5, 1/2 (a fraction), with its sign. Groups of three
# after a comma only, so "1,2,3" is three numbers; "1 234" (space-grouped) is handled before matching.
_NUMBER = re.compile(
    r"(?<![\w.])[-+−]?(?:\d{1,3}(?:,\d{3})+|\d+)?(?:\.\d+)?(?:[eE][-+]?\d+)?(?:\s*/\s*\d+(?:\.\d+)?)?"
)
_SPACE_GROUPS = re.compile(r"(?<=\d)[ \u00a0\u202f](?=\d{3}\b)")


def parse_number(text: str) -> float | None:
    """The last number in `text`, ignoring units ("12 km", "$1,200", "45%"); None when there is none.

    A percent sign does not divide by 100: "45%" is 45, so a reference of 45 matches either way.
    """
    text = _SPACE_GROUPS.sub("", text.replace("−", "-"))
    found = None
    for match in _NUMBER.finditer(text):
        token = match.group(0).strip()
        if not any(ch.isdigit() for ch in token):
            continue
        found = token
    if found is None:
        return None
    token = found.replace(",", "").replace(" ", "")
    try:
        if "/" in token:
            numerator, denominator = token.split("/")
            return float(Fraction(numerator) / Fraction(denominator))
        return float(token)
    except (ValueError, ZeroDivisionError, OverflowError):
        return None


class Numeric(Scorer):
    type_name = "numeric"
    summary = "Numeric: the answer's number is within a tolerance of the reference"
    example = {"type": "numeric", "reference_field": "answer", "extract": "last_number", "rel_tol": 0.01}
    fields = (
        SpecField("reference_field", (str,), default="answer", help="The column holding the right number."),
        SpecField("abs_tol", (int, float), default=0, help="Accept |answer - reference| <= this."),
        SpecField(
            "rel_tol",
            (int, float),
            default=0,
            help="Accept an error up to this share of the reference (0.01 = 1%).",
        ),
        *extract_fields(default="last_number"),
    )

    @classmethod
    def normalise_spec(cls, spec: dict) -> dict:
        clean = super().normalise_spec(spec)
        check_extract_fields(clean)
        for name in ("abs_tol", "rel_tol"):
            if not 0 <= clean[name] < math.inf:
                raise SpecError(name, "must be 0 or more")
        return clean

    def _score(self, row: dict, completion: str) -> ScoreResult:
        field = self.spec["reference_field"]
        if row.get(field) is None:
            return ScoreResult(0.0, {"match": 0.0}, f"row has no {field!r} value to compare with")
        reference = parse_number(str(row[field]))
        if reference is None:
            return ScoreResult(
                0.0, {"match": 0.0}, f"row's {field!r} ({shorten(str(row[field]), 60)!r}) is not a number"
            )
        # last_number: parse_number reads fractions, signs and grouped digits the shared extractor does not.
        last = self.spec["extract"] == "last_number"
        text = completion if last else extract_from_spec(completion, self.spec)
        answer = parse_number(text) if text is not None else None
        if answer is None:
            return ScoreResult(
                0.0, {"match": 0.0}, f"no number found in the completion ({self.spec['extract']})"
            )
        if (
            math.isclose(answer, reference, rel_tol=self.spec["rel_tol"], abs_tol=self.spec["abs_tol"])
            or answer == reference
        ):
            return ScoreResult(1.0, {"match": 1.0}, f"{answer:g} matches {reference:g}")
        return ScoreResult(0.0, {"match": 0.0}, f"expected {reference:g}, got {answer:g}")
