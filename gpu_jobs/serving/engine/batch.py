"""The batch tier: continuous batching. Sequences join the running batch between decode steps and leave it
as soon as they finish, so a request never waits for a whole batch to drain and the batch stays full while
work is queued.

Between two decode steps the worker takes every queued sequence the batch has room for (``max_batch``),
prefills them in groups of similar prompt length (left-padded, so padding wastes little), chooses each one's
first token, and appends their KV cache to the batch's (``RowsKV``). A decode step then runs every row one
token on. On a CPU a decode step is bound by reading the weights, so 16 rows cost a fraction of 16 steps:
throughput per request goes up, latency per request too.
"""

from __future__ import annotations

import logging
import queue
import time
from collections import deque
from dataclasses import dataclass
from functools import partial
from typing import Any

import torch

from gpu_jobs.serving.engine.base import LoadedEngine
from gpu_jobs.serving.engine.events import Delta, Failed, Finished, Job, Sequence
from gpu_jobs.serving.engine.kv import RowsKV
from gpu_jobs.serving.engine.packed import pack_linears
from gpu_jobs.serving.engine.prefix import remember, reuse
from gpu_jobs.serving.engine.sampling import choose, row_generator
from gpu_jobs.serving.engine.text import TextTracker

logger = logging.getLogger(__name__)

# A prefill group grows while its padded size stays within this factor of its real tokens, and within
# PREFILL_TOKENS padded tokens (one forward pass; a longer prompt goes alone).
PREFILL_PADDING = 1.2
PREFILL_TOKENS = 4096
# An idle batch, once a request arrives, waits up to GATHER_S for the next (and so on, GATHER_MAX_S in all)
# before it prefills them: requests sent together then join together, in one prefill by length and one
# rebuild of the cache, instead of one join (and a rebuild of every row's cache) per arrival.
GATHER_S = 0.02
GATHER_MAX_S = 0.25
# In a join of several sequences, one whose cached prefix is under this share of its prompt is prefilled
# with the others (batched by length) rather than alone from its cache: a shared system prompt saves less than
# a prefill of one row costs against a batched one (SmolLM2, 64 requests: 92 -> 124 tokens/s without it).
REUSE_SHARE = 0.5


@dataclass
class Row:
    job: Job
    sequence: Sequence
    tracker: TextTracker
    generator: Any  # torch.Generator for a sampled row, None for a greedy one


def serve(engine: LoadedEngine) -> None:
    """The worker loop; returns after ``None`` once the sequences it has taken are done."""
    pack_linears(engine.model)
    batch = RunningBatch(engine)
    waiting: deque[tuple[Job, Sequence]] = deque()
    stopping = False
    while True:
        idle = not batch.rows and not waiting
        if idle and stopping:
            return
        gather_until = None  # set once an idle batch got its first request
        while not stopping:
            try:
                if idle:
                    job = engine.jobs.get()
                elif gather_until is not None and len(waiting) < engine.config.max_batch:
                    job = engine.jobs.get(timeout=max(0.0, min(GATHER_S, gather_until - time.monotonic())))
                else:
                    job = engine.jobs.get_nowait()
            except queue.Empty:
                break
            if idle:
                gather_until = time.monotonic() + GATHER_MAX_S
            idle = False
            if job is None:
                stopping = True
            else:
                waiting.extend((job, sequence) for sequence in job.sequences)
        room = engine.config.max_batch - len(batch.rows)
        joining: list[tuple[Job, Sequence]] = []
        while waiting and len(joining) < room:
            job, sequence = waiting.popleft()
            if not job.cancelled.is_set():
                joining.append((job, sequence))
        if joining:
            batch.join(joining)
        if batch.rows:
            batch.step()


def prefill_groups(lengths: list[int]) -> list[list[int]]:
    """Indices into ``lengths`` grouped for prefill: sorted by length, each group's padded size within
    ``PREFILL_PADDING`` of its real tokens and within ``PREFILL_TOKENS``."""
    groups: list[list[int]] = []
    total = 0
    for index in sorted(range(len(lengths)), key=lengths.__getitem__):
        length = lengths[index]
        group = groups[-1] if groups else None
        if group is not None:
            padded = (len(group) + 1) * length  # sorted: this one is the longest so far
            if padded <= PREFILL_PADDING * (total + length) and padded <= PREFILL_TOKENS:
                group.append(index)
                total += length
                continue
        groups.append([index])
        total = length
    return groups


