"""composite: several verifiers as named parts, combined by weighted sum, all-of gate, minimum or a formula.

A part that reports tampering (gpu_jobs.rewards.base.TAMPERING_PART) is reported by the whole: its parts carry
the tampering part and its reason starts with "tampering: <what>", so the job's alarm and rollout filter see
it however deep the part sits. The composite then scores 0 when that part counts toward the score (weight
above 0, or any part of a formula); a logged-only part (weight 0) reports the attempt and leaves the score.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from gpu_jobs.rewards.base import (
    TAMPERING_PART,
    TAMPERING_PREFIX,
    Scorer,
    ScoreResult,
    SpecError,
    SpecField,
    construct,
    is_tampering,
    shorten,
    tampering_what,
    validate_spec,
)
from gpu_jobs.rewards.formula import FormulaError, check_formula, evaluate

if TYPE_CHECKING:
    from gpu_jobs.rewards.outbound import Outbound
    from sandboxes.client import SandboxClient

MODES = ("weighted_sum", "all_of", "min", "formula")
MAX_PARTS = 16
MAX_DEPTH = 3
_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,63}$")


class Composite(Scorer):
    type_name = "composite"
    summary = "Composite: combine named verifiers (weighted sum, all must pass, minimum, or a formula)"
    example = {
        "type": "composite",
        "mode": "formula",
        "formula": "correct * (0.8 + 0.2 * formatted)",
        "parts": [
            {"name": "correct", "spec": {"type": "numeric", "reference_field": "answer"}, "weight": 1},
            {"name": "formatted", "spec": {"type": "format", "require_think": True}, "weight": 0},
        ],
    }
    fields = (
        SpecField(
            "mode",
            (str,),
            default="weighted_sum",
            choices=MODES,
            help="weighted_sum: Σ weight·score / Σ weight; all_of: 1 when every weighted part reaches pass_threshold; "
            "min: the lowest weighted part; formula: an expression over the part names.",
        ),
        SpecField(
            "parts",
            (list,),
            help='[{"name": "correct", "spec": {...}, "weight": 1}, ...]; a part with weight 0 is only logged.',
        ),
        SpecField(
            "formula",
            (str,),
            default=None,
            help="For mode formula: arithmetic over part names with + - * / ** %, comparisons, "
            "x if c else y, min, max, abs, sqrt, floor, ceil, exp, log, clip(x, low, high).",
        ),
        SpecField(
            "pass_threshold", (int, float), default=1.0, help="For all_of: the score a part must reach."
        ),
    )

    @classmethod
    def normalise_spec(cls, spec: dict, *, depth: int = 1) -> dict:
        clean = super().normalise_spec(spec)
        if depth > MAX_DEPTH:
            raise SpecError("parts", f"composites nest at most {MAX_DEPTH} deep")
        parts = clean["parts"]
        if not parts or len(parts) > MAX_PARTS:
            raise SpecError("parts", f"must hold 1 to {MAX_PARTS} parts")
        seen: set[str] = set()
        normalised = []
        for index, part in enumerate(parts):
            where = f"parts[{index}]"
            if not isinstance(part, dict):
                raise SpecError(where, 'must be an object {"name", "spec", "weight"}')
            unknown = set(part) - {"name", "spec", "weight"}
            if unknown:
                raise SpecError(f"{where}.{sorted(unknown)[0]}", "is not a part field (name, spec, weight)")
            name = part.get("name")
            if not isinstance(name, str) or not _NAME.match(name):
                raise SpecError(f"{where}.name", "must be a name of letters, digits and _ (e.g. correct)")
            if name in seen:
                raise SpecError(f"{where}.name", f"{name!r} is used by another part")
            if name == TAMPERING_PART:
                raise SpecError(
                    f"{where}.name",
                    f"{name!r} is reserved: it marks programs that tried to tamper with the grader; "
                    "choose another name",
                )
            seen.add(name)
            weight = part.get("weight", 1.0)
            if isinstance(weight, bool) or not isinstance(weight, int | float) or weight < 0:
                raise SpecError(f"{where}.weight", "must be a number, 0 or more")
            inner = part.get("spec")
            try:
                if isinstance(inner, dict) and inner.get("type") == "composite":
                    inner_clean = Composite.normalise_spec(inner, depth=depth + 1)
                else:
                    inner_clean = validate_spec(inner)
            except SpecError as exc:
                raise SpecError(f"{where}.spec.{exc.field}", exc.message) from None
            normalised.append({"name": name, "spec": inner_clean, "weight": weight})
        clean["parts"] = normalised
        if clean["mode"] == "formula":
            if not clean["formula"]:
                raise SpecError(
                    "formula", "write a formula over the part names, e.g. " + " * ".join(sorted(seen))
                )
            try:
                check_formula(clean["formula"], names=seen)
            except FormulaError as exc:
                raise SpecError("formula", str(exc)) from None
        elif all(part["weight"] == 0 for part in normalised):
            raise SpecError(
                "parts", "at least one part needs a weight above 0 (weight 0 parts are only logged)"
            )
        return clean

    uses_outbound = True  # for its parts

    def __init__(
        self, spec: dict, *, sandbox: SandboxClient | None = None, outbound: Outbound | None = None
    ) -> None:
        super().__init__(spec)
        self._parts = [
            (
                part["name"],
                part["weight"],
                construct(part["spec"], sandbox=sandbox, outbound=outbound),
            )
            for part in spec["parts"]
        ]
        self._formula = (
            check_formula(spec["formula"], names={p[0] for p in self._parts}) if spec["formula"] else None
        )

    def _score(self, row: dict, completion: str) -> ScoreResult:
        return self.score_batch([row], [completion])[0]

    def score_batch(self, rows: list[dict], completions: list[str]) -> list[ScoreResult]:
        if len(rows) != len(completions):
            raise ValueError(f"{len(rows)} rows but {len(completions)} completions")
        # Each part scores the whole batch at once, so sandboxed parts make one round trip per batch.
        per_part = [
            (name, weight, scorer.score_batch(rows, completions)) for name, weight, scorer in self._parts
        ]
        return [
            self._combine([(name, weight, results[i]) for name, weight, results in per_part])
            for i in range(len(rows))
        ]

    def _combine(self, parts: list[tuple[str, float, ScoreResult]]) -> ScoreResult:
        values = {name: result.score for name, _, result in parts}
        reasons = "; ".join(f"{name}: {shorten(result.reason, 100)}" for name, _, result in parts)
        counted = [(name, weight, result.score) for name, weight, result in parts if weight > 0]
        mode = self.spec["mode"]
        if mode == "formula":
            try:
                assert self._formula is not None  # mode formula: checked when the composite was built
                score = evaluate(self._formula, values)
            except FormulaError as exc:
                failed = ScoreResult(0.0, values, f"formula {exc}; {reasons}")
                return _with_tampering(failed, parts, formula=True)
        elif mode == "weighted_sum":
            total = sum(weight for _, weight, _ in counted)
            score = sum(weight * value for _, weight, value in counted) / total
        elif mode == "all_of":
            failing = [name for name, _, value in counted if value < self.spec["pass_threshold"]]
            score = 0.0 if failing else 1.0
            if failing:
                reasons = f"not passed: {', '.join(failing)}; {reasons}"
        else:
            score = min(value for _, _, value in counted)
        return _with_tampering(ScoreResult(score, values, reasons), parts, formula=mode == "formula")


def _with_tampering(
    combined: ScoreResult, parts: list[tuple[str, float, ScoreResult]], *, formula: bool
) -> ScoreResult:
    """``combined`` with the tampering part of its parts' results: absent when no part runs code, 0.0 for an
    honest sample; on tampering, the first offender's "tampering: <what>" in front of the reason, and a
    score of 0 when an offender counts toward the score."""
    flags = [result.parts[TAMPERING_PART] for _, _, result in parts if TAMPERING_PART in result.parts]
    if not flags:
        return combined
    flagged = {**combined.parts, TAMPERING_PART: max(flags)}
    offenders = [(weight, result) for _, weight, result in parts if is_tampering(result)]
    if not offenders:
        return ScoreResult(combined.score, flagged, combined.reason)
    counted = any(formula or weight > 0 for weight, _ in offenders)
    reason = f"{TAMPERING_PREFIX}{tampering_what(offenders[0][1])}; {combined.reason}"
    return ScoreResult(0.0 if counted else combined.score, flagged, reason)
