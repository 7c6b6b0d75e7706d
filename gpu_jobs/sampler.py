"""Multi-domain prompt sampling: which rows a GRPO step trains on, by domain weight.

``DomainWeights`` holds the weights and moves them toward the domains that give a learning signal: a group
(the completions of one prompt) teaches GRPO something only when its pass rate is strictly between 0 and 1,
otherwise every advantage in it is zero. Each domain's signal rate is followed as an exponential moving
average; the adaptive weight of a domain is its base weight times its signal rate, renormalised, and mixed
with a floor so no domain is ever starved (a domain that gives no signal today may give some once the model
has improved elsewhere).

``DomainSampler`` is the torch ``Sampler`` handed to TRL in place of its ``RepeatSampler``: it yields the
same layout (each prompt index ``mini_repeat_count`` times in a row, each batch ``repeat_count`` times), but
picks each prompt's domain by the current weights and draws rows within a domain without replacement, in a
seeded order (or in the order given, for difficulty profiling's easy-to-hard curriculum). With a length
curriculum (gpu_jobs.curriculum) it draws only from the rows of the stage the job is in when the batch is
drawn: the stage moves on after a step, so the next batch drawn is of the next stage's lengths.
"""

from __future__ import annotations

import json
import random
from collections import defaultdict
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from torch.utils.data import Sampler

from gpu_jobs.config import GRPOJobConfig
from gpu_jobs.curriculum import LengthCurriculum
from gpu_jobs.domains import domain_counts, row_domain
from gpu_jobs.sink import EventSink


class DomainWeights:
    """Per-domain sampling weights. Preconditions: ``base`` has at least one domain, weights >= 0 with a
    positive sum; ``floor`` * number of domains <= 1."""

    def __init__(
        self,
        base: dict[str, float],
        *,
        adaptive: bool = False,
        floor: float = 0.05,
        smoothing: float = 0.3,
        prior: float = 0.5,
        state_file: Path | None = None,
    ) -> None:
        total = sum(base.values())
        self.base = {domain: weight / total for domain, weight in base.items()}
        self.adaptive = adaptive
        self.floor = floor
        self.smoothing = smoothing
        # Every domain starts as if half its groups gave signal, so the first observations do not swing it.
        self.signal = dict.fromkeys(self.base, prior)
        self.current = dict(self.base)
        # Kept after every step, so a resumed run goes on with the weights it had adapted.
        self.state_file = state_file
        if state_file is not None and state_file.is_file():
            self.load_state(json.loads(state_file.read_text()))

    def observe(self, groups: dict[str, tuple[int, int]]) -> None:
        """Record one step: ``groups[domain] = (groups with signal, groups)``; domains not drawn keep their
        rate. Recomputes the current weights when adaptive."""
        for domain, (with_signal, count) in groups.items():
            if domain in self.signal and count > 0:
                rate = with_signal / count
                self.signal[domain] += self.smoothing * (rate - self.signal[domain])
        if self.adaptive:
            self.current = self._adapted()
        if self.state_file is not None:
            self.state_file.parent.mkdir(parents=True, exist_ok=True)
            self.state_file.write_text(json.dumps(self.state()))

    def _adapted(self) -> dict[str, float]:
        scores = {domain: self.base[domain] * self.signal[domain] for domain in self.base}
        total = sum(scores.values())
        if total <= 0:
            shaped = dict(self.base)
        else:
            shaped = {domain: score / total for domain, score in scores.items()}
        # A domain whose base weight is 0 stays out; the others share the floor.
        live = [domain for domain, weight in self.base.items() if weight > 0]
        floor = min(self.floor, 1.0 / len(live))
        spare = 1.0 - floor * len(live)
        return {domain: (floor + spare * shaped[domain]) if domain in live else 0.0 for domain in self.base}

    def metrics(self) -> dict[str, float]:
        out = {f"domain_weight/{domain}": weight for domain, weight in self.current.items()}
        out.update({f"domain_signal/{domain}": rate for domain, rate in self.signal.items()})
        return out

    def state(self) -> dict:
        return {"signal": dict(self.signal), "current": dict(self.current)}

    def load_state(self, state: dict) -> None:
        """Restore what ``state()`` returned (a resumed job keeps its adapted weights)."""
        for domain, rate in (state.get("signal") or {}).items():
            if domain in self.signal:
                self.signal[domain] = float(rate)
        for domain, weight in (state.get("current") or {}).items():
            if domain in self.current:
                self.current[domain] = float(weight)


