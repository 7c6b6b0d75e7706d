"""Django-free, torch-free verifiers: a JSON spec becomes a scorer of (row, completion) pairs.

Cheap checks (exact_match) run in this process; anything that executes code (python_tests) runs in a
sandbox through `sandboxes.SandboxClient`.
"""

from gpu_jobs.rewards.base import Scorer, ScoreResult, SpecError
from gpu_jobs.rewards.registry import VERIFIER_TYPES, build_scorer, slow_to_score, validate_spec

__all__ = [
    "VERIFIER_TYPES",
    "ScoreResult",
    "Scorer",
    "SpecError",
    "build_scorer",
    "slow_to_score",
    "validate_spec",
]
