"""Verifier types by name, and the two entry points: validate a spec, build a scorer from it.

The table itself (VERIFIER_TYPES) and the per-spec steps (validate_spec, construct) live in base.py, which a
composite imports for its parts; this module imports every type and fills the table.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from gpu_jobs.rewards.base import VERIFIER_TYPES, Scorer, construct, validate_spec
from gpu_jobs.rewards.code_tests import CodeTests
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
from gpu_jobs.rewards.render import Render
from gpu_jobs.rewards.reward_model import RewardModel
from gpu_jobs.rewards.similarity import TextSimilarity
from gpu_jobs.rewards.spreadsheet import Spreadsheet
from gpu_jobs.rewards.sql_result import SqlResult
from gpu_jobs.rewards.table import TableMatch

__all__ = ["VERIFIER_TYPES", "build_scorer", "construct", "slow_to_score", "spec_types", "validate_spec"]

if TYPE_CHECKING:
    from gpu_jobs.rewards.outbound import Outbound
    from sandboxes.client import SandboxClient

VERIFIER_TYPES.update(
    (cls.type_name, cls)
    for cls in (
        ExactMatch,
        RegexMatch,
        Numeric,
        MathEquivalence,
        JsonCheck,
        TableMatch,
        SqlResult,
        Render,
        Spreadsheet,
        Keywords,
        FormatRules,
        TextSimilarity,
        EmbeddingSimilarity,
        PythonTests,
        CodeTests,
        CustomPython,
        ModelJudge,
        RewardModel,
        Composite,
    )
)
VERIFIER_TYPES[ReasoningGym.type_name] = ReasoningGym  # domain packs (anneal.datasets.pack_catalogue)


def build_scorer(
    spec: dict, *, sandbox: SandboxClient | None = None, outbound: Outbound | None = None
) -> Scorer:
    """A scorer for `spec` (validated here). Types that run code use `sandbox`, or a local one when None.

    Types that call out (model_judge) reach only what `outbound` allows, with its secrets; None allows nothing.
    """
    clean = validate_spec(spec)
    return construct(clean, sandbox=sandbox, outbound=outbound)


def spec_types(spec: dict) -> set[str]:
    """The verifier types a spec uses: its own and, for a composite, every part's, however deep."""
    kinds = {spec.get("type", "")}
    for part in spec.get("parts") or []:
        kinds |= spec_types(part.get("spec") or {})
    return kinds


def slow_to_score(spec: dict) -> bool:
    """Whether a verifier (a composite: any of its parts) runs code in a sandbox, calls out or runs a model:
    checks of tens of milliseconds to seconds each, which a training step would wait for."""
    return any(kind in VERIFIER_TYPES and VERIFIER_TYPES[kind].slow for kind in spec_types(spec))