class DomainSampler(Sampler[int]):
    """Indices into the job's rows, ``batch_size`` prompts per batch, each drawn from a domain chosen by
    ``weights.current`` at the time the batch is drawn (so adapted weights apply from the next batch on).

    ``order``: row indices to draw from, in the order wanted (a curriculum); None: every row, shuffled per
    domain with ``seed`` and reshuffled each pass. One pass over the sampler is ``len(order) // batch_size``
    batches (at least one), like an epoch of TRL's own sampler.
    ``row_stages`` (each row's length-curriculum stage) with ``curriculum``: only rows of the current stage
    are drawn, each domain's from its own queue per stage.
    """

    def __init__(
        self,
        *,
        rows: Sequence[dict],
        weights: DomainWeights,
        batch_size: int,
        mini_repeat_count: int,
        repeat_count: int = 1,
        seed: int = 0,
        order: Sequence[int] | None = None,
        row_stages: Sequence[int] | None = None,
        curriculum: LengthCurriculum | None = None,
    ) -> None:
        self.weights = weights
        self.curriculum = curriculum if row_stages is not None else None
        self.row_stages = row_stages
        self.batch_size = batch_size
        self.mini_repeat_count = mini_repeat_count
        self.repeat_count = repeat_count
        self.rng = random.Random(seed)
        self.ordered = order is not None
        indices = list(range(len(rows))) if order is None else list(order)
        # Rows per (length stage, domain); stage 0 for every row without a length curriculum.
        self.pools: dict[tuple[int, str], list[int]] = defaultdict(list)
        for index in indices:
            stage = row_stages[index] if self.curriculum is not None and row_stages is not None else 0
            self.pools[(stage, row_domain(rows[index]))].append(index)
        self.queues: dict[tuple[int, str], list[int]] = {key: [] for key in self.pools}
        self.batches = max(1, len(indices) // batch_size)

    def __len__(self) -> int:
        return self.batches * self.batch_size * self.mini_repeat_count * self.repeat_count

    def _stage(self) -> int:
        if self.curriculum is None:
            return 0
        present = sorted({stage for stage, _ in self.pools})
        wanted = self.curriculum.current
        # Difficulty profiling may have left a stage without rows: train on the nearest shorter one then.
        shorter = [stage for stage in present if stage <= wanted]
        return shorter[-1] if shorter else present[0]

    def _domains_for_batch(self) -> list[str]:
        stage = self._stage()
        here = [domain for (s, domain) in self.pools if s == stage]
        names = [d for d in here if self.weights.current.get(d, 0.0) > 0]
        if not names:
            names = here
        chances = [self.weights.current.get(d, 0.0) or 1.0 for d in names]
        return self.rng.choices(names, weights=chances, k=self.batch_size)

    def _next_row(self, domain: str) -> int:
        key = (self._stage(), domain)
        queue = self.queues[key]
        if not queue:
            queue.extend(self.pools[key])
            if not self.ordered:
                self.rng.shuffle(queue)
        return queue.pop(0)

    def __iter__(self) -> Iterator[int]:
        for _ in range(self.batches):
            batch = [self._next_row(domain) for domain in self._domains_for_batch()]
            for _ in range(self.repeat_count):
                for index in batch:
                    yield from [index] * self.mini_repeat_count


def group_signal(
    domains: Sequence[str], passed: Sequence[bool], group_size: int
) -> dict[str, tuple[int, int]]:
    """Per domain: (groups whose pass rate is strictly between 0 and 1, groups), from completions laid out
    as TRL lays them (``group_size`` consecutive completions of one prompt)."""
    out: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    for start in range(0, len(passed) - group_size + 1, group_size):
        share = sum(passed[start : start + group_size]) / group_size
        counts = out[domains[start]]
        counts[0] += 1 if 0.0 < share < 1.0 else 0
        counts[1] += 1
    return {domain: (counts[0], counts[1]) for domain, counts in out.items()}


def attach_sampler(trainer: Any, sampler: DomainSampler) -> None:
    """Make ``trainer`` (TRL's GRPOTrainer or RLOOTrainer) draw its prompts from ``sampler``.

    Both build their training dataloader through ``_get_train_sampler``; the override is set on the
    instance before ``train()`` so nothing else of the trainer changes.
    """
    trainer._get_train_sampler = lambda dataset=None: sampler


def prepare_sampling(
    trainer: Any,
    *,
    config: GRPOJobConfig,
    scorers: dict[str, Any],
    sink: EventSink,
    curriculum: LengthCurriculum | None = None,
    row_stages: Sequence[int] | None = None,
) -> DomainWeights | None:
    """Install the domain sampler on ``trainer`` when the job needs one (several domains, set domain
    weights, difficulty profiling, or a length curriculum with ``row_stages``), profiling the base model
    first when ``config.profile_k`` is set. Returns the weights the reward functions report to, or None when
    TRL's own sampler is kept."""
    counts = domain_counts(config.rows)
    if len(counts) < 2 and not config.domain_weights and not config.profile_k and curriculum is None:
        return None
    base = {domain: float(config.domain_weights.get(domain, 0.0)) for domain in counts}
    if not config.domain_weights:
        base = dict.fromkeys(counts, 1.0)
    state_file = Path(config.output_dir) / "domain_weights.json"
    order = None
    if config.profile_k:
        order = _profile(trainer, config=config, scorers=scorers, sink=sink)
    weights = DomainWeights(
        base, adaptive=config.adaptive_sampling, floor=config.domain_floor, state_file=state_file
    )
    if order is not None:
        # A domain whose every prompt was dropped cannot be drawn: its weight goes to the others.
        kept_domains = {row_domain(config.rows[index]) for index in order}
        live = {domain: w for domain, w in base.items() if domain in kept_domains and w > 0}
        if live:
            weights = DomainWeights(
                live, adaptive=config.adaptive_sampling, floor=config.domain_floor, state_file=state_file
            )
    args = trainer.args
    sampler = DomainSampler(
        rows=config.rows,
        weights=weights,
        batch_size=args.generation_batch_size // config.num_generations,
        mini_repeat_count=config.num_generations,
        repeat_count=args.num_iterations * args.steps_per_generation,
        seed=config.seed,
        order=order,
        row_stages=row_stages,
        curriculum=curriculum,
    )
    attach_sampler(trainer, sampler)
    sink.emit(
        "log",
        {
            "message": "domain sampler: "
            + ", ".join(f"{d} {w:.2f}" for d, w in weights.current.items())
            + (f" (adaptive, floor {config.domain_floor:g})" if config.adaptive_sampling else "")
        },
    )
    return weights


def _profile(
    trainer: Any, *, config: GRPOJobConfig, scorers: dict[str, Any], sink: EventSink
) -> list[int] | None:
    from gpu_jobs.profiling import profile_rows

    model = trainer.model
    was_training = model.training
    profile = profile_rows(
        model=model,
        tokenizer=trainer.processing_class,
        rows=config.rows,
        scorers=scorers,
        weights={v["name"]: float(v["weight"]) for v in config.verifiers},
        k=config.profile_k,
        max_new_tokens=config.max_completion_length,
        temperature=config.temperature,
        seed=config.seed,
        max_prompts=config.profile_max_prompts,
    )
    model.train(was_training)
    summary = profile.summary(config.rows)
    sink.emit(
        "metric",
        {
            "step": 0,
            "profile/kept": float(summary["kept"]),
            "profile/dropped_always_solved": float(summary["dropped_always_solved"]),
            "profile/dropped_never_solved": float(summary["dropped_never_solved"]),
            "profile/mean_pass_rate": summary["mean_pass_rate"],
            "profile/pass_at_k": summary["pass_at_k"],
        },
    )
    sink.emit(
        "log",
        {
            "message": f"difficulty profile (pass@{config.profile_k}) of {summary['profiled']} prompts: kept "
            f"{summary['kept']}, dropped {summary['dropped_always_solved']} always solved and "
            f"{summary['dropped_never_solved']} never solved; mean pass rate {summary['mean_pass_rate']:.3f}",
            "profile": summary,
        },
    )
    if not profile.order:
        sink.emit(
            "log",
            {
                "message": "difficulty profile kept no prompt: training on every row in its usual order "
                "instead"
            },
        )
        return None
    return profile.order
