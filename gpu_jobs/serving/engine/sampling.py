"""Choosing the next token of each row of a batch from its logits: greedy or temperature/top-p sampling."""

from __future__ import annotations

from typing import Any

from gpu_jobs.serving.protocol import SamplingParams


def row_generator(params: SamplingParams, index: int) -> Any:
    """A torch generator for one sampled sequence (seeded with ``seed + index`` when a seed is given, as the
    sequential tiers do); None for a greedy one."""
    import torch

    if params.greedy:
        return None
    generator = torch.Generator()
    if params.seed is not None:
        generator.manual_seed(params.seed + index)
    else:
        generator.seed()
    return generator


def choose(logits: Any, params: list[SamplingParams], generators: list[Any], eos_ids: set[int]) -> Any:
    """The next token of every row. ``logits`` is a float tensor [rows, vocab] (changed in place: EOS is
    masked for rows with ``ignore_eos``); ``params`` and ``generators`` have one entry per row."""
    import torch

    if any(p.ignore_eos for p in params):
        blocked = torch.tensor([p.ignore_eos for p in params])
        for eos in eos_ids:
            logits[blocked, eos] = float("-inf")
    tokens = logits.argmax(dim=-1)
    for row, (p, generator) in enumerate(zip(params, generators, strict=True)):
        if p.greedy:
            continue
        probs = torch.softmax(logits[row] / p.temperature, dim=-1)
        if p.top_p < 1.0:
            sorted_probs, order = probs.sort(descending=True)
            # Keep the smallest prefix whose mass reaches top_p (always at least the top token).
            outside = sorted_probs.cumsum(-1) - sorted_probs >= p.top_p
            sorted_probs[outside] = 0.0
            probs = torch.zeros_like(probs).scatter(0, order, sorted_probs)
        tokens[row] = torch.multinomial(probs, 1, generator=generator)[0]
    return tokens
