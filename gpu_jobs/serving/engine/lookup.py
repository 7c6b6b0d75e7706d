"""Prompt-lookup decoding for the turbo tier: a sequence's own context proposes its next tokens.

After each token the longest n-gram at the end of the context (up to ``prompt_lookup_ngram`` tokens) is looked
up earlier in the context, latest occurrence first, and the tokens that followed it there are proposed. One
forward pass checks all of them: a proposal is kept while it is the token the model would have chosen at
that position (greedy: the argmax; sampling: a token drawn from the model's distribution there), and the
first disagreement is replaced by the model's own choice. So the output is exactly what plain decoding gives
(greedy) or a sample from the same distribution (sampling), and output that copies spans of its input
(extraction, editing) advances many tokens per forward pass.

The prompt's first pass starts from its cached prefix, if any (``prefix``), and leaves its blocks cached.

How many tokens to propose adapts per sequence: up to ``prompt_lookup_tokens``, doubled after a proposal
kept whole, halved after one rejected outright (checking many wrong tokens costs about twice a plain step).
"""

from __future__ import annotations

import torch
from transformers import DynamicCache

from gpu_jobs.serving.engine.base import LoadedEngine
from gpu_jobs.serving.engine.events import Delta, Job, Sequence
from gpu_jobs.serving.engine.prefix import remember, reuse
from gpu_jobs.serving.engine.sampling import choose, row_generator
from gpu_jobs.serving.engine.text import TextTracker


def propose(context: list[int], longest_ngram: int, count: int) -> list[int]:
    """Up to ``count`` tokens that followed the latest earlier occurrence of the longest n-gram (at most
    ``longest_ngram`` tokens) that ends ``context``; empty when no n-gram recurs."""
    end = len(context)
    for size in range(min(longest_ngram, end - 1), 0, -1):
        tail = context[end - size :]
        for start in range(end - size - 1, -1, -1):
            if context[start : start + size] == tail:
                return context[start + size : start + size + count]
    return []


def generate_lookup(engine: LoadedEngine, job: Job, sequence: Sequence, tracker: TextTracker) -> None:
    """Generate ``sequence`` until its tracker is done or the job is cancelled, emitting deltas."""
    model, params, config = engine.model, sequence.params, engine.config
    generator = row_generator(params, sequence.index)
    context = list(sequence.prompt_ids)
    cache, cached = reuse(engine, context)  # the prompt's cached prefix: only the rest runs
    if cache is None:
        cache = DynamicCache(config=model.config)
    logits = model(
        input_ids=torch.tensor([context[cached:]]), cache=cache, use_cache=True, logits_to_keep=1
    ).logits[0]
    remember(engine, context, cache)
    budget = config.prompt_lookup_tokens
    while True:
        chosen = choose(logits.float(), [params] * len(logits), [generator] * len(logits), engine.eos_ids)
        # This pass ran the last len(logits) tokens of the context: the last choice, then the proposals.
        proposed = context[len(context) - len(logits) + 1 :]
        kept = 0
        while kept < len(proposed) and int(chosen[kept]) == proposed[kept]:
            kept += 1
        # Tokens fed to the tracker: the kept proposals, then the model's own choice after them.
        new = proposed[:kept] + [int(chosen[kept])]
        del context[len(context) - len(proposed) + kept :]
        if kept < len(proposed):
            cache.crop(-(len(proposed) - kept))
        for token in new:
            delta = tracker.feed(token)
            if delta:
                job.emit(Delta(sequence.index, delta))
            if tracker.done:
                return
        if job.cancelled.is_set():
            return
        if proposed and kept == len(proposed):
            budget = min(config.prompt_lookup_tokens, budget * 2)
        elif proposed and kept == 0:
            budget = max(1, budget // 2)
        context.append(new[-1])
        left = params.max_tokens - tracker.completion_tokens - 1
        guesses = propose(context, config.prompt_lookup_ngram, min(budget, left)) if left > 0 else []
        context += guesses
        step = torch.tensor([[new[-1], *guesses]])
        logits = model(input_ids=step, cache=cache, use_cache=True).logits[0]
