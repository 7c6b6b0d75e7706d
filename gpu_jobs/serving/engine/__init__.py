"""The CPU generation engines behind the server, one per tier, each on a single worker thread.

- ``standard``: plain ``model.generate``, one sequence at a time (``sequential``).
- ``turbo``: the same with prompt-lookup decoding, or assisted generation with a draft model (``sequential``).
- ``batch``: continuous batching of up to ``max_batch`` sequences with a per-row KV cache (``batch``, ``kv``).

Every tier reuses the keys and values of prompt prefixes that requests share (``prefix``: bounded in bytes,
least recently used out, keyed by model and tokens), except turbo with a draft model.

Requests enter through ``Engine.submit``; the worker thread reports progress through ``Job.emit`` as
``Delta`` and ``Finished`` events (or ``Failed``). ``Engine.admit`` bounds the requests held at once (queued
plus running). Importing this package does not import torch: a tier's module is loaded when the engine starts.
"""

from gpu_jobs.serving.engine.core import TIERS, Engine, EngineConfig
from gpu_jobs.serving.engine.events import Delta, Failed, Finished, Job, Sequence
from gpu_jobs.serving.engine.text import TextTracker

__all__ = ["TIERS", "Delta", "Engine", "EngineConfig", "Failed", "Finished", "Job", "Sequence", "TextTracker"]
