"""What the server hands the engine (``Job`` of ``Sequence``) and what the engine reports back (events)."""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field

from gpu_jobs.serving.protocol import SamplingParams


@dataclass(frozen=True)
class Delta:
    index: int
    text: str


@dataclass(frozen=True)
class Finished:
    index: int
    finish_reason: str  # "stop" or "length"
    completion_tokens: int


@dataclass(frozen=True)
class Failed:
    message: str


@dataclass
class Sequence:
    """One choice to generate: a prompt's token ids and how to sample."""

    index: int
    prompt_ids: list[int]
    params: SamplingParams


@dataclass
class Job:
    """One request's sequences; ``emit`` is called from the worker thread (it must be thread-safe)."""

    sequences: list[Sequence]
    emit: Callable[[Delta | Finished | Failed], object]  # what it returns is ignored
    cancelled: threading.Event = field(default_factory=threading.Event)
