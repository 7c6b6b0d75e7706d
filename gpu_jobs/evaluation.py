"""Held-out evaluation with the job's own verifiers: greedy completions scored per domain.

A job evaluates its base model before the first step, every ``eval_steps`` and at the end, so the job page
and the dashboards can put the base model and each checkpoint side by side, domain by domain.
"""

import math
from collections import defaultdict
from typing import Any

from gpu_jobs.rewards.base import BatchScorer

DEFAULT_DOMAIN = "all"


def greedy_completions(
    *, model: Any, tokenizer: Any, prompts: list[str], max_new_tokens: int = 8, batch_size: int = 256
) -> list[str]:
    """Greedy (deterministic) completions of plain-text ``prompts``, special tokens dropped, not stripped.

    Preconditions: ``model`` is a transformers causal LM and ``tokenizer`` its tokenizer with a pad token.
    The model is left in eval mode; the tokenizer's padding side is restored afterwards.
    """
    import torch

    model.eval()
    saved_side = tokenizer.padding_side
    # Decoder-only generation continues from the last position, so the padding has to be on the left.
    tokenizer.padding_side = "left"
    completions: list[str] = []
    try:
        for start in range(0, len(prompts), batch_size):
            encoded = tokenizer(prompts[start : start + batch_size], return_tensors="pt", padding=True)
            encoded = {key: value.to(model.device) for key, value in encoded.items()}
            with torch.no_grad():
                output = model.generate(
                    **encoded,
                    max_new_tokens=max_new_tokens,
                    do_sample=False,
                    pad_token_id=tokenizer.pad_token_id,
                    eos_token_id=tokenizer.eos_token_id,
                )
            new_tokens = output[:, encoded["input_ids"].shape[1] :]
            completions.extend(tokenizer.batch_decode(new_tokens, skip_special_tokens=True))
    finally:
        tokenizer.padding_side = saved_side
    return completions


def evaluate(
    *,
    model: Any,
    tokenizer: Any,
    rows: list[dict],
    scorers: dict[str, BatchScorer],
    weights: dict[str, float],
    max_new_tokens: int,
) -> dict[str, float]:
    """Mean weighted score per domain (rows without a "domain" count as "all"), each in [0, 1] when every
    verifier scores in [0, 1]: the weighted sum is divided by the total weight. Keys: ``eval/<domain>``,
    plus ``eval/mean`` over every row.

    Preconditions: ``rows`` is non-empty; every row is scored by verifiers whose weights sum above 0 (a row
    no verifier scores counts 0).
    """
    completions = greedy_completions(
        model=model,
        tokenizer=tokenizer,
        prompts=[row["prompt"] for row in rows],
        max_new_tokens=max_new_tokens,
    )
    # A verifier routed to other domains leaves a row unscored (NaN): a row's mean is over the verifiers that
    # scored it, so each domain is judged by its own verifiers.
    sums = [0.0] * len(rows)
    row_weights = [0.0] * len(rows)
    for name, scorer in scorers.items():
        for index, result in enumerate(scorer.score_batch(rows, completions)):
            if not math.isnan(result.score):
                sums[index] += weights[name] * result.score
                row_weights[index] += weights[name]
    totals = [total / weight if weight > 0 else 0.0 for total, weight in zip(sums, row_weights, strict=True)]
    by_domain: dict[str, list[float]] = defaultdict(list)
    for row, total in zip(rows, totals, strict=True):
        by_domain[str(row.get("domain") or DEFAULT_DOMAIN)].append(total)
    scores = {f"eval/{domain}": sum(values) / len(values) for domain, values in sorted(by_domain.items())}
    scores["eval/mean"] = sum(totals) / len(totals)
    return scores
