"""Held-out evaluation with the job's own verifiers: greedy completions scored per domain.

A job evaluates its base model before the first step, every ``eval_steps`` and at the end, so the job page
and the dashboards can put the base model and each checkpoint side by side, domain by domain.
"""

import math
from collections import defaultdict
from typing import Any

from gpu_jobs.rewards.base import BatchScorer

DEFAULT_DOMAIN = "all"


# Prompt tokens per generation batch: long prompts go in smaller batches so that their KV cache stays bounded.
BATCH_TOKENS = 65_536


def greedy_completions(
    *,
    model: Any,
    tokenizer: Any,
    prompts: list[str],
    max_new_tokens: int = 8,
    batch_size: int = 256,
    batch_tokens: int = BATCH_TOKENS,
) -> list[str]:
    """Greedy (deterministic) completions of plain-text ``prompts``, special tokens dropped, not stripped,
    in the order of ``prompts``. Prompts are batched by length (at most ``batch_size`` prompts and about
    ``batch_tokens`` padded tokens a batch), so a long prompt does not pad a batch of short ones to its size.

    Preconditions: ``model`` is a transformers causal LM and ``tokenizer`` its tokenizer with a pad token.
    The model is left in eval mode; the tokenizer's padding side is restored afterwards.
    """
    import torch

    model.eval()
    saved_side = tokenizer.padding_side
    # Decoder-only generation continues from the last position, so the padding has to be on the left.
    tokenizer.padding_side = "left"
    completions: list[str] = [""] * len(prompts)
    sizes = [len(ids) for ids in tokenizer(prompts, add_special_tokens=True)["input_ids"]] if prompts else []
    order = sorted(range(len(prompts)), key=lambda index: sizes[index])
    batches: list[list[int]] = []
    for index in order:
        width = sizes[index] + max_new_tokens
        if batches and len(batches[-1]) < batch_size and (len(batches[-1]) + 1) * width <= batch_tokens:
            batches[-1].append(index)
        else:
            batches.append([index])
    try:
        for batch in batches:
            encoded = tokenizer([prompts[i] for i in batch], return_tensors="pt", padding=True)
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
            for index, text in zip(
                batch, tokenizer.batch_decode(new_tokens, skip_special_tokens=True), strict=True
            ):
                completions[index] = text
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
    lengths: list[int] | None = None,
    bounds: list[int] | None = None,
) -> dict[str, float]:
    """Mean weighted score per domain (rows without a "domain" count as "all"), each in [0, 1] when every
    verifier scores in [0, 1]: the weighted sum is divided by the total weight. Keys: ``eval/<domain>``,
    plus ``eval/mean`` over every row.

    With ``lengths`` (each row's prompt length in tokens) and ``bounds`` (the buckets' upper bounds, from
    ``length_buckets``) the same scores by prompt length too: ``eval_length/<bound>/<domain>`` and
    ``eval_length/<bound>/mean``, and the rows of each, ``eval_length_rows/<bound>`` (see ``by_length``).

    Each verifier's own mean per domain too, over the rows it scored: ``eval_verifier/<name>/<domain>`` and
    ``eval_verifier/<name>/mean`` (a domain's own verifier is its held-out accuracy; a format verifier's shows
    how well the format is kept).

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
    per_verifier: dict[str, float] = {}
    for name, scorer in scorers.items():
        own: dict[str, list[float]] = defaultdict(list)
        for index, result in enumerate(scorer.score_batch(rows, completions)):
            if not math.isnan(result.score):
                sums[index] += weights[name] * result.score
                row_weights[index] += weights[name]
                own[str(rows[index].get("domain") or DEFAULT_DOMAIN)].append(result.score)
                own["mean"].append(result.score)
        per_verifier.update(
            {f"eval_verifier/{name}/{domain}": sum(v) / len(v) for domain, v in sorted(own.items())}
        )
    totals = [total / weight if weight > 0 else 0.0 for total, weight in zip(sums, row_weights, strict=True)]
    by_domain: dict[str, list[float]] = defaultdict(list)
    for row, total in zip(rows, totals, strict=True):
        by_domain[str(row.get("domain") or DEFAULT_DOMAIN)].append(total)
    scores = {f"eval/{domain}": sum(values) / len(values) for domain, values in sorted(by_domain.items())}
    scores["eval/mean"] = sum(totals) / len(totals)
    scores.update(per_verifier)
    if lengths is not None and bounds:
        scores.update(by_length(rows=rows, totals=totals, lengths=lengths, bounds=bounds))
    return scores


def length_buckets(lengths: list[int], *, stage_bounds: list[int] | None = None, most: int = 8) -> list[int]:
    """Upper bounds (in tokens) of the buckets held-out prompts are scored in: a length curriculum's stage
    bounds when the job has one (the last one raised to the longest prompt), else powers of two from the
    shortest prompt's to the longest's, merged from the short end down to ``most`` buckets. Empty when
    there are no lengths."""
    if not lengths:
        return []
    longest = max(lengths)
    if stage_bounds:
        bounds = sorted(set(stage_bounds))
        bounds[-1] = max(bounds[-1], longest)
        return bounds
    bound = 1
    while bound < min(lengths):
        bound *= 2
    bounds = [bound]
    while bounds[-1] < longest:
        bounds.append(bounds[-1] * 2)
    return bounds[-most:]


def bucket_of(length: int, bounds: list[int]) -> int:
    """The bucket's upper bound for a prompt of ``length`` tokens (past the last: the last)."""
    for bound in bounds:
        if length <= bound:
            return bound
    return bounds[-1]


def by_length(
    *, rows: list[dict], totals: list[float], lengths: list[int], bounds: list[int]
) -> dict[str, float]:
    """Mean score per (length bucket, domain) and per bucket over every row, with each bucket's row count;
    buckets without a row are left out."""
    groups: dict[tuple[int, str], list[float]] = defaultdict(list)
    for row, total, length in zip(rows, totals, lengths, strict=True):
        bound = bucket_of(length, bounds)
        groups[(bound, str(row.get("domain") or DEFAULT_DOMAIN))].append(total)
        groups[(bound, "mean")].append(total)
    out: dict[str, float] = {}
    for (bound, domain), values in sorted(groups.items()):
        out[f"eval_length/{bound}/{domain}"] = sum(values) / len(values)
        if domain == "mean":
            out[f"eval_length_rows/{bound}"] = float(len(values))
    return out
