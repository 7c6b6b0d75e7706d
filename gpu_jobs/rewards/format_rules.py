"""format: layout and length rules, e.g. reasoning inside <think> followed by a non-empty <answer>."""

from __future__ import annotations

import re

from gpu_jobs.rewards.base import Scorer, ScoreResult, SpecError, SpecField

SCORING_MODES = ("all_or_nothing", "fraction")
_TAG_NAME = re.compile(r"^[A-Za-z][A-Za-z0-9_-]{0,40}$")


class FormatRules(Scorer):
    type_name = "format"
    summary = "Format and length: e.g. reasoning in <think> then an <answer>, within a length"
    example = {"type": "format", "require_think": True, "require_answer": True, "max_chars": 4000}
    fields = (
        SpecField(
            "require_think", (bool,), default=True, help="The completion must hold a non-empty <think> block."
        ),
        SpecField("require_answer", (bool,), default=True, help="It must hold a non-empty <answer> block."),
        SpecField("think_tag", (str,), default="think", help="The reasoning tag's name."),
        SpecField("answer_tag", (str,), default="answer", help="The answer tag's name."),
        SpecField(
            "think_before_answer",
            (bool,),
            default=True,
            help="The reasoning block must close before the answer opens.",
        ),
        SpecField(
            "nothing_outside",
            (bool,),
            default=False,
            help="Only whitespace may stand outside the two blocks.",
        ),
        SpecField(
            "min_chars", (int,), default=None, help="The whole completion has at least this many characters."
        ),
        SpecField("max_chars", (int,), default=None, help="At most this many characters."),
        SpecField("max_words", (int,), default=None, help="At most this many words."),
        SpecField(
            "scoring",
            (str,),
            default="all_or_nothing",
            choices=SCORING_MODES,
            help="all_or_nothing: 1 when every rule holds; fraction: the share of rules that hold.",
        ),
    )

    @classmethod
    def normalise_spec(cls, spec: dict) -> dict:
        clean = super().normalise_spec(spec)
        for name in ("think_tag", "answer_tag"):
            if not _TAG_NAME.match(clean[name]):
                raise SpecError(name, "must be a tag name of letters, digits, _ or - (e.g. answer)")
        for name in ("min_chars", "max_chars", "max_words"):
            if clean[name] is not None and clean[name] < 0:
                raise SpecError(name, "must be 0 or more")
        if (
            clean["min_chars"] is not None
            and clean["max_chars"] is not None
            and clean["min_chars"] > clean["max_chars"]
        ):
            raise SpecError("max_chars", "must be at least min_chars")
        rules = [clean["require_think"], clean["require_answer"]] + [
            clean[name] is not None for name in ("min_chars", "max_chars", "max_words")
        ]
        if not any(rules):
            raise SpecError("require_answer", "choose at least one rule")
        return clean

    def _block(self, tag: str, text: str) -> re.Match | None:
        return re.search(rf"<{tag}>(.*?)</{tag}>", text, re.DOTALL)

    def _score(self, row: dict, completion: str) -> ScoreResult:
        spec = self.spec
        checks: dict[str, tuple[bool, str]] = {}
        think = self._block(spec["think_tag"], completion)
        answer = self._block(spec["answer_tag"], completion)
        if spec["require_think"]:
            ok = think is not None and bool(think.group(1).strip())
            checks["think"] = (ok, f"no non-empty <{spec['think_tag']}>...</{spec['think_tag']}> block")
        if spec["require_answer"]:
            ok = answer is not None and bool(answer.group(1).strip())
            checks["answer"] = (ok, f"no non-empty <{spec['answer_tag']}>...</{spec['answer_tag']}> block")
        if spec["require_think"] and spec["require_answer"] and spec["think_before_answer"]:
            ok = think is not None and answer is not None and think.end() <= answer.start()
            checks["order"] = (ok, "the reasoning must come before the answer")
        if spec["nothing_outside"]:
            outside = completion
            for block in (think, answer):
                if block is not None:
                    outside = outside.replace(block.group(0), "", 1)
            checks["nothing_outside"] = (not outside.strip(), "text outside the tagged blocks")
        if spec["min_chars"] is not None:
            checks["min_chars"] = (
                len(completion) >= spec["min_chars"],
                f"shorter than {spec['min_chars']} characters",
            )
        if spec["max_chars"] is not None:
            checks["max_chars"] = (
                len(completion) <= spec["max_chars"],
                f"{len(completion)} characters, over the limit of {spec['max_chars']}",
            )
        if spec["max_words"] is not None:
            words = len(completion.split())
            checks["max_words"] = (
                words <= spec["max_words"],
                f"{words} words, over the limit of {spec['max_words']}",
            )
        parts = {name: 1.0 if ok else 0.0 for name, (ok, _) in checks.items()}
        failed = [why for ok, why in checks.values() if not ok]
        if spec["scoring"] == "fraction":
            score = sum(parts.values()) / len(parts)
        else:
            score = 0.0 if failed else 1.0
        return ScoreResult(
            score, parts, "; ".join(failed) if failed else f"all {len(parts)} format rules hold"
        )
