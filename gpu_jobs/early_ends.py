"""Completions that ended while the rest of their batch is still being generated, for scoring them early.

A batched ``generate`` (transformers) runs until its last completion ends: the ones that sampled an end
token earlier wait, padded, for the longest. ``EndWatch`` sees each decode step's tokens through a forward
pre-hook on the model's input embeddings (called once per step with the tokens sampled the step before,
whatever wraps the model: PEFT, accelerate) and, each time at least ``share`` of the batch has ended since
it last called, calls ``on_ended`` on the generating thread with those rows' completion token ids (up to and
including the end token, as TRL keeps them): completions end in waves, a few decode steps apart. Generation
itself is untouched: the hook only reads.

Used by gpu_jobs.overlap to start the verifiers on those completions while the rest are generated: the same
verdicts, since a verdict is a function of (row, completion), only sooner. vLLM generates outside the
model's modules, so the hook sees nothing there and nothing is scored early.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable
from typing import Any

logger = logging.getLogger(__name__)

# The share of a batch that must have newly ended before those completions are scored early.
EARLY_SHARE = 0.25
# The attribute of a reward function that scores (rows, completion texts) of a step ahead of the step's own
# call to it, keeping the verdicts for that call (gpu_jobs.grpo.RolloutRecorder sets it on its functions).
PRESCORE = "anneal_prescore"


class EndWatch:
    """Context manager: watches ``model``'s next batched generation of ``rows`` completions (the module)."""

    def __init__(
        self,
        model: Any,
        *,
        rows: int,
        end_ids: list[int],
        on_ended: Callable[[dict[int, list[int]]], None],
        share: float = EARLY_SHARE,
    ) -> None:
        self.model = model
        self.rows = rows
        self.end_ids = set(end_ids)
        self.on_ended = on_ended
        self.needed = max(1, math.ceil(rows * share))
        self.tokens: list[list[int]] = [[] for _ in range(rows)]
        self.ended: set[int] = set()
        self.handed: set[int] = set()  # rows already given to on_ended
        self.calls = 0
        self.prompt_length = 0
        self.off = False  # stood aside: a call it cannot read
        self._handle: Any = None

    def __enter__(self) -> EndWatch:
        embeddings = self.model.get_input_embeddings() if self.end_ids else None
        if embeddings is not None:
            self._handle = embeddings.register_forward_pre_hook(self._step)
        return self

    def __exit__(self, *exc: object) -> None:
        if self._handle is not None:
            self._handle.remove()
            self._handle = None

    def _step(self, module: Any, args: tuple) -> None:
        ids = args[0] if args else None
        if self.off or ids is None or getattr(ids, "dim", lambda: 0)() != 2:
            return
        self.calls += 1
        if self.calls == 1:
            self.prompt_length = ids.size(1)  # the prompts' prefill
            return
        # Each later call brings the tokens sampled the step before: one a row with a cache, or the whole
        # sequence so far without one. Any other call (another generation, a prefill in chunks): stand aside.
        if ids.size(0) != self.rows or ids.size(1) not in (1, self.prompt_length + self.calls - 1):
            self.off = True
            return
        for row, token in enumerate(ids[:, -1].tolist()):
            if row in self.ended:
                continue
            self.tokens[row].append(token)
            if token in self.end_ids:
                self.ended.add(row)
        new = self.ended - self.handed
        if len(new) >= self.needed:
            self.handed |= new
            try:
                self.on_ended({row: list(self.tokens[row]) for row in sorted(new)})
            except Exception:  # noqa: BLE001 - the generation goes on; the step scores everything itself
                self.off = True
                logger.warning("Handing over completions that ended early failed; watch off.", exc_info=True)


def early_scorers(reward_funcs: list) -> list[Callable[..., None]]:
    """The PRESCORE functions of those reward functions that have one."""
    found = (getattr(function, PRESCORE, None) for function in reward_funcs)
    return [function for function in found if function is not None]


def score_early(scorers: list[Callable[..., None]], *, rows: list[dict], texts: list[str], step: int) -> None:
    """Score ``texts`` (completions of ``rows``, generation-batch rows of training step ``step``) with each of
    ``scorers`` now; one that fails leaves them to the step's own reward call."""
    for scorer in scorers:
        try:
            scorer(inputs=rows, texts=texts, step=step)
        except Exception:  # noqa: BLE001 - the step's reward call scores them instead
            logger.warning(
                "Scoring completions that ended early failed; the step scores them.", exc_info=True
            )
