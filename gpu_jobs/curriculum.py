"""Length curriculum: train on short prompts first, then longer ones, stage by stage.

A job's ``length_curriculum`` setting lists the stages, shortest first, separated by commas; each is the
longest prompt (in tokens) it trains on, then how it ends::

    512:steps=0.3, 2048:pass=0.6:steps=0.5, 8192

- ``steps=S``: the stage ends after S x max_steps steps (a share in (0, 1]);
- ``pass=P``: the stage ends once the step's pass rate (completions every weighted verifier passed) reaches
  P, averaged over the stage's last ``PASS_WINDOW`` steps;
- both: whichever comes first; the last stage has neither: it trains until the job ends.

Stage k draws its prompts from the rows whose prompt length is above stage k-1's bound and at most its
own (the last stage also takes every longer row), so each stage trains on its own band of lengths.
The sampler (gpu_jobs.sampler.DomainSampler) asks ``current`` for every batch it draws; the reward
functions tell ``observe`` each step's pass rate. Torch-free: the settings check parses it in the web
process.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

PASS_WINDOW = 2


@dataclass(frozen=True)
class Stage:
    max_length: int
    share: float | None = None  # of max_steps
    pass_rate: float | None = None

    def describe(self) -> str:
        rules = []
        if self.share is not None:
            rules.append(f"{self.share:g} of the steps")
        if self.pass_rate is not None:
            rules.append(f"pass rate {self.pass_rate:g}")
        return f"<= {self.max_length} tokens" + (f" until {' or '.join(rules)}" if rules else " to the end")


def parse_curriculum(text: str) -> list[Stage]:
    """The stages of a ``length_curriculum`` setting; "" is no curriculum ([]). Raises ValueError starting
    with ``length_curriculum:`` and naming the stage."""
    if not isinstance(text, str):
        raise ValueError(f"length_curriculum: must be text such as '512:steps=0.5, 2048', got {text!r}")
    parts = [part.strip() for part in text.split(",") if part.strip()]
    stages: list[Stage] = []
    for number, part in enumerate(parts, start=1):
        where = f"length_curriculum: stage {number} ({part!r})"
        bound, *rules = [piece.strip() for piece in part.split(":")]
        if not bound.isdigit() or int(bound) < 1:
            raise ValueError(f"{where} must start with its longest prompt in tokens, a whole number >= 1")
        values: dict[str, float] = {}
        for rule in rules:
            name, sep, value = rule.partition("=")
            name = name.strip()
            if not sep or name not in ("steps", "pass"):
                raise ValueError(f"{where}: {rule!r} is not steps=SHARE or pass=RATE")
            if name in values:
                raise ValueError(f"{where}: {name} is given twice")
            try:
                number_value = float(value)
            except ValueError:
                raise ValueError(f"{where}: {value.strip()!r} is not a number") from None
            if not math.isfinite(number_value) or not 0 < number_value <= 1:
                raise ValueError(f"{where}: {name} must be in (0, 1], got {value.strip()}")
            values[name] = number_value
        stages.append(Stage(int(bound), share=values.get("steps"), pass_rate=values.get("pass")))
    if not stages:
        return []
    if len(stages) < 2:
        raise ValueError("length_curriculum: give at least two stages (shorter first), or leave it empty")
    for number, (before, after) in enumerate(zip(stages, stages[1:], strict=False), start=2):
        if after.max_length <= before.max_length:
            raise ValueError(
                f"length_curriculum: stage {number} ({after.max_length} tokens) must be longer than stage "
                f"{number - 1} ({before.max_length} tokens): list the stages shortest first"
            )
    for number, stage in enumerate(stages[:-1], start=1):
        if stage.share is None and stage.pass_rate is None:
            raise ValueError(
                f"length_curriculum: stage {number} ({stage.max_length} tokens) needs steps=SHARE or pass=RATE "
                "to say when to move on (only the last stage trains to the end)"
            )
    last = stages[-1]
    if last.share is not None or last.pass_rate is not None:
        raise ValueError(
            f"length_curriculum: the last stage ({last.max_length} tokens) trains until the end of the job: "
            "remove its steps= or pass="
        )
    total = sum(stage.share or 0 for stage in stages)
    if total > 1 + 1e-9:
        raise ValueError(f"length_curriculum: the stages' steps= shares add up to {total:g}, more than 1")
    return stages


def stage_of(length: int, stages: Sequence[Stage]) -> int:
    """The stage (0-based) whose band holds a prompt of ``length`` tokens; longer than every bound: the last."""
    for index, stage in enumerate(stages):
        if length <= stage.max_length:
            return index
    return len(stages) - 1


def stage_bands(lengths: Sequence[int], stages: Sequence[Stage]) -> list[int]:
    """Rows per stage; raises ValueError naming the first stage whose band holds no row."""
    if not stages:
        return []
    counts = [0] * len(stages)
    for length in lengths:
        counts[stage_of(length, stages)] += 1
    for index, count in enumerate(counts):
        if count == 0:
            low = stages[index - 1].max_length + 1 if index else 1
            raise ValueError(
                f"length_curriculum: stage {index + 1} has no training row with a prompt of {low} to "
                f"{stages[index].max_length} tokens: change its bound or the data"
            )
    return counts


class LengthCurriculum:
    """Which stage a job is in, moved on by ``observe`` after each step; kept in ``state_file`` so that a
    resumed job goes on in the stage it had reached."""

    def __init__(self, stages: Sequence[Stage], *, max_steps: int, state_file: Path | None = None) -> None:
        self.stages = list(stages)
        self.max_steps = max_steps
        self.state_file = state_file
        self.current = 0
        self.started_at = 0  # the step after which the current stage began
        self.recent: list[float] = []
        if state_file is not None and state_file.is_file():
            state = json.loads(state_file.read_text())
            self.current = int(state.get("current", 0))
            self.started_at = int(state.get("started_at", 0))
            self.recent = [float(v) for v in state.get("recent", [])]

    def stage_steps(self, index: int) -> int | None:
        """How many steps stage ``index`` lasts at most (None: no step share)."""
        share = self.stages[index].share
        return None if share is None else max(1, round(share * self.max_steps))

    def observe(self, *, step: int, pass_rate: float) -> dict | None:
        """Record step ``step``'s pass rate; return the transition (to put in an event) when the stage ends."""
        if self.current >= len(self.stages) - 1:
            return None
        stage = self.stages[self.current]
        self.recent = (self.recent + [pass_rate])[-PASS_WINDOW:]
        reason = None
        limit = self.stage_steps(self.current)
        if stage.pass_rate is not None and len(self.recent) >= PASS_WINDOW:
            mean = sum(self.recent) / len(self.recent)
            if mean >= stage.pass_rate:
                reason = f"pass rate {mean:.2f} over the last {PASS_WINDOW} steps reached {stage.pass_rate:g}"
        if reason is None and limit is not None and step - self.started_at >= limit:
            reason = f"its {limit} steps ({stage.share:g} of {self.max_steps}) are done"
        if reason is None:
            self._save()
            return None
        finished = self.current
        self.current += 1
        self.started_at = step
        self.recent = []
        self._save()
        return {
            "step": step,
            "from_stage": finished + 1,
            "stage": self.current + 1,
            "stages": len(self.stages),
            "max_length": self.stages[self.current].max_length,
            "reason": reason,
        }

    def describe(self) -> list[dict]:
        """The stages for events and the job page (1-based numbers)."""
        return [{"stage": index + 1, **asdict(stage)} for index, stage in enumerate(self.stages)]

    def _save(self) -> None:
        if self.state_file is None:
            return
        self.state_file.parent.mkdir(parents=True, exist_ok=True)
        self.state_file.write_text(
            json.dumps({"current": self.current, "started_at": self.started_at, "recent": self.recent})
        )
