"""Difficulty profiling: how often the base model solves each prompt, measured before training.

For each prompt, ``k`` completions are sampled at the job's temperature and scored by the prompt's
verifiers; a completion passes when every weighted verifier that scores the row gives it full marks (the
``pass_rate`` metric's rule). A prompt solved by all ``k`` or by none of them gives GRPO no signal (every
advantage in its group is zero), so it is dropped; the rest are ordered easy to hard (highest pass rate
first), the curriculum the domain sampler then follows.
"""

from __future__ import annotations

import math
import random
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

from gpu_jobs.domains import row_domain


@dataclass
class Profile:
    """``rates[i]``: share of the k samples of ``profiled[i]`` (a row index) that passed."""

    k: int
    profiled: list[int]
    rates: list[float]
    order: list[int] = field(default_factory=list)  # kept row indices, easy to hard

    @property
    def always(self) -> int:
        return sum(rate >= 1.0 for rate in self.rates)

    @property
    def never(self) -> int:
        return sum(rate <= 0.0 for rate in self.rates)

    def summary(self, rows: list[dict]) -> dict:
        """A JSON-ready summary, overall and per domain: profiled, kept, dropped as always or never solved,
        mean pass rate of the profiled prompts and mean pass@k (solved at least once in k)."""
        per_domain: dict[str, list[float]] = defaultdict(list)
        for index, rate in zip(self.profiled, self.rates, strict=True):
            per_domain[row_domain(rows[index])].append(rate)

        def block(rates: list[float]) -> dict:
            return {
                "profiled": len(rates),
                "kept": sum(0.0 < r < 1.0 for r in rates),
                "dropped_always_solved": sum(r >= 1.0 for r in rates),
                "dropped_never_solved": sum(r <= 0.0 for r in rates),
                "mean_pass_rate": round(sum(rates) / len(rates), 4) if rates else 0.0,
                "pass_at_k": round(sum(r > 0 for r in rates) / len(rates), 4) if rates else 0.0,
            }

        return {
            "k": self.k,
            **block(self.rates),
            "domains": {domain: block(rates) for domain, rates in sorted(per_domain.items())},
        }


def sample_completions(
    *,
    model: Any,
    tokenizer: Any,
    prompts: list[str],
    k: int,
    max_new_tokens: int,
    temperature: float,
    seed: int,
    completions_per_batch: int = 512,
) -> list[list[str]]:
    """``k`` sampled completions of each prompt (``out[i][j]``: sample j of prompt i), seeded."""
    import torch

    model.eval()
    saved_side = tokenizer.padding_side
    tokenizer.padding_side = "left"
    generator_state = torch.random.get_rng_state()
    torch.manual_seed(seed)
    out: list[list[str]] = []
    per_batch = max(1, completions_per_batch // k)
    try:
        for start in range(0, len(prompts), per_batch):
            chunk = prompts[start : start + per_batch]
            encoded = tokenizer(chunk, return_tensors="pt", padding=True)
            encoded = {key: value.to(model.device) for key, value in encoded.items()}
            with torch.no_grad():
                output = model.generate(
                    **encoded,
                    max_new_tokens=max_new_tokens,
                    do_sample=True,
                    temperature=temperature,
                    top_k=0,
                    top_p=1.0,
                    num_return_sequences=k,
                    pad_token_id=tokenizer.pad_token_id,
                    eos_token_id=tokenizer.eos_token_id,
                )
            texts = tokenizer.batch_decode(
                output[:, encoded["input_ids"].shape[1] :], skip_special_tokens=True
            )
            out.extend(texts[i * k : (i + 1) * k] for i in range(len(chunk)))
    finally:
        tokenizer.padding_side = saved_side
        # The training run's own sampling must not depend on whether the job was profiled.
        torch.random.set_rng_state(generator_state)
    return out


def profile_rows(
    *,
    model: Any,
    tokenizer: Any,
    rows: list[dict],
    scorers: dict[str, Any],
    weights: dict[str, float],
    k: int,
    max_new_tokens: int,
    temperature: float,
    seed: int = 0,
    max_prompts: int = 0,
) -> Profile:
    """Profile ``rows`` (a seeded sample of ``max_prompts`` of them when 0 < max_prompts < len(rows)).

    Preconditions: ``k`` >= 2; ``rows`` have a text "prompt"; ``scorers`` may be routed by domain (a NaN
    score means "not this verifier's row").
    """
    indices = list(range(len(rows)))
    if 0 < max_prompts < len(rows):
        indices = sorted(random.Random(seed).sample(indices, max_prompts))
    samples = sample_completions(
        model=model,
        tokenizer=tokenizer,
        prompts=[rows[i]["prompt"] for i in indices],
        k=k,
        max_new_tokens=max_new_tokens,
        temperature=temperature,
        seed=seed,
    )
    flat_rows = [rows[i] for i in indices for _ in range(k)]
    flat_texts = [text for group in samples for text in group]
    passed = [True] * len(flat_rows)
    for name, scorer in scorers.items():
        if weights.get(name, 0.0) <= 0:
            continue
        for position, result in enumerate(scorer.score_batch(flat_rows, flat_texts)):
            if not math.isnan(result.score) and result.score < 1.0:
                passed[position] = False
    rates = [sum(passed[i * k : (i + 1) * k]) / k for i in range(len(indices))]
    kept = [(rate, index) for index, rate in zip(indices, rates, strict=True) if 0.0 < rate < 1.0]
    # Easy to hard; ties keep the rows' order, so the curriculum is reproducible.
    kept.sort(key=lambda pair: (-pair[0], pair[1]))
    return Profile(k=k, profiled=indices, rates=rates, order=[index for _, index in kept])
