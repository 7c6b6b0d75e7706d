"""Domains of a job's rows and which verifiers score them. Torch-free: the config and the web side use it.

A row's domain is its "domain" column, or ``DEFAULT_DOMAIN`` when it has none. A verifier with a
``domains`` list scores only rows of those domains (the others get no score from it, which TRL leaves out
of that reward function's mean); a verifier without one scores every row.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable

from gpu_jobs.rewards import Scorer, ScoreResult

DEFAULT_DOMAIN = "all"


def row_domain(row: dict) -> str:
    value = row.get("domain")
    return DEFAULT_DOMAIN if value is None or value == "" else str(value)


def domain_counts(rows: Iterable[dict]) -> Counter[str]:
    return Counter(row_domain(row) for row in rows)


def verifier_applies(verifier: dict, domain: str) -> bool:
    domains = verifier.get("domains")
    return not domains or domain in domains


def domains_without_verifier(domains: Iterable[str], verifiers: list[dict]) -> list[str]:
    """Domains that no verifier with a weight above 0 scores: their rows could never be rewarded."""
    weighted = [v for v in verifiers if float(v.get("weight", 0)) > 0]
    return sorted(d for d in set(domains) if not any(verifier_applies(v, d) for v in weighted))


def check_domain_weights(weights: dict, domains: Iterable[str], *, tolerance: float = 1e-6) -> None:
    """Raise ValueError("domain_weights...: why") unless ``weights`` is empty (every domain weighs the same)
    or gives every domain of the data a number >= 0, names no other domain, and sums to 1."""
    if not isinstance(weights, dict):
        raise ValueError("domain_weights: must be an object {domain: weight}")
    if not weights:
        return
    present = set(domains)
    for name, weight in weights.items():
        ok = isinstance(weight, int | float) and not isinstance(weight, bool) and weight == weight
        if not ok or weight < 0 or weight == float("inf"):
            raise ValueError(f"domain_weights.{name}: must be a number >= 0, got {weight!r}")
        if name not in present:
            raise ValueError(
                f"domain_weights.{name}: no row of the data has this domain; domains: "
                f"{', '.join(sorted(present))}"
            )
    missing = sorted(present - set(weights))
    if missing:
        raise ValueError(f"domain_weights: no weight for domain(s) {', '.join(missing)} of the data")
    total = sum(float(w) for w in weights.values())
    if abs(total - 1.0) > tolerance:
        raise ValueError(f"domain_weights: the weights must sum to 1, they sum to {total:g}")


# The score of a row a verifier does not apply to: NaN, which TRL treats as "no reward from this function"
# (left out of the weighted sum and of the function's mean), like a reward function returning None.
NOT_SCORED = ScoreResult(score=math.nan, reason="")


def is_scored(result: ScoreResult) -> bool:
    return not math.isnan(result.score)


class DomainScorer:
    """Routes rows to a verifier by domain: scores the rows of ``domains`` (every row when empty) and gives
    the others ``NOT_SCORED``, so a batch mixing domains is checked by each domain's own verifiers only."""

    def __init__(self, scorer: Scorer, domains: Iterable[str] | None) -> None:
        self.scorer = scorer
        self.domains = frozenset(domains or ())

    def score_batch(self, rows: list[dict], completions: list[str]) -> list[ScoreResult]:
        if not self.domains:
            return self.scorer.score_batch(rows, completions)
        chosen = [index for index, row in enumerate(rows) if row_domain(row) in self.domains]
        results = [NOT_SCORED] * len(rows)
        if chosen:
            scored = self.scorer.score_batch([rows[i] for i in chosen], [completions[i] for i in chosen])
            for index, result in zip(chosen, scored, strict=True):
                results[index] = result
        return results

    def score(self, row: dict, completion: str) -> ScoreResult:
        return self.score_batch([row], [completion])[0]
