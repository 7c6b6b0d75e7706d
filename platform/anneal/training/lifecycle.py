"""A job's life after launch: waiting, dispatch to the gpu queue, pause and resume, budget and time limit, the end
of each attempt, restarts after a crash.

Scheduling is database state plus Celery, no cluster manager of its own. A launched job waits (state queued,
``dispatched_at`` empty) until ``jobs_dispatch`` sends its task to the gpu queue; it does so only while the gpu
workers have a free slot (settings.JOB_GPU_SLOTS, their total concurrency) and the job's team is under its
limits (running jobs, devices: TeamLimits or the settings' defaults). Waiting jobs go by priority (higher
first), then by the time they were queued. Dispatch runs after every launch, resume, cancel and attempt end,
and from Celery beat.

Each run of a job's process is an *attempt*, numbered on the job row. The worker, the training process and
its event sink write only while the row still carries their attempt, so a run that was given up for dead (its
heartbeats stopped and the job was requeued) can never add to or end the job that replaced it.

Pause, the budget cap, the time limit and alarms set to pause all move a running job to ``pausing`` or
``stopping`` with a reason. The training process sees it between two steps (gpu_jobs.control), saves a full
trainer checkpoint and exits; the worker then ends the attempt as ``paused`` or ``stopped``. Resume queues a
paused job again and its next attempt goes on from that checkpoint.

Events across attempts: the sequence stays one gap-free series (anneal.training.events). A resumed attempt
starts with a state event ``{"state": "running", "attempt": n, "resumed_from_step": s}``. Steps after the
checkpoint that a killed attempt had already reported are run again but not reported again: the first
report of a step's metrics, rollouts and evaluation stands (workers.sink.DjangoEventSink drops the rest).
"""

import dataclasses
import math
from collections import Counter
from dataclasses import dataclass, field
from datetime import timedelta

from django.conf import settings
from django.contrib.auth.models import User
from django.db import connection, transaction
from django.db.models import F, Q
from django.utils import timezone

from anneal.accounts.models import Team
from anneal.accounts.services import audit
from anneal.errors import InputError
from anneal.training.costs import job_remaining_seconds, job_spend, usd
from anneal.training.events import job_event_record
from anneal.training.models import ACTIVE_STATES, Job, JobState, TeamLimits
from gpu_jobs.alarms import ALARM_NAMES  # the alarms a job may pause on; "all" selects every one

# A dispatched job whose task no worker took within this time is sent again (claiming is idempotent).
REDISPATCH_AFTER = timedelta(minutes=10)
_DISPATCH_LOCK_KEY = 0x616E6E65  # pg advisory lock: one dispatcher at a time


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


# --- dispatch and the queue -------------------------------------------------------------------------------


def _waiting() -> "list[Job]":
    return list(
        Job.objects.filter(state=JobState.QUEUED, dispatched_at__isnull=True)
        .select_related("team")
        .order_by("-priority", "queued_at", "id")
    )


def _holding() -> list[Job]:
    """Jobs that hold a gpu slot: running ones, and queued ones whose task is on its way to a worker."""
    return list(
        Job.objects.filter(
            Q(state__in=ACTIVE_STATES) | Q(state=JobState.QUEUED, dispatched_at__isnull=False)
        ).only("id", "team_id", "devices", "state", "dispatched_at")
    )


def _team_blocked(job: Job, jobs: Counter, devices: Counter, limits: dict) -> str | None:
    if job.team_id not in limits:
        limits[job.team_id] = team_limits(job.team)
    max_jobs, max_devices = limits[job.team_id]
    if jobs[job.team_id] >= max_jobs:
        return f"team '{job.team.name}' already runs {jobs[job.team_id]} job(s), its limit"
    if devices[job.team_id] + job.devices > max_devices:
        return (
            f"team '{job.team.name}' holds {devices[job.team_id]} of its {max_devices} devices; "
            f"this job needs {job.devices}"
        )
    return None


def jobs_dispatch() -> list[int]:
    """Send the tasks of the waiting jobs that may start now; returns their ids."""
    with transaction.atomic():
        if connection.vendor == "postgresql":
            with connection.cursor() as cursor:
                cursor.execute("SELECT pg_advisory_xact_lock(%s)", [_DISPATCH_LOCK_KEY])
        holding = _holding()
        now = timezone.now()
        resend = [
            j.pk for j in holding if j.state == JobState.QUEUED and j.dispatched_at < now - REDISPATCH_AFTER
        ]
        Job.objects.filter(pk__in=resend).update(dispatched_at=now)
        free = settings.JOB_GPU_SLOTS - len(holding)
        jobs = Counter(j.team_id for j in holding)
        devices: Counter = Counter()
        for j in holding:
            devices[j.team_id] += j.devices
        limits: dict = {}
        chosen = []
        for job in _waiting() if free > 0 else []:
            if len(chosen) >= free:
                break
            if _team_blocked(job, jobs, devices, limits):
                continue
            chosen.append(job.pk)
            jobs[job.team_id] += 1
            devices[job.team_id] += job.devices
        Job.objects.filter(pk__in=chosen, state=JobState.QUEUED).update(dispatched_at=now)
        to_send = chosen + resend

        def send() -> None:
            from workers.tasks import job_run

            for job_id in to_send:
                job_run.delay(job_id)

        if to_send:
            transaction.on_commit(send)
    return chosen


