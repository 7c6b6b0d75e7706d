"""The regression gate's decision: a checkpoint may not score worse than its base model by more than
``max_drop`` (absolute, scores in 0-1) on any held-out domain of its job or on the general regression set.

The scores come from workers/deploy_gate.py, which evaluates both models; this module only judges them.
"""


def gate_decide(scores: list[dict], *, max_drop: float) -> tuple[bool, list[dict]]:
    """Return (passed, rows): each row of ``scores`` ({"set", "domain", "base", "candidate", "rows"}) with its
    ``drop`` (base - candidate, never negative) and ``blocked`` (drop beyond max_drop) added.

    A tiny tolerance keeps a drop of exactly ``max_drop`` from blocking through float rounding.
    """
    judged = []
    for row in scores:
        drop = max(0.0, float(row["base"]) - float(row["candidate"]))
        judged.append({**row, "drop": round(drop, 6), "blocked": drop > max_drop + 1e-9})
    return not any(row["blocked"] for row in judged), judged
