"""Warnings raised while a job trains, from its per-step metrics: the signs that show in the numbers before
anyone reads a trace. Each alarm is raised once, and again only after its condition has cleared.

Torch-free: it reads the metric payloads the reporting callback emits.
"""

from __future__ import annotations

import json
import threading
from collections import Counter, deque
from dataclasses import dataclass
from pathlib import Path

# Every alarm a job may raise; the job setting pause_on_alarms names some of them (or "all").
ALARM_NAMES = (
    "no_signal",
    "length_drift",
    "part_dominates",
    "forgetting",
    "reward_tampering",
    "episodes_cut_short",
    "tool_calls_fading",
)
# Agent episodes: the limits that cut an episode short (its end reason, from the step metric
# "episode/end/<reason>"), each with the environment setting that sets it.
CUT_SHORT = {
    "timeout": "episode_timeout_s (wall time of a whole episode)",
    "token_budget": "token_budget (model tokens of a whole episode)",
    "context_limit": "context_tokens (the prompt the model sees at a turn)",
}
# Agent episodes: the share of the step's turns that held a well-formed tool call (the environment's format part).
VALID_CALLS = "episode/format"
# Step metrics of code verifiers (only for steps a verifier that runs code scored): the share and the
# number of the step's rollouts scored as tampering with the grader (gpu_jobs.rewards.base.TAMPERING_PART).
TAMPERING_SHARE = "tampering"
TAMPERING_COUNT = "tampering_count"


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
    - ``reward_tampering``: at least one rollout of the step was scored as tampering with the verifier (the
      ``tampering_count`` metric); ``tampering`` (a TamperingLog the reward functions record into) tells the
      message what they tried.
    - ``episodes_cut_short`` (agent jobs): for ``cut_short_steps`` steps in a row, at least ``cut_short_share``
      of the episodes ended on one of the limits in CUT_SHORT rather than by finishing or running out of turns:
      the reward then rates what the model did before the cut, and the message names the setting to raise.
    - ``tool_calls_fading`` (agent jobs): the share of turns holding a well-formed tool call fell below
      ``fading_ratio`` of its level at the job's first step (when that was at least ``fading_floor``): the
      policy is unlearning the tool-call format, so its episodes stop acting. Seen with SmolLM2 after a warm-up
      (bench/agent_learning.py, seed 1, lr 2e-4): 92% -> 0% in 3 steps at beta 0 and after one update at beta
      0.04, as partial test credit paid a repository left alone more than a wrong edit.
    """

    def __init__(
        self,
        *,
        weights: dict[str, float],
        window: int = 10,
        zero_std_share: float = 0.9,
        length_ratio: float = 2.0,
        dominance: float = 0.9,
        tampering: TamperingLog | None = None,
        cut_short_share: float = 0.5,
        cut_short_steps: int = 3,
        fading_ratio: float = 0.5,
        fading_floor: float = 0.2,
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
        self.tampering = tampering
        self.cut_short_share = cut_short_share
        self.cut_short_steps = cut_short_steps
        self.cut_short_run = 0
        self.fading_ratio = fading_ratio
        self.fading_floor = fading_floor
        self.first_valid_calls: tuple[int, float] | None = None  # (step, share) of the first agent step

    def observe(self, metrics: dict) -> list[Alarm]:
        step = int(metrics.get("step", 0))
        conditions = {
            "no_signal": self._no_signal(metrics),
            "length_drift": self._length_drift(metrics),
            "part_dominates": self._part_dominates(metrics),
            "reward_tampering": self._reward_tampering(step, metrics),
            "episodes_cut_short": self._episodes_cut_short(metrics),
            "tool_calls_fading": self._tool_calls_fading(step, metrics),
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
        leader = max(self.dominant_run, key=lambda name: self.dominant_run[name])
        if self.dominant_run[leader] < self.window:
            return None
        return (
            f"for {self.dominant_run[leader]} steps, the verifier '{leader}' gave more than "
            f"{self.dominance:.0%} of the reward: the others barely shape what the model learns"
        )

    def _episodes_cut_short(self, metrics: dict) -> str | None:
        shares: dict[str, float] = {
            reason: float(metrics[f"episode/end/{reason}"])
            for reason in CUT_SHORT
            if isinstance(metrics.get(f"episode/end/{reason}"), int | float)
        }
        if not any("episode/end/" in key for key in metrics):
            return None  # not an agent step
        total = sum(shares.values(), 0.0)
        self.cut_short_run = self.cut_short_run + 1 if total >= self.cut_short_share else 0
        if self.cut_short_run < self.cut_short_steps:
            return None
        reason = max(shares, key=shares.__getitem__)
        return (
            f"for {self.cut_short_run} steps, {total:.0%} of the episodes were cut short before they finished "
            f"(most by {reason}: {shares[reason]:.0%}), so their reward rates what the model did before the cut: "
            f"raise the environment's {CUT_SHORT[reason]}, or give the model fewer or shorter turns"
        )

    def _tool_calls_fading(self, step: int, metrics: dict) -> str | None:
        share = metrics.get(VALID_CALLS)
        if not isinstance(share, int | float):
            return None  # not an agent step
        if self.first_valid_calls is None:
            self.first_valid_calls = (step, float(share))
            return None
        first_step, first = self.first_valid_calls
        if first < self.fading_floor or share >= self.fading_ratio * first:
            return None
        return (
            f"the turns with a well-formed tool call fell from {first:.0%} at step {first_step} to {share:.0%}: "
            "the policy is unlearning the tool-call format, so its episodes stop acting on the repository. A "
            "reward that pays a partly passing repository left alone more than a wrong edit pushes it there: "
            "lower the learning rate, keep the policy near its start (beta above 0), or give the format a "
            "larger weight"
        )

    def _reward_tampering(self, step: int, metrics: dict) -> str | None:
        tried = self.tampering.take(step) if self.tampering is not None else Counter()
        count = int(metrics.get(TAMPERING_COUNT) or 0)
        if count <= 0:
            return None
        share = metrics.get(TAMPERING_SHARE)
        of = f" of {round(count / share)}" if isinstance(share, int | float) and share > 0 else ""
        kinds = [kind for kind, _ in tried.most_common(3)]
        what = f" ({'; '.join(kinds)}{'; …' if len(tried) > 3 else ''})" if kinds else ""
        rollouts = "rollout" if count == 1 and not of else "rollouts"
        return (
            f"{count}{of} {rollouts} at step {step} tried to tamper with the verifier{what}: a policy that probes "
            "its grader is learning the grader, not the task; read them (the job page links them) before "
            "trusting this run's reward"
        )


class TamperingLog:
    """Per step: how many rollouts a verifier that runs code scored, and which of them tried to tamper with
    it and how. Reward functions record into it from their threads (gpu_jobs.grpo, gpu_jobs.agent.training);
    their step's metrics carry the count and share, and AlarmWatch takes what was tried for its message."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._steps: dict[int, tuple[int, int, Counter[str]]] = {}

    def record(self, step: int, tried: list[str | None]) -> dict[str, float]:
        """``tried``: per rollout, what it tried ("" when honest, None when no code verifier scored it).
        Returns the step's metrics so far (several batches of one step add up); {} when none was scored."""
        checked = [what for what in tried if what is not None]
        with self._lock:
            scored, count, kinds = self._steps.get(step, (0, 0, Counter()))
            kinds.update(what for what in checked if what)
            scored += len(checked)
            count += sum(1 for what in checked if what)
            self._steps[step] = (scored, count, kinds)
        if not scored:
            return {}
        return {TAMPERING_SHARE: count / scored, TAMPERING_COUNT: float(count)}

    def take(self, step: int) -> Counter[str]:
        """What the rollouts of ``step`` tried, by kind, most frequent first; forgets ``step`` and before."""
        with self._lock:
            _, _, kinds = self._steps.pop(step, (0, 0, Counter()))
            for old in [s for s in self._steps if s < step]:
                del self._steps[old]
        return kinds