def dispatch_on_commit() -> None:
    transaction.on_commit(jobs_dispatch)


def queue_state(*, teams=None) -> dict:
    """The waiting jobs in the order they will start, with position and estimated start, and the running ones
    with their estimated end. ``teams``: only these teams' jobs are listed (positions stay global)."""
    now = timezone.now()
    holding = list(
        Job.objects.filter(Q(state__in=ACTIVE_STATES) | Q(state=JobState.QUEUED, dispatched_at__isnull=False))
        .select_related("team")
        .order_by("attempt_started_at", "id")
    )
    slots = [0.0] * max(0, settings.JOB_GPU_SLOTS - len(holding))
    running = []
    for job in holding:
        remaining = job_remaining_seconds(job)
        slots.append(remaining)
        running.append((job, remaining))
    slots.sort()
    if not slots:
        slots = [0.0]
    jobs = Counter(j.team_id for j in holding)
    devices: Counter = Counter()
    for j in holding:
        devices[j.team_id] += j.devices
    limits: dict = {}
    waiting = []
    for position, job in enumerate(_waiting(), start=1):
        held = _team_blocked(job, jobs, devices, limits)
        start_in = slots.pop(0)
        duration = job_remaining_seconds(job)
        slots.append(start_in + duration)
        slots.sort()
        waiting.append(
            {
                "job": job,
                "position": position,
                "estimated_start": now + timedelta(seconds=start_in),
                "estimated_seconds": round(duration, 1),
                "held_by": held,
            }
        )
    team_ids = None if teams is None else {t.pk for t in teams}
    return {
        "slots": settings.JOB_GPU_SLOTS,
        "waiting": [w for w in waiting if team_ids is None or w["job"].team_id in team_ids],
        "waiting_total": len(waiting),
        "running": [
            {"job": job, "estimated_end": now + timedelta(seconds=remaining)}
            for job, remaining in running
            if team_ids is None or job.team_id in team_ids
        ],
    }


# --- pause, resume, limits ----------------------------------------------------------------------------------


def job_request(*, job_id: int, action: str, reason: str) -> bool:
    """Ask a running job to checkpoint and "pause" or "stop"; False when it was not running."""
    state = {"pause": JobState.PAUSING, "stop": JobState.STOPPING}[action]
    with transaction.atomic():
        if not Job.objects.filter(pk=job_id, state=JobState.RUNNING).update(state=state, reason=reason):
            return False
        job_event_record(job_id=job_id, kind="state", payload={"state": state, "reason": reason})
    return True


def job_pause(*, job: Job, user: User | None, reason: str = "") -> Job:
    """A running job checkpoints and pauses; a waiting one pauses at once. Resume with ``job_resume``."""
    who = user.get_username() if user is not None and user.is_authenticated else "an operator"
    reason = reason or f"paused by {who}"
    with transaction.atomic():
        if Job.objects.filter(pk=job.pk, state=JobState.QUEUED).update(
            state=JobState.PAUSED, reason=reason, dispatched_at=None
        ):
            job_event_record(
                job_id=job.pk, kind="state", payload={"state": JobState.PAUSED, "reason": reason}
            )
            dispatch_on_commit()  # it may have held a slot
        elif not job_request(job_id=job.pk, action="pause", reason=reason):
            job.refresh_from_db()
            raise InputError(
                f"job #{job.pk} is {job.state}; only a queued or running job can pause", field="state"
            )
        audit(team=job.team, user=user, action="job.pause", obj=job)
    job.refresh_from_db()
    return job


