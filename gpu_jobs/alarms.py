"""Warnings raised while a job trains, from its per-step metrics: the signs that show in the numbers before
anyone reads a trace. Each alarm is raised once, and again only after its condition has cleared.

Torch-free: it reads the metric payloads the reporting callback emits.
"""

from collections import deque
from dataclasses import dataclass


@dataclass(frozen=True)
class Alarm:
    name: str
    step: int
    message: str

    def to_payload(self) -> dict:
        return {"name": self.name, "step": self.step, "message": self.message}


class AlarmWatch:
    """Feed it every metric payload in order; it returns the alarms that start at that step.

    - ``no_signal``: for ``window`` steps in a row, at least ``zero_std_share`` of the groups gave every
      completion the same reward, so GRPO's advantages are zero and the model learns nothing.
    - ``length_drift``: the mean completion length over the last ``window`` steps is more than
      ``length_ratio`` times (or less than 1/``length_ratio`` of) the mean over the first ``window``.
    - ``part_dominates``: with two or more weighted verifiers, one gives more than ``dominance`` of the
      weighted reward for ``window`` steps in a row.
    """

    def __init__(
        self,
        *,
        weights: dict[str, float],
        window: int = 10,
        zero_std_share: float = 0.9,
        length_ratio: float = 2.0,
        dominance: float = 0.9,
    ) -> None:
        self.weights = {name: weight for name, weight in weights.items() if weight > 0}
        self.window = window
        self.zero_std_share = zero_std_share
        self.length_ratio = length_ratio
        self.dominance = dominance
        self.first_lengths: list[float] = []
        self.recent_lengths: deque[float] = deque(maxlen=window)
        self.no_signal_run = 0
        self.dominant_run: dict[str, int] = {}
        self.active: set[str] = set()

    def observe(self, metrics: dict) -> list[Alarm]:
        step = int(metrics.get("step", 0))
        conditions = {
            "no_signal": self._no_signal(metrics),
            "length_drift": self._length_drift(metrics),
            "part_dominates": self._part_dominates(metrics),
        }
        raised = []
        for name, message in conditions.items():
            if message is None:
                self.active.discard(name)
            elif name not in self.active:
                self.active.add(name)
                raised.append(Alarm(name=name, step=step, message=message))
        return raised

    def _no_signal(self, metrics: dict) -> str | None:
        share = metrics.get("frac_reward_zero_std")
        if share is None:
            return None
        self.no_signal_run = self.no_signal_run + 1 if share >= self.zero_std_share else 0
        if self.no_signal_run < self.window:
            return None
        return (
            f"for {self.no_signal_run} steps, {share:.0%} or more of the groups gave every completion the same "
            "reward, so GRPO has nothing to learn from: the task may be too hard or too easy for the model, "
            "or the verifier may score everything alike"
        )

    def _length_drift(self, metrics: dict) -> str | None:
        length = metrics.get("completion_length")
        if length is None:
            return None
        if len(self.first_lengths) < self.window:
            self.first_lengths.append(length)
            return None
        self.recent_lengths.append(length)
        if len(self.recent_lengths) < self.window:
            return None
        before = sum(self.first_lengths) / len(self.first_lengths)
        now = sum(self.recent_lengths) / len(self.recent_lengths)
        if before <= 0 or 1 / self.length_ratio <= now / before <= self.length_ratio:
            return None
        return (
            f"the mean completion length moved from {before:.1f} to {now:.1f} tokens (x{now / before:.2f}): "
            "a policy that games its verifier often shows it first in its length"
        )

    def _part_dominates(self, metrics: dict) -> str | None:
        if len(self.weights) < 2:
            return None
        shares = {name: weight * metrics.get(f"rewards/{name}", 0.0) for name, weight in self.weights.items()}
        total = sum(shares.values())
        for name, share in shares.items():
            self.dominant_run[name] = (
                self.dominant_run.get(name, 0) + 1 if total > 0 and share / total > self.dominance else 0
            )
        leader = max(self.dominant_run, key=self.dominant_run.get)
        if self.dominant_run[leader] < self.window:
            return None
        return (
            f"for {self.dominant_run[leader]} steps, the verifier '{leader}' gave more than "
            f"{self.dominance:.0%} of the reward: the others barely shape what the model learns"
        )
