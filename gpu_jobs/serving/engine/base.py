"""What the engine (core.py) and its tiers' worker loops (sequential.py, batch.py, lookup.py) share.

The engine picks a tier's loop when it starts and hands itself over; a loop reads only what `LoadedEngine`
names, so the tiers depend on this module and not on the engine that imports them.
"""

from __future__ import annotations

import queue
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from gpu_jobs.serving.engine.events import Job

TIERS = ("standard", "turbo", "batch")
DEFAULT_PREFIX_CACHE_MB = 512


@dataclass
class EngineConfig:
    tier: str
    max_concurrency: int = 16
    max_model_len: int | None = None  # None: the model's max_position_embeddings
    prompt_lookup_tokens: int = 32  # turbo: most tokens proposed per step
    prompt_lookup_ngram: int = 3  # turbo: longest n-gram matched against the context
    draft_model: Path | None = None
    max_batch: int = 64  # batch: most sequences decoding together (throughput grows to 64 on 2 CPU cores)
    # Prompt prefixes' keys and values kept for reuse (prefix.py), in bytes; 0 turns prefix caching off.
    prefix_cache_bytes: int = DEFAULT_PREFIX_CACHE_MB * 1024 * 1024


class LoadedEngine(Protocol):
    """An engine whose model is loaded, as a tier's worker loop sees it (core.Engine is one)."""

    config: EngineConfig
    model: Any
    assistant: Any  # turbo's draft model, or None
    tokenizer: Any
    context_len: int
    eos_ids: set[int]
    pad_id: int
    prefix_cache: Any  # prefix.PrefixCache, or None when prefix caching is off
    model_key: str  # what the prefix cache keys this model's blocks by
    jobs: queue.Queue[Job | None]  # jobs in arrival order, then None to stop