class ForgettingWatch:
    """Compares each held-out evaluation, per domain, with the first one (the base model, before training) and
    with the domain's best evaluation so far.

    ``observe(step, scores)`` takes the ``eval/<domain>`` scores of one evaluation and returns a
    ``forgetting`` alarm for each domain whose score fell more than ``margin`` below its base score or below
    its best score so far (a domain learned, then given back while another trains), once per domain until
    the score recovers to within the margin of both. ``eval/mean`` is not a domain and is skipped. ``margin``
    0 turns the watch off. ``state_file``: where the base and best scores are kept, so a resumed run (which
    does not evaluate its base model again) still compares with the model before training and its best.
    """

    def __init__(
        self, *, margin: float, base: dict[str, float] | None = None, state_file: Path | None = None
    ) -> None:
        self.margin = margin
        self.state_file = state_file
        best: dict[str, list] = {}
        if base is None and state_file is not None and state_file.is_file():
            state = json.loads(state_file.read_text())
            # {"base": ..., "best": ...}; a file of a run from before the best was kept holds the base alone.
            base, best = (state["base"], state["best"]) if "base" in state else (state, {})
        self.base: dict[str, float] | None = dict(base) if base else None
        self.best: dict[str, tuple[float, int]] = {d: (float(v), int(at)) for d, (v, at) in best.items()}
        self.active: set[str] = set()

    def observe(self, step: int, scores: dict[str, float]) -> list[Alarm]:
        domains = {
            key.removeprefix("eval/"): value
            for key, value in scores.items()
            if key.startswith("eval/") and key != "eval/mean"
        }
        if self.base is None:
            self.base = domains
            self._save()
            return []
        raised = [] if self.margin <= 0 else self._alarms(step, domains)
        improved = {
            d: (v, step) for d, v in domains.items() if v > self.best.get(d, (self.base.get(d, v), 0))[0]
        }
        if improved:
            self.best.update(improved)
            self._save()
        return raised

    def _alarms(self, step: int, domains: dict[str, float]) -> list[Alarm]:
        assert self.base is not None
        raised = []
        for domain, score in sorted(domains.items()):
            before = self.base.get(domain)
            if before is None:
                continue
            best, best_step = self.best.get(domain, (before, 0))
            if max(before, best) - score <= self.margin:
                self.active.discard(domain)
                continue
            if domain in self.active:
                continue
            self.active.add(domain)
            if before - score > self.margin:
                fell = f"fell from {before:.3f} before training to {score:.3f}"
            else:
                fell = f"fell from its best, {best:.3f} at step {best_step}, to {score:.3f}"
            raised.append(
                Alarm(
                    name="forgetting",
                    step=step,
                    message=f"the held-out score of domain '{domain}' {fell} (more than the margin "
                    f"{self.margin:g}): the model is forgetting it; raise its domain weight or lower the "
                    "learning rate",
                )
            )
        return raised

    def _save(self) -> None:
        if self.state_file is not None:
            self.state_file.parent.mkdir(parents=True, exist_ok=True)
            best = {domain: list(value) for domain, value in self.best.items()}
            self.state_file.write_text(json.dumps({"base": self.base, "best": best}))