def job_resume(
    *, job: Job, user: User | None, budget: float | None = None, time_limit_minutes: float | None = None
) -> Job:
    """Queue a paused job again; it goes on from its latest checkpoint. ``budget``/``time_limit_minutes``
    raise the job's caps (a job paused by its budget needs a higher one)."""
    with transaction.atomic():
        job = Job.objects.select_for_update().get(pk=job.pk)
        if job.state != JobState.PAUSED:
            raise InputError(f"job #{job.pk} is {job.state}; only a paused job can resume", field="state")
        spec = dict(job.spec)
        changes = {
            k: v for k, v in (("budget", budget), ("time_limit_minutes", time_limit_minutes)) if v is not None
        }
        if changes:
            checked = RunLimits(**{k: spec[k] for k in LIMIT_FIELDS if k in spec} | changes)
            spec.update({k: getattr(checked, k) for k in changes})
        job.spec = spec
        spent = job_spend(job)["total"]
        cap = float(spec.get("budget") or 0)
        if cap and spent >= cap:
            raise InputError(
                f"job #{job.pk} has spent {usd(spent)} USD of its {usd(cap)} USD budget: raise the budget to resume",
                field="budget",
            )
        Job.objects.filter(pk=job.pk).update(
            spec=spec, state=JobState.QUEUED, reason="", queued_at=timezone.now(), dispatched_at=None
        )
        payload = {"state": JobState.QUEUED, "resumed": True, **changes}
        job_event_record(job_id=job.pk, kind="state", payload=payload)
        audit(team=job.team, user=user, action="job.resume", obj=job, **changes)
        dispatch_on_commit()
    job.refresh_from_db()
    return job


def job_limits_enforce(*, job_id: int) -> str | None:
    """Called by the worker while a job runs: past its budget it pauses, past its time limit it stops.
    Returns the action asked for, if any."""
    job = Job.objects.filter(pk=job_id, state=JobState.RUNNING).first()
    if job is None:
        return None
    spend = job_spend(job)
    budget = float(job.spec.get("budget") or 0)
    if budget and spend["total"] >= budget:
        reason = f"budget cap reached: spent {usd(spend['total'])} of {usd(budget)} USD; raise the budget to resume"
        return "pause" if job_request(job_id=job_id, action="pause", reason=reason) else None
    limit_min = float(job.spec.get("time_limit_minutes") or 0)
    if limit_min and spend["run_seconds"] >= limit_min * 60:
        reason = f"time limit reached: ran {spend['run_seconds']:.0f} s of the {limit_min:g} minutes allowed"
        return "stop" if job_request(job_id=job_id, action="stop", reason=reason) else None
    return None


def control_action(*, job_id: int, attempt: int) -> str | None:
    """What the training process of ``attempt`` should do now (gpu_jobs.control.JobControl.requested)."""
    row = Job.objects.filter(pk=job_id).values_list("state", "attempt").first()
    if row is None or row[1] != attempt or row[0] not in ACTIVE_STATES:
        return "abandon"
    return {JobState.PAUSING: "pause", JobState.STOPPING: "stop"}.get(row[0])


# --- attempts -----------------------------------------------------------------------------------------------


def attempt_end(
    *, job_id: int, attempt: int, state: str, error: str = "", reason: str = "", until=None
) -> str:
    """End ``attempt`` of the job as ``state`` (succeeded, failed, cancelled, paused, stopped, or queued to
    restart after a crash). Does nothing when the job has moved on to another attempt. Returns the state the
    job ended in (a restart past settings.JOB_MAX_RESTARTS fails). ``until``: when the attempt stopped running
    (default now; the reaper passes the last heartbeat)."""
    with transaction.atomic():
        job = Job.objects.select_for_update().filter(pk=job_id, attempt=attempt).first()
        if job is None:
            return "superseded"
        now = timezone.now()
        ran = (
            max(0.0, ((until or now) - job.attempt_started_at).total_seconds())
            if job.attempt_started_at
            else 0
        )
        updates: dict = {"run_seconds": F("run_seconds") + ran, "child_pid": None, "attempt_started_at": None}
        payload: dict = {"state": state}
        if state == JobState.QUEUED:
            if job.restarts >= settings.JOB_MAX_RESTARTS:
                state = JobState.FAILED
                error = f"{reason}; gave up after {job.restarts} restart(s) (ANNEAL_JOB_MAX_RESTARTS)"
                payload = {"state": state}
            else:
                updates.update(restarts=F("restarts") + 1, dispatched_at=None, reason=reason)
                payload.update(requeued=True, reason=reason, restart=job.restarts + 1)
        if state in (JobState.PAUSED, JobState.STOPPED):
            updates["reason"] = reason or job.reason
            payload["reason"] = updates["reason"]
        if state in (JobState.SUCCEEDED, JobState.FAILED, JobState.CANCELLED, JobState.STOPPED):
            updates["finished_at"] = now
        if error:
            updates["error"] = error
            payload["error"] = error
        Job.objects.filter(pk=job_id).update(state=state, **updates)
        job_event_record(job_id=job_id, kind="state", payload=payload)
        dispatch_on_commit()
    return state
