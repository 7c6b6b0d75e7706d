"""keywords: required words must appear and forbidden ones must not."""

from __future__ import annotations

import re

from gpu_jobs.rewards.base import Scorer, ScoreResult, SpecError, SpecField
from gpu_jobs.rewards.normalise import Normaliser

SCORING_MODES = ("all_or_nothing", "fraction")


class Keywords(Scorer):
    type_name = "keywords"
    summary = "Keywords: required words must appear, forbidden words must not"
    example = {
        "type": "keywords",
        "required": ["photosynthesis"],
        "forbidden": ["I cannot"],
        "whole_words": True,
    }
    fields = (
        SpecField("required", (list,), default=[], help="Words or phrases that must all appear."),
        SpecField(
            "required_field",
            (str,),
            default=None,
            help="A column holding more required words for each row (a string or a list).",
        ),
        SpecField(
            "forbidden", (list,), default=[], help="Words or phrases that must not appear; any one scores 0."
        ),
        SpecField("case_sensitive", (bool,), default=False, help="When false, 'Paris' counts as 'paris'."),
        SpecField("whole_words", (bool,), default=True, help="'cat' does not count inside 'concatenate'."),
        SpecField(
            "scoring",
            (str,),
            default="all_or_nothing",
            choices=SCORING_MODES,
            help="fraction: the share of required words present (still 0 with a forbidden word).",
        ),
    )

    @classmethod
    def normalise_spec(cls, spec: dict) -> dict:
        clean = super().normalise_spec(spec)
        for name in ("required", "forbidden"):
            if not all(isinstance(word, str) and word.strip() for word in clean[name]):
                raise SpecError(name, "must be a list of non-empty strings")
        if not clean["required"] and not clean["forbidden"] and clean["required_field"] is None:
            raise SpecError("required", "give at least one required or forbidden word (or a required_field)")
        return clean

    def _present(self, word: str, text: str) -> bool:
        normalise = Normaliser(case_sensitive=self.spec["case_sensitive"], whitespace="collapse")
        needle = normalise(word)
        if not self.spec["whole_words"]:
            return needle in text
        return re.search(rf"(?<!\w){re.escape(needle)}(?!\w)", text) is not None

    def _score(self, row: dict, completion: str) -> ScoreResult:
        required = list(self.spec["required"])
        field = self.spec["required_field"]
        if field is not None:
            extra = row.get(field)
            if extra is None:
                return ScoreResult(0.0, {}, f"row has no {field!r} value with required words")
            required += [str(word) for word in (extra if isinstance(extra, list) else [extra])]
        text = Normaliser(case_sensitive=self.spec["case_sensitive"], whitespace="collapse")(completion)
        missing = [word for word in required if not self._present(word, text)]
        found_forbidden = [word for word in self.spec["forbidden"] if self._present(word, text)]
        share = (len(required) - len(missing)) / len(required) if required else 1.0
        parts = {"required": share, "forbidden": 0.0 if found_forbidden else 1.0}
        if found_forbidden:
            return ScoreResult(0.0, parts, f"forbidden word(s) present: {', '.join(found_forbidden[:5])}")
        score = share if self.spec["scoring"] == "fraction" else (0.0 if missing else 1.0)
        if missing:
            return ScoreResult(
                score, parts, f"missing {len(missing)}/{len(required)}: {', '.join(missing[:5])}"
            )
        return ScoreResult(score, parts, "every required word present" if required else "no forbidden word")
