"""Verifier types by name, and the two entry points: validate a spec, build a scorer from it."""

from __future__ import annotations

from typing import TYPE_CHECKING

from gpu_jobs.rewards.base import Scorer, SpecError
from gpu_jobs.rewards.composite import Composite
from gpu_jobs.rewards.custom_python import CustomPython
from gpu_jobs.rewards.embedding import EmbeddingSimilarity
from gpu_jobs.rewards.exact_match import ExactMatch
from gpu_jobs.rewards.format_rules import FormatRules
from gpu_jobs.rewards.json_check import JsonCheck
from gpu_jobs.rewards.keywords import Keywords
from gpu_jobs.rewards.math_equiv import MathEquivalence
from gpu_jobs.rewards.model_judge import ModelJudge
from gpu_jobs.rewards.numeric import Numeric
from gpu_jobs.rewards.python_tests import PythonTests
from gpu_jobs.rewards.reasoning_gym import ReasoningGym
from gpu_jobs.rewards.regex_match import RegexMatch
from gpu_jobs.rewards.similarity import TextSimilarity

if TYPE_CHECKING:
    from gpu_jobs.rewards.outbound import Outbound
    from sandboxes.client import SandboxClient

VERIFIER_TYPES: dict[str, type[Scorer]] = {
    cls.type_name: cls
    for cls in (
        ExactMatch,
        RegexMatch,
        Numeric,
        MathEquivalence,
        JsonCheck,
        Keywords,
        FormatRules,
        TextSimilarity,
        EmbeddingSimilarity,
        PythonTests,
        CustomPython,
        ModelJudge,
        Composite,
    )
}
VERIFIER_TYPES[ReasoningGym.type_name] = ReasoningGym  # domain packs (anneal.datasets.pack_catalogue)


def validate_spec(spec: dict) -> dict:
    """The spec with every default filled in; SpecError naming the first wrong field otherwise."""
    if not isinstance(spec, dict):
        raise SpecError("spec", f"must be a JSON object, got {type(spec).__name__}")
    kind = spec.get("type")
    if kind not in VERIFIER_TYPES:
        known = ", ".join(VERIFIER_TYPES)
        raise SpecError("type", f"must be one of {known}, got {kind!r}" if kind else f"is required ({known})")
    return VERIFIER_TYPES[kind].normalise_spec(spec)


def build_scorer(
    spec: dict, *, sandbox: SandboxClient | None = None, outbound: Outbound | None = None
) -> Scorer:
    """A scorer for `spec` (validated here). Types that run code use `sandbox`, or a local one when None.

    Types that call out (model_judge) reach only what `outbound` allows, with its secrets; None allows nothing.
    """
    clean = validate_spec(spec)
    return construct(clean, sandbox=sandbox, outbound=outbound)


def construct(clean: dict, *, sandbox: SandboxClient | None, outbound: Outbound | None) -> Scorer:
    """The scorer for a spec already normalised; `outbound` goes only to the types that take it."""
    cls = VERIFIER_TYPES[clean["type"]]
    if cls.uses_outbound:
        return cls(clean, sandbox=sandbox, outbound=outbound)  # type: ignore[call-arg]
    return cls(clean, sandbox=sandbox)
