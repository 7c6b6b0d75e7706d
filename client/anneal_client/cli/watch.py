"""``anneal jobs watch``: a job's events drawn as a live view in a terminal (a progress bar of steps with
the ETA, the reward, the pass rate per domain, the latest rollout, alarms), or as plain lines elsewhere."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from rich.console import Console, Group, RenderableType
from rich.panel import Panel
from rich.progress_bar import ProgressBar
from rich.table import Table
from rich.text import Text

from anneal_client.types import Job, JobEvent


@dataclass
class WatchState:
    """What the view shows, updated from each event in order."""

    job: Job
    step: int = 0
    state: str = ""
    reward: float | None = None
    pass_rates: dict[str, float] = field(default_factory=dict)
    evaluation: dict[str, float] = field(default_factory=dict)
    rollout: dict[str, Any] | None = None
    alarms: list[dict[str, Any]] = field(default_factory=list)
    # (step, when) of the first and the latest metric: the server's clock, so a replay gives the same ETA.
    first_metric: tuple[int, datetime] | None = None
    last_metric: tuple[int, datetime] | None = None

    def __post_init__(self) -> None:
        self.state = self.job.state
        self.step = self.job.step

    def observe(self, event: JobEvent) -> None:
        payload = event.payload
        if event.kind == "state":
            self.state = payload.get("state", self.state)
        elif event.kind == "metric":
            step = int(payload.get("step", self.step))
            self.step = max(self.step, step)
            if "reward" in payload:
                self.reward = float(payload["reward"])
            for key, value in payload.items():
                if key.startswith("pass_rate/") and isinstance(value, int | float):
                    self.pass_rates[key.removeprefix("pass_rate/")] = float(value)
                elif key == "pass_rate" and isinstance(value, int | float):  # a job without a domain column
                    self.pass_rates["all"] = float(value)
                if key.startswith("eval/") and isinstance(value, int | float):
                    self.evaluation[key.removeprefix("eval/")] = float(value)
            when = _time(event.created_at)
            if when is not None and "reward" in payload:
                self.first_metric = self.first_metric or (step, when)
                self.last_metric = (step, when)
        elif event.kind == "rollout":
            self.rollout = payload
        elif event.kind == "alarm":
            self.alarms.append(payload)

    def eta_seconds(self) -> float | None:
        if self.first_metric is None or self.last_metric is None:
            return None
        steps = self.last_metric[0] - self.first_metric[0]
        if steps <= 0 or not self.job.max_steps:
            return None
        per_step = (self.last_metric[1] - self.first_metric[1]).total_seconds() / steps
        return max(0.0, (self.job.max_steps - self.step) * per_step)


def _time(value: str | None) -> datetime | None:
    try:
        return datetime.fromisoformat(value.replace("Z", "+00:00")) if value else None
    except ValueError:
        return None


def _duration(seconds: float | None) -> str:
    if seconds is None:
        return "--:--"
    seconds = int(seconds)
    return f"{seconds // 3600}:{seconds % 3600 // 60:02d}:{seconds % 60:02d}"


def render(view: WatchState) -> RenderableType:
    job = view.job
    total = job.max_steps or None
    head = Text.assemble((f"job {job.id} ", "bold"), (job.name or "", "cyan"), f"  {view.state}")
    bar = Table.grid(padding=(0, 1))
    bar.add_row(
        ProgressBar(total=total, completed=view.step, width=40),
        f"step {view.step}/{total or '?'}",
        f"ETA {_duration(view.eta_seconds())}",
    )
    figures = Table.grid(padding=(0, 2))
    figures.add_row("reward", "-" if view.reward is None else f"{view.reward:.3f}")
    for domain, rate in sorted(view.pass_rates.items()):
        figures.add_row(f"pass rate {domain}", f"{rate:.2f}")
    for name, score in sorted(view.evaluation.items()):
        figures.add_row(f"held-out {name}", f"{score:.3f}")
    parts: list[RenderableType] = [head, bar, figures]
    if view.rollout:
        r = view.rollout
        body = Text()
        body.append("prompt: ", "bold").append(_clip(str(r.get("prompt", ""))) + "\n")
        body.append("completion: ", "bold").append(_clip(str(r.get("completion", ""))) + "\n")
        body.append("reward: ", "bold").append(
            f"{float(r.get('reward', 0)):.3f}  {_clip(str(r.get('reason', '')))}"
        )
        parts.append(Panel(body, title=f"latest rollout (step {r.get('step')})", title_align="left"))
    for alarm in view.alarms[-5:]:
        parts.append(
            Text(f"ALARM {alarm.get('name')} at step {alarm.get('step')}: {alarm.get('message')}", "bold red")
        )
    return Group(*parts)


def _clip(text: str, width: int = 300) -> str:
    text = " ".join(text.split())
    return text if len(text) <= width else text[: width - 1] + "…"


def line_for(view: WatchState, event: JobEvent) -> str | None:
    """The plain line an event prints when the output is not a terminal (CI logs); None: nothing."""
    p = event.payload
    if event.kind == "state":
        extra = f" ({p['reason']})" if p.get("reason") else ""
        return f"state {p.get('state')}{extra}"
    if event.kind == "metric" and "reward" in p:
        rates = " ".join(f"{d}={r:.2f}" for d, r in sorted(view.pass_rates.items()))
        return (
            f"step {view.step}/{view.job.max_steps or '?'}  reward {view.reward:.3f}"
            + (f"  pass rate {rates}" if rates else "")
            + f"  ETA {_duration(view.eta_seconds())}"
        )
    if event.kind == "metric" and any(k.startswith("eval/") for k in p):
        scores = " ".join(
            f"{k.removeprefix('eval/')}={v:.3f}" for k, v in sorted(p.items()) if k.startswith("eval/")
        )
        return f"held-out at step {p.get('step')}: {scores}"
    if event.kind == "alarm":
        return f"ALARM {p.get('name')} at step {p.get('step')}: {p.get('message')}"
    if event.kind == "checkpoint":
        return f"checkpoint at step {p.get('step')}"
    if event.kind == "log":
        return f"log: {p.get('message')}"
    return None


def final_line(job: Job) -> str:
    words = f"job {job.id} {job.state}"
    if job.error:
        words += f": {job.error}"
    elif job.reason:
        words += f" ({job.reason})"
    return words


def is_live(console: Console) -> bool:
    return console.is_terminal and not console.is_dumb_terminal
