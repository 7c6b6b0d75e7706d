"""A job's run limits: how it is scheduled (priority, devices) and what it may spend (budget, time limit),
the alarms that pause it, and the team's limits on what it holds at once.

These are the platform's part of the job spec: checked at launch (``run_limits_split``), copied to the Job's
columns (``job_columns``), read back by dispatch (anneal.training.dispatch) and by the state changes that
enforce them (anneal.training.state).
"""

import dataclasses
import math
from dataclasses import dataclass, field

from django.conf import settings
from django.utils import timezone

from anneal.accounts.models import Team
from anneal.errors import InputError
from anneal.training.models import TeamLimits
from gpu_jobs.alarms import ALARM_NAMES  # the alarms a job may pause on; "all" selects every one


@dataclass(kw_only=True)
class RunLimits:
    """How a job is scheduled and what it may spend: the platform's part of the job spec."""

    priority: int = field(
        default=0,
        metadata={"help": "Higher runs first among waiting jobs (-100 to 100); ties: queued first."},
    )
    device_type: str = field(
        default="cpu", metadata={"help": "Device type the job is billed for; priced per hour in settings."}
    )
    devices: int = field(
        default=1, metadata={"help": "Devices the job holds; counts against the team's limit."}
    )
    budget: float = field(
        default=0.0,
        metadata={
            "help": "Spend cap in USD (devices + sandboxes): reaching it checkpoints and pauses; 0: none."
        },
    )
    time_limit_minutes: float = field(
        default=0.0,
        metadata={"help": "Run time after which the job checkpoints and stops (fractions allowed); 0: none."},
    )
    pause_on_alarms: str = field(
        default="",
        metadata={
            "help": "Alarms that pause the job, comma-separated, or 'all': " + ", ".join(ALARM_NAMES) + "."
        },
    )

    def __post_init__(self) -> None:
        def number(name: str, *, integer: bool) -> float:
            value = getattr(self, name)
            ok = isinstance(value, int) if integer else isinstance(value, int | float)
            if not ok or isinstance(value, bool) or not math.isfinite(value):
                kind = "a whole number" if integer else "a number"
                raise InputError(f"{name} must be {kind}, got {value!r}", field=f"params.{name}")
            return value

        if not -100 <= number("priority", integer=True) <= 100:
            raise InputError(
                f"priority must be between -100 and 100, got {self.priority}", field="params.priority"
            )
        if number("devices", integer=True) < 1:
            raise InputError(f"devices must be at least 1, got {self.devices}", field="params.devices")
        for name in ("budget", "time_limit_minutes"):
            if number(name, integer=False) < 0:
                raise InputError(
                    f"{name} must be >= 0 (0 means no limit), got {getattr(self, name)}",
                    field=f"params.{name}",
                )
        prices = settings.JOB_DEVICE_PRICES
        if not isinstance(self.device_type, str) or self.device_type.lower() not in prices:
            raise InputError(
                f"unknown device type {self.device_type!r}; priced types: {', '.join(sorted(prices))}",
                field="params.device_type",
            )
        self.device_type = self.device_type.lower()
        names = [n.strip() for n in str(self.pause_on_alarms or "").split(",") if n.strip()]
        unknown = sorted(set(names) - {*ALARM_NAMES, "all"})
        if unknown:
            raise InputError(
                f"unknown alarm(s) {unknown}; known: {', '.join(ALARM_NAMES)} or 'all'",
                field="params.pause_on_alarms",
            )
        self.pause_on_alarms = ",".join(names)


LIMIT_FIELDS = tuple(f.name for f in dataclasses.fields(RunLimits))


def limit_defaults() -> dict:
    return {f.name: f.default for f in dataclasses.fields(RunLimits)}


def limit_helps() -> dict[str, str]:
    return {f.name: f.metadata["help"] for f in dataclasses.fields(RunLimits)}


def team_limits(team: Team) -> tuple[int, int]:
    """(running jobs, devices) the team may hold at once."""
    row = TeamLimits.objects.filter(team=team).first()
    jobs = row.max_running_jobs if row and row.max_running_jobs is not None else settings.JOB_TEAM_MAX_RUNNING
    devices = row.max_devices if row and row.max_devices is not None else settings.JOB_TEAM_MAX_DEVICES
    return jobs, devices


def run_limits_split(params: dict, *, team: Team) -> tuple[dict, dict]:
    """Split launch parameters into the engine's settings and the checked RunLimits (as a dict)."""
    limits = RunLimits(**{k: v for k, v in params.items() if k in LIMIT_FIELDS})
    _, max_devices = team_limits(team)
    if limits.devices > max_devices:
        raise InputError(
            f"devices is {limits.devices} but team '{team.name}' may hold at most {max_devices} at once",
            field="params.devices",
        )
    return {k: v for k, v in params.items() if k not in LIMIT_FIELDS}, dataclasses.asdict(limits)


def job_columns(spec: dict) -> dict:
    """The Job columns copied from a spec's RunLimits (older specs have none: the defaults)."""
    defaults = limit_defaults()
    return {
        "priority": spec.get("priority", defaults["priority"]),
        "devices": spec.get("devices", defaults["devices"]),
        "device_type": spec.get("device_type", defaults["device_type"]),
        "queued_at": timezone.now(),
    }


def alarms_that_pause(spec: dict) -> set[str]:
    """The alarm names that pause a job of ``spec``; "all" stands for every alarm, known now or later."""
    return {n.strip() for n in str(spec.get("pause_on_alarms") or "").split(",") if n.strip()}
