"""regex: the completion matches a pattern; optionally a group of the match must equal the row's reference."""

from __future__ import annotations

import regex

from gpu_jobs.rewards.base import Scorer, ScoreResult, SpecError, SpecField, shorten
from gpu_jobs.rewards.exact_match import references_in
from gpu_jobs.rewards.extract import check_extract_fields, extract_fields, extract_from_spec
from gpu_jobs.rewards.normalise import normalise_fields, normaliser_from_spec

MATCH_MODES = ("search", "fullmatch")
# A pattern such as (a+)+$ can take exponential time on a hostile completion; `regex` can stop it.
MATCH_TIMEOUT_S = 1.0
MAX_PATTERN_CHARS = 2000


class RegexMatch(Scorer):
    type_name = "regex"
    summary = "Regex: the answer matches a pattern (optionally a captured group equals a reference)"
    example = {
        "type": "regex",
        "pattern": r"answer is (\d+)",
        "match": "search",
        "group": 1,
        "reference_field": "answer",
    }
    fields = (
        SpecField("pattern", (str,), help="A Python regular expression, e.g. answer is (\\d+)."),
        SpecField(
            "match",
            (str,),
            default="search",
            choices=MATCH_MODES,
            help="search: the pattern occurs anywhere; fullmatch: the whole answer must match it.",
        ),
        SpecField(
            "group",
            (int, str),
            default=0,
            help="The group compared with the reference: 0 is the whole match, 1 the first (...), or a name.",
        ),
        SpecField(
            "reference_field",
            (str,),
            default=None,
            help="When set, the group must equal this column (normalised as below); when empty, a match is enough.",
        ),
        SpecField("ignore_case", (bool,), default=False, help="Letters match either case."),
        SpecField("dotall", (bool,), default=False, help="'.' also matches a newline."),
        *extract_fields(),
        *normalise_fields(),
    )

    @classmethod
    def normalise_spec(cls, spec: dict) -> dict:
        clean = super().normalise_spec(spec)
        check_extract_fields(clean)
        if not clean["pattern"]:
            raise SpecError("pattern", "write a pattern, e.g. answer is (\\d+)")
        if len(clean["pattern"]) > MAX_PATTERN_CHARS:
            raise SpecError("pattern", f"is longer than {MAX_PATTERN_CHARS} characters")
        try:
            compiled = regex.compile(clean["pattern"], cls._flags(clean))
        except regex.error as exc:
            raise SpecError("pattern", f"is not a valid regular expression: {exc}") from None
        group = clean["group"]
        if isinstance(group, str) and group.isdigit():
            group = clean["group"] = int(
                group
            )  # "1" typed in a text box means group 1, not a group named "1"
        if isinstance(group, int) and not 0 <= group <= compiled.groups:
            raise SpecError(
                "group", f"the pattern has {compiled.groups} group(s); choose 0 to {compiled.groups}"
            )
        if isinstance(group, str) and group not in compiled.groupindex:
            names = ", ".join(compiled.groupindex) or "none"
            raise SpecError("group", f"the pattern has no group named {group!r} (named groups: {names})")
        return clean

    @staticmethod
    def _flags(spec: dict) -> int:
        return (regex.IGNORECASE if spec["ignore_case"] else 0) | (regex.DOTALL if spec["dotall"] else 0)

    def __init__(self, spec: dict, *, sandbox=None) -> None:
        super().__init__(spec)
        self._pattern = regex.compile(spec["pattern"], self._flags(spec))

    def _score(self, row: dict, completion: str) -> ScoreResult:
        text = extract_from_spec(completion, self.spec)
        if text is None:
            return ScoreResult(
                0.0, {"match": 0.0}, f"no answer found in the completion ({self.spec['extract']})"
            )
        find = self._pattern.fullmatch if self.spec["match"] == "fullmatch" else self._pattern.search
        try:
            found = find(text, timeout=MATCH_TIMEOUT_S)
        except TimeoutError:
            return ScoreResult(
                0.0, {"match": 0.0}, f"the pattern took over {MATCH_TIMEOUT_S:g}s on this answer"
            )
        if found is None:
            return ScoreResult(
                0.0, {"match": 0.0}, f"no {self.spec['match']} of the pattern in {shorten(text, 80)!r}"
            )
        captured = found.group(self.spec["group"])
        field = self.spec["reference_field"]
        if field is None:
            return ScoreResult(1.0, {"match": 1.0}, f"matched {shorten(found.group(0), 80)!r}")
        references = references_in(row, field)
        if references is None:
            return ScoreResult(0.0, {"match": 0.0}, f"row has no {field!r} value to compare with")
        if captured is None:
            return ScoreResult(
                0.0, {"match": 0.0}, f"group {self.spec['group']!r} did not take part in the match"
            )
        normalise = normaliser_from_spec(self.spec)
        if any(normalise(captured) == normalise(reference) for reference in references):
            return ScoreResult(
                1.0, {"match": 1.0}, f"captured {shorten(captured, 80)!r} equals the reference"
            )
        return ScoreResult(
            0.0,
            {"match": 0.0},
            f"captured {shorten(captured, 80)!r}, expected {shorten(references[0], 80)!r}",
        )
