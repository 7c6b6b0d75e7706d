"""The CPU generation engines behind the server, one per tier, each on a single worker thread.

- ``standard``: plain ``model.generate``, one sequence at a time (a CPU has no spare cores to share).
- ``turbo``: the same with prompt-lookup decoding (``prompt_lookup_num_tokens``): n-grams of the prompt are
  proposed as the next tokens and checked in one forward pass, so output that copies spans of its input
  (extraction, editing) advances several tokens a step. With ``draft_model`` set, assisted generation with
  that smaller model instead. The output is the one plain generation would give (greedy) or a sample from
  the same distribution (sampling).
- ``batch``: requests arriving within ``batch_window_s`` of each other (up to ``max_batch`` sequences) run
  as one left-padded batch through a hand-written decoding loop with a shared KV cache; finished rows leave
  the batch. Throughput per request goes up, latency per request too.

Requests enter through ``Engine.submit``; the worker thread reports progress through ``Job.emit`` as
``Delta`` and ``Finished`` events. ``Engine.admit`` bounds the requests held at once (queued plus running).
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gpu_jobs.serving.protocol import ApiError, SamplingParams

logger = logging.getLogger(__name__)

TIERS = ("standard", "turbo", "batch")


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
    emit: Callable[[Delta | Finished | Failed], None]
    cancelled: threading.Event = field(default_factory=threading.Event)


class TextTracker:
    """Turns one sequence's tokens into text deltas: stops at EOS, at a stop string (cut before it) or at
    ``max_tokens``; holds back text that may be the start of a stop string or half a UTF-8 character.

    ``completion_tokens`` counts the tokens generated up to the stop, without the EOS token.
    """

    def __init__(self, tokenizer: Any, params: SamplingParams, eos_ids: set[int]) -> None:
        self.tokenizer = tokenizer
        self.params = params
        self.eos_ids = eos_ids
        self.ids: list[int] = []
        self.emitted = 0
        self.finish_reason: str | None = None
        self._hold = max((len(s) for s in params.stop), default=1) - 1

    @property
    def done(self) -> bool:
        return self.finish_reason is not None

    @property
    def completion_tokens(self) -> int:
        return len(self.ids)

    def feed(self, token_id: int) -> str:
        """Add one generated token; return the text now safe to send (maybe empty)."""
        if self.done:
            return ""
        if token_id in self.eos_ids and not self.params.ignore_eos:
            self.finish_reason = "stop"
            return self._flush(self._text())
        self.ids.append(token_id)
        text = self._text()
        cuts = [i for i in (text.find(s) for s in self.params.stop) if i >= 0]
        if cuts:
            self.finish_reason = "stop"
            return self._flush(text[: min(cuts)])
        if len(self.ids) >= self.params.max_tokens:
            self.finish_reason = "length"
            return self._flush(text)
        end = len(text) - self._hold
        while end > self.emitted and text[end - 1] == "\ufffd":
            end -= 1
        if end <= self.emitted:
            return ""
        delta, self.emitted = text[self.emitted : end], end
        return delta

    def _text(self) -> str:
        return self.tokenizer.decode(self.ids, skip_special_tokens=True, clean_up_tokenization_spaces=False)

    def _flush(self, text: str) -> str:
        delta = text[self.emitted :]
        self.emitted = max(self.emitted, len(text))
        return delta


@dataclass
class EngineConfig:
    tier: str
    max_concurrency: int = 16
    max_model_len: int | None = None  # None: the model's max_position_embeddings
    prompt_lookup_tokens: int = 10
    draft_model: Path | None = None
    batch_window_s: float = 0.05
    max_batch: int = 32


class Engine:
    """Loads a model folder and serves generation jobs from one worker thread."""

    def __init__(self, model_dir: Path, config: EngineConfig) -> None:
        if config.tier not in TIERS:
            raise ValueError(f"tier must be one of {TIERS}, got {config.tier!r}")
        self.model_dir = Path(model_dir)
        self.config = config
        self.model: Any = None
        self.tokenizer: Any = None
        self.context_len = 0
        self.eos_ids: set[int] = set()
        self.pad_id = 0
        self.ready = threading.Event()
        self.load_error: str | None = None
        self._jobs: queue.Queue[Job | None] = queue.Queue()
        self._held = 0
        self._held_lock = threading.Lock()
        self._thread: threading.Thread | None = None
        self._assistant: Any = None

    # -- lifecycle -------------------------------------------------------------------------------------
    def start(self) -> None:
        """Load the model and run the worker, both on a background thread (health says 503 until ready)."""
        self._thread = threading.Thread(target=self._main, name=f"engine-{self.config.tier}", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._jobs.put(None)

    def _main(self) -> None:
        try:
            self._load()
        except Exception as error:  # noqa: BLE001 - reported on /health, the process keeps answering
            logger.exception("could not load %s", self.model_dir)
            self.load_error = f"{type(error).__name__}: {error}"
            return
        self.ready.set()
        if self.config.tier == "batch":
            self._batch_loop()
        else:
            self._sequential_loop()

    def _load(self) -> None:
        import torch
        from transformers import AutoModelForCausalLM, AutoTokenizer

        torch.set_grad_enabled(False)
        self.tokenizer = AutoTokenizer.from_pretrained(self.model_dir)
        self.model = AutoModelForCausalLM.from_pretrained(self.model_dir, dtype=torch.float32).eval()
        if self.config.draft_model is not None:
            self._assistant = AutoModelForCausalLM.from_pretrained(
                self.config.draft_model, dtype=torch.float32
            ).eval()
        limit = int(getattr(self.model.config, "max_position_embeddings", 0) or 2048)
        if self.config.max_model_len:
            limit = min(limit, self.config.max_model_len)
        self.context_len = limit
        eos = self.model.generation_config.eos_token_id
        if eos is None:
            eos = self.tokenizer.eos_token_id
        self.eos_ids = {eos} if isinstance(eos, int) else set(eos or ())
        if self.tokenizer.eos_token_id is not None:
            self.eos_ids.add(self.tokenizer.eos_token_id)
        pad = self.tokenizer.pad_token_id
        self.pad_id = pad if pad is not None else next(iter(self.eos_ids), 0)

    # -- admission -------------------------------------------------------------------------------------
    def admit(self) -> None:
        """Hold a slot for one request or raise a 429 ApiError; pair with ``release``."""
        with self._held_lock:
            if self._held >= self.config.max_concurrency:
                raise ApiError(
                    f"this deployment is at its maximum concurrency ({self.config.max_concurrency} requests "
                    "at once); retry shortly",
                    status=429,
                    type="rate_limit_error",
                    code="rate_limit_exceeded",
                )
            self._held += 1

    def release(self) -> None:
        with self._held_lock:
            self._held = max(0, self._held - 1)

    @property
    def held(self) -> int:
        return self._held

    def submit(self, job: Job) -> None:
        self._jobs.put(job)

    # -- standard and turbo ----------------------------------------------------------------------------
    def _sequential_loop(self) -> None:
        while (job := self._jobs.get()) is not None:
            for sequence in job.sequences:
                if job.cancelled.is_set():
                    break
                try:
                    self._generate_one(job, sequence)
                except Exception as error:  # noqa: BLE001 - the request fails, the server lives on
                    logger.exception("generation failed")
                    job.emit(Failed(f"generation failed: {type(error).__name__}: {error}"))
                    break

    def _generate_one(self, job: Job, sequence: Sequence) -> None:
        import torch
        from transformers import GenerationConfig, StoppingCriteria, StoppingCriteriaList
        from transformers.generation.streamers import BaseStreamer

        tracker = TextTracker(self.tokenizer, sequence.params, self.eos_ids)
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
            eos_token_id=sorted(self.eos_ids),
            pad_token_id=self.pad_id,
            # ignore_eos: EOS is masked until max_tokens, the count at which the tracker stops.
            min_new_tokens=params.max_tokens if params.ignore_eos else None,
        )
        extra: dict[str, Any] = {}
        if self.config.tier == "turbo":
            if self._assistant is not None:
                extra["assistant_model"] = self._assistant
            else:
                generation.prompt_lookup_num_tokens = self.config.prompt_lookup_tokens
        if params.seed is not None:
            torch.manual_seed(params.seed + sequence.index)
        input_ids = torch.tensor([sequence.prompt_ids])
        self.model.generate(
            input_ids=input_ids,
            attention_mask=torch.ones_like(input_ids),
            generation_config=generation,
            streamer=Streamer(),
            stopping_criteria=StoppingCriteriaList([StopWhenDone()]),
            **extra,
        )
        if not tracker.done:  # generate stopped on its own: max_new_tokens reached, or cancelled
            tracker.finish_reason = "length"
            delta = tracker._flush(tracker._text())
            if delta:
                job.emit(Delta(index, delta))
        job.emit(Finished(index, tracker.finish_reason or "length", tracker.completion_tokens))

    # -- batch -----------------------------------------------------------------------------------------
    def _batch_loop(self) -> None:
        while (first := self._jobs.get()) is not None:
            jobs = [first]
            count = len(first.sequences)
            deadline = time.monotonic() + self.config.batch_window_s
            stopping = False
            while count < self.config.max_batch:
                left = deadline - time.monotonic()
                if left <= 0:
                    break
                try:
                    more = self._jobs.get(timeout=left)
                except queue.Empty:
                    break
                if more is None:
                    stopping = True
                    break
                jobs.append(more)
                count += len(more.sequences)
            rows = [(job, seq) for job in jobs if not job.cancelled.is_set() for seq in job.sequences]
            try:
                if rows:
                    self._generate_batch(rows)
            except Exception as error:  # noqa: BLE001 - the batch's requests fail, the server lives on
                logger.exception("batch generation failed")
                for job in jobs:
                    job.emit(Failed(f"generation failed: {type(error).__name__}: {error}"))
            if stopping:
                return

    def _generate_batch(self, rows: list[tuple[Job, Sequence]]) -> None:
        import torch

        trackers = [TextTracker(self.tokenizer, seq.params, self.eos_ids) for _, seq in rows]
        generators: list[Any] = []
        for _, seq in rows:
            if seq.params.greedy:
                generators.append(None)
            else:
                generator = torch.Generator()
                if seq.params.seed is not None:
                    generator.manual_seed(seq.params.seed + seq.index)
                else:
                    generator.seed()
                generators.append(generator)

        width = max(len(seq.prompt_ids) for _, seq in rows)
        input_ids = torch.tensor(
            [[self.pad_id] * (width - len(s.prompt_ids)) + s.prompt_ids for _, s in rows]
        )
        mask = torch.tensor([[0] * (width - len(s.prompt_ids)) + [1] * len(s.prompt_ids) for _, s in rows])
        positions = (mask.cumsum(-1) - 1).clamp(min=0)
        out = self.model(
            input_ids=input_ids, attention_mask=mask, position_ids=positions, use_cache=True, logits_to_keep=1
        )
        cache = out.cache
        logits = out.logits[:, -1, :].float()
        next_positions = positions[:, -1] + 1
        active = list(range(len(rows)))
        while active:
            params = [rows[i][1].params for i in active]
            if any(p.ignore_eos for p in params):
                blocked = torch.tensor([p.ignore_eos for p in params])
                for eos in self.eos_ids:
                    logits[blocked, eos] = float("-inf")
            tokens = self._choose(logits, params, [generators[i] for i in active])
            keep = []
            for row, i in enumerate(active):
                job, seq = rows[i]
                tracker = trackers[i]
                delta = tracker.feed(int(tokens[row]))
                if delta:
                    job.emit(Delta(seq.index, delta))
                if job.cancelled.is_set() and not tracker.done:
                    tracker.finish_reason = "length"
                if tracker.done:
                    job.emit(
                        Finished(seq.index, tracker.finish_reason or "length", tracker.completion_tokens)
                    )
                else:
                    keep.append(row)
            if not keep:
                break
            if len(keep) < len(active):
                selected = torch.tensor(keep)
                cache.batch_select_indices(selected)
                mask, next_positions, tokens = mask[selected], next_positions[selected], tokens[selected]
                active = [active[r] for r in keep]
            mask = torch.cat([mask, torch.ones((len(active), 1), dtype=mask.dtype)], dim=1)
            out = self.model(
                input_ids=tokens.unsqueeze(1),
                attention_mask=mask,
                position_ids=next_positions.unsqueeze(1),
                cache=cache,
                use_cache=True,
            )
            cache = out.cache
            logits = out.logits[:, -1, :].float()
            next_positions = next_positions + 1

    @staticmethod
    def _choose(logits: Any, params: list[SamplingParams], generators: list[Any]) -> Any:
        import torch

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