class RunningBatch:
    """The rows decoding together: ``rows[i]`` is row ``i`` of the cache and of ``next_tokens``."""

    def __init__(self, engine: LoadedEngine) -> None:
        self.engine = engine
        self.rows: list[Row] = []
        self.kv = RowsKV()
        self.next_tokens = torch.zeros(0, dtype=torch.long)  # chosen, not yet run through the model

    def join(self, joining: list[tuple[Job, Sequence]]) -> None:
        """Prefill the sequences, emit each one's first token, and add those not done to the batch.

        A sequence whose prompt starts with a cached prefix is prefilled alone from it; of sequences that
        start alike (n > 1, one system prompt), all but the first wait for it to be prefilled and then find
        their shared start cached."""
        logger.debug("joining %d sequences to %d rows", len(joining), len(self.rows))
        for part in _first_of_each_start(joining, self.engine.prefix_cache):
            cold: list[tuple[Job, Sequence]] = []
            for job, seq in part:
                least = int(REUSE_SHARE * len(seq.prompt_ids)) if len(joining) > 1 else 0
                cache, cached = reuse(self.engine, seq.prompt_ids, min_length=least)
                if cache is None:
                    cold.append((job, seq))
                else:
                    self._guarded([(job, seq)], partial(self._prefill_from, cache=cache, cached=cached))
            for group in prefill_groups([len(sequence.prompt_ids) for _, sequence in cold]):
                self._guarded([cold[i] for i in group], self._prefill)

    def _guarded(self, members: list[tuple[Job, Sequence]], prefill: Any) -> None:
        try:
            prefill(
                [
                    Row(job, seq, self._tracker(seq), row_generator(seq.params, seq.index))
                    for job, seq in members
                ]
            )
        except Exception as error:  # noqa: BLE001 - these requests fail, the server lives on
            logger.exception("prefill failed")
            _fail({id(job): job for job, _ in members}.values(), error)

    def step(self) -> None:
        """One decode step of every row; rows that finish (or whose client left) leave the batch."""
        try:
            out = self.engine.model(
                input_ids=self.next_tokens[:, None],
                attention_mask=self.kv.attention_mask(),
                position_ids=self.kv.positions(),
                cache=self.kv.cache,
                use_cache=True,
            )
            self._advance(self.rows, out.logits[:, -1, :].float())
        except Exception as error:  # noqa: BLE001 - the batch's requests fail, the server lives on
            logger.exception("decode step failed")
            _fail({id(row.job): row.job for row in self.rows}.values(), error)
            self.rows, self.kv, self.next_tokens = [], RowsKV(), self.next_tokens[:0]

    def _tracker(self, sequence: Sequence) -> TextTracker:
        return TextTracker(self.engine.tokenizer, sequence.params, self.engine.eos_ids)

    def _prefill(self, rows: list[Row]) -> None:
        pad = self.engine.pad_id
        width = max(len(row.sequence.prompt_ids) for row in rows)
        input_ids = torch.tensor(
            [[pad] * (width - len(r.sequence.prompt_ids)) + r.sequence.prompt_ids for r in rows]
        )
        starts = torch.tensor([width - len(row.sequence.prompt_ids) for row in rows])
        mask = (torch.arange(width)[None, :] >= starts[:, None]).long()
        positions = (mask.cumsum(-1) - 1).clamp(min=0)
        out = self.engine.model(
            input_ids=input_ids, attention_mask=mask, position_ids=positions, use_cache=True, logits_to_keep=1
        )
        for i, row in enumerate(rows):
            remember(self.engine, row.sequence.prompt_ids, out.cache, row=i, start=int(starts[i]))
        self._first_tokens(rows, out.logits, out.cache, starts)

    def _prefill_from(self, rows: list[Row], *, cache: Any, cached: int) -> None:
        """Prefill one sequence (``rows`` is one row) from ``cache``, holding its prompt's first ``cached``
        tokens."""
        [row] = rows
        out = self.engine.model(
            input_ids=torch.tensor([row.sequence.prompt_ids[cached:]]),
            cache=cache,
            use_cache=True,
            logits_to_keep=1,
        )
        remember(self.engine, row.sequence.prompt_ids, cache)
        self._first_tokens([row], out.logits, cache, torch.zeros(1, dtype=torch.long))

    def _first_tokens(self, rows: list[Row], logits: Any, cache: Any, starts: torch.Tensor) -> None:
        """Choose and emit the prefilled rows' first tokens; the rows not done join the batch."""
        tokens = choose(
            logits[:, -1, :].float(),
            [r.sequence.params for r in rows],
            [r.generator for r in rows],
            self.engine.eos_ids,
        )
        going = self._emit(rows, tokens)
        if going:
            kept = torch.tensor(going)
            cache.batch_select_indices(kept)
            self.kv.join(cache, starts[kept])
            self.rows += [rows[i] for i in going]
            self.next_tokens = torch.cat([self.next_tokens, tokens[kept]])

    def _advance(self, rows: list[Row], logits: Any) -> None:
        tokens = choose(
            logits, [r.sequence.params for r in rows], [r.generator for r in rows], self.engine.eos_ids
        )
        going = self._emit(rows, tokens)
        if len(going) < len(rows):
            kept = torch.tensor(going, dtype=torch.long)
            self.kv.keep(kept)
            tokens = tokens[kept]
            self.rows = [rows[i] for i in going]
        self.next_tokens = tokens

    def _emit(self, rows: list[Row], tokens: Any) -> list[int]:
        """Feed each row its token and emit what the client gets; the indices of the rows still going."""
        going = []
        for i, (row, token) in enumerate(zip(rows, tokens.tolist(), strict=True)):
            tracker, index = row.tracker, row.sequence.index
            delta = tracker.feed(token)
            if row.job.cancelled.is_set():
                delta += tracker.stop("length")
            if delta:
                row.job.emit(Delta(index, delta))
            if tracker.done:
                row.job.emit(Finished(index, tracker.finish_reason or "length", tracker.completion_tokens))
            else:
                going.append(i)
        return going


def _first_of_each_start(
    joining: list[tuple[Job, Sequence]], prefix_cache: Any
) -> list[list[tuple[Job, Sequence]]]:
    """``joining`` in two parts: the first sequence of each prompt start (its first cache block), then the
    others; one part, all of it, when prefix caching is off."""
    if prefix_cache is None:
        return [joining]
    size = prefix_cache.block_tokens
    seen: set[tuple[int, ...]] = set()
    first, later = [], []
    for job, sequence in joining:
        ids = sequence.prompt_ids
        start = tuple(ids[:size])
        if len(ids) > size and start in seen:
            later.append((job, sequence))
        else:
            seen.add(start)
            first.append((job, sequence))
    return [first, later] if later else [first]


def _fail(jobs: Any, error: Exception) -> None:
    for job in jobs:
        job.emit(Failed(f"generation failed: {type(error).__name__}: {error}"))
        job.cancelled.set()  # its other sequences are dropped, not run
