"""The standard and turbo tiers: one sequence at a time through ``model.generate`` (a CPU has no spare cores
to share between sequences).

standard is plain generation. turbo is prompt-lookup decoding (``gpu_jobs.serving.engine.lookup``): n-grams
of the context are proposed as the next tokens and checked in one forward pass, so output that copies spans
of its input (extraction, editing) advances several tokens a step; with a draft model configured, assisted
generation (``model.generate(assistant_model=...)``) instead. Either way the output is the one plain
generation gives (greedy) or a sample from the same distribution (sampling).
"""

from __future__ import annotations

import logging
from typing import Any

from gpu_jobs.serving.engine.base import LoadedEngine
from gpu_jobs.serving.engine.events import Delta, Failed, Finished, Job, Sequence
from gpu_jobs.serving.engine.lookup import generate_lookup
from gpu_jobs.serving.engine.packed import pack_linears
from gpu_jobs.serving.engine.text import TextTracker

logger = logging.getLogger(__name__)


def serve(engine: LoadedEngine) -> None:
    """The worker loop: jobs in arrival order, each one's sequences in turn, until ``None``."""
    if engine.config.tier == "turbo":  # verifying proposed tokens multiplies a few rows at a time
        pack_linears(engine.model)
    while (job := engine.jobs.get()) is not None:
        for sequence in job.sequences:
            if job.cancelled.is_set():
                break
            try:
                generate_one(engine, job, sequence)
            except Exception as error:  # noqa: BLE001 - the request fails, the server lives on
                logger.exception("generation failed")
                job.emit(Failed(f"generation failed: {type(error).__name__}: {error}"))
                break


def generate_one(engine: LoadedEngine, job: Job, sequence: Sequence) -> None:
    """Generate one sequence, emitting its deltas as they come and then ``Finished``."""
    tracker = TextTracker(engine.tokenizer, sequence.params, engine.eos_ids)
    if engine.config.tier == "turbo" and engine.assistant is None:
        generate_lookup(engine, job, sequence, tracker)
    else:
        _generate(engine, job, sequence, tracker)
    delta = tracker.stop("length")  # generation stopped on its own: max_tokens reached, or cancelled
    if delta:
        job.emit(Delta(sequence.index, delta))
    job.emit(Finished(sequence.index, tracker.finish_reason or "length", tracker.completion_tokens))


def _generate(engine: LoadedEngine, job: Job, sequence: Sequence, tracker: TextTracker) -> None:
    """``model.generate``: plain, or assisted by the draft model."""
    import torch
    from transformers import DynamicCache, GenerationConfig, StoppingCriteria, StoppingCriteriaList
    from transformers.generation.streamers import BaseStreamer

    from gpu_jobs.serving.engine.prefix import remember, reuse

    index = sequence.index

    class Streamer(BaseStreamer):
        prompt_seen = False

        def put(self, value: Any) -> None:
            if not self.prompt_seen:  # generate() first hands over the prompt
                self.prompt_seen = True
                return
            for token in value.reshape(-1).tolist():
                delta = tracker.feed(int(token))
                if delta:
                    job.emit(Delta(index, delta))
                if tracker.done:
                    break

        def end(self) -> None:
            pass

    class StopWhenDone(StoppingCriteria):
        def __call__(self, input_ids: Any, scores: Any, **kwargs: Any) -> Any:
            stop = tracker.done or job.cancelled.is_set()
            return torch.full((input_ids.shape[0],), stop, dtype=torch.bool)

    params = sequence.params
    generation = GenerationConfig(
        max_new_tokens=params.max_tokens,
        do_sample=not params.greedy,
        temperature=params.temperature if not params.greedy else None,
        top_p=params.top_p if not params.greedy else None,
        top_k=None,
        eos_token_id=sorted(engine.eos_ids),
        pad_token_id=engine.pad_id,
        # ignore_eos: EOS is masked until max_tokens, the count at which the tracker stops.
        min_new_tokens=params.max_tokens if params.ignore_eos else None,
    )
    extra: dict[str, Any] = {}
    if engine.assistant is not None:
        extra["assistant_model"] = engine.assistant
    elif engine.prefix_cache is not None:
        # Starts from the cached prefix, if any: generate() runs only the tokens the cache lacks.
        cache, _ = reuse(engine, sequence.prompt_ids)
        extra["cache"] = cache if cache is not None else DynamicCache(config=engine.model.config)
    if params.seed is not None:
        torch.manual_seed(params.seed + sequence.index)
    input_ids = torch.tensor([sequence.prompt_ids])
    engine.model.generate(
        input_ids=input_ids,
        attention_mask=torch.ones_like(input_ids),
        generation_config=generation,
        streamer=Streamer(),
        stopping_criteria=StoppingCriteriaList([StopWhenDone()]),
        **extra,
    )
    if "cache" in extra:  # its first columns are the prompt's (generation only appends)
        remember(engine, sequence.prompt_ids, extra["cache"])
