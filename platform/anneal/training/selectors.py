"""Reads of the training app: events, rollouts, metrics, the queue, and what a running attempt sees."""

from collections import Counter
from datetime import timedelta

from django.conf import settings
from django.db.models import Q, QuerySet
from django.utils import timezone

from anneal.training.costs import job_remaining_seconds
from anneal.training.dispatch import jobs_waiting, team_blocked
from anneal.training.models import ACTIVE_STATES, EventKind, Job, JobEvent, JobState
from gpu_jobs.rewards.base import TAMPERING_PART, TAMPERING_PREFIX

# A rollout that tried to tamper with its verifier: the recorder's "tampering" key (what it tried), or, from
# any other writer, a tampering part or a reason that starts with "tampering: ".
TAMPERING_ROLLOUT = (
    Q(payload__has_key=TAMPERING_PART)
    | Q(**{f"payload__parts__{TAMPERING_PART}__gte": 1})
    | Q(payload__reason__startswith=TAMPERING_PREFIX)
)


def job_events_after(*, job: Job, after: int, limit: int = 500) -> QuerySet[JobEvent]:
    return job.events.filter(seq__gt=after).order_by("seq")[:limit]


# An agent job's held-out evaluation episode (gpu_jobs.agent.training): on a task the job never trains on.
HELD_OUT_ROLLOUT = Q(payload__held_out=True)


def job_rollouts(
    *, job: Job, tampering: bool | None = None, step: int | None = None, held_out: bool | None = None
) -> QuerySet[JobEvent]:
    """The job's rollout events in seq order; ``tampering`` True keeps only those that tried to tamper with
    a verifier (False: only the others); ``step`` keeps one step's; ``held_out`` True keeps only held-out
    evaluation episodes (False: only the training ones)."""
    rollouts = job.events.filter(kind=EventKind.ROLLOUT).order_by("seq")
    # Not exclude(Q): a missing JSON key is NULL in SQL, and NOT (NULL) drops the row.
    for wanted, rule in ((tampering, TAMPERING_ROLLOUT), (held_out, HELD_OUT_ROLLOUT)):
        if wanted:
            rollouts = rollouts.filter(rule)
        elif wanted is not None:
            rollouts = rollouts.exclude(pk__in=rollouts.filter(rule).values("pk"))
    if step is not None:
        rollouts = rollouts.filter(payload__step=step)
    return rollouts


def job_tampering_summary(*, job: Job) -> dict | None:
    """The job's tampering at a glance: rollouts reported as tampering and the steps of its alarms; None when
    there has been none."""
    alarm_steps = sorted(
        step
        for step in job.events.filter(kind=EventKind.ALARM, payload__name="reward_tampering").values_list(
            "payload__step", flat=True
        )
        if isinstance(step, int)
    )
    rollouts = job_rollouts(job=job, tampering=True).count()
    if not alarm_steps and not rollouts:
        return None
    return {"rollouts": rollouts, "alarm_steps": alarm_steps}


LATEST_METRIC_EVENTS = 50


def job_live_summary(*, job: Job) -> dict:
    """What the job page paints first, from the same events its stream replays: the step in progress (the
    latest metric's or rollout's: a step's rollouts arrive before its metrics), the latest value of each
    metric (the newest metric events merged, and the latest evaluation), and whether any rollout is in."""
    metrics: dict = {}
    recent = list(
        job.events.filter(kind=EventKind.METRIC)
        .order_by("-seq")
        .values_list("payload", flat=True)[:LATEST_METRIC_EVENTS]
    )
    evaluation = (
        job.events.filter(kind=EventKind.METRIC, payload__has_key="eval/mean")
        .order_by("-seq")
        .values_list("payload", flat=True)
        .first()
    )
    for payload in ([evaluation] if evaluation else []) + recent[::-1]:
        metrics.update(payload)
    rollout_step = (
        job.events.filter(kind=EventKind.ROLLOUT)
        .order_by("-seq")
        .values_list("payload__step", flat=True)
        .first()
    )
    steps = [job.step, metrics.get("step"), rollout_step]
    return {
        "step": max(step for step in steps if isinstance(step, int)),
        "metrics": metrics,
        "has_rollouts": rollout_step is not None,
    }


def metric_series(*, jobs: QuerySet[Job], key: str) -> dict[int, tuple[list[int], list[float]]]:
    """job id -> (steps, values) of one metric key, in step order, for the jobs given (already team-scoped)."""
    series: dict[int, tuple[list[int], list[float]]] = {
        job_id: ([], []) for job_id in jobs.values_list("pk", flat=True)
    }
    events = (
        JobEvent.objects.filter(job__in=jobs, kind=EventKind.METRIC, payload__has_key=key)
        .order_by("job_id", "seq")
        .values_list("job_id", "payload")
    )
    for job_id, payload in events:
        value = payload.get(key)
        if isinstance(value, int | float) and isinstance(payload.get("step"), int):
            series[job_id][0].append(payload["step"])
            series[job_id][1].append(float(value))
    return series


def metric_keys(*, jobs: QuerySet[Job], limit: int = 200) -> list[str]:
    """The numeric metric keys the jobs reported, from their latest metric events."""
    keys: set[str] = set()
    for payload in (
        JobEvent.objects.filter(job__in=jobs, kind=EventKind.METRIC)
        .order_by("-seq")
        .values_list("payload", flat=True)[:limit]
    ):
        keys.update(k for k, v in payload.items() if k != "step" and isinstance(v, int | float))
    return sorted(keys)


def evaluation_table(*, job: Job) -> tuple[list[str], list[int], list[list[float | None]]]:
    """(domains, steps, scores[domain][step]) of a job's held-out evaluations; step 0 is the base model."""
    evaluations = [
        payload
        for payload in job.events.filter(kind=EventKind.METRIC, payload__has_key="eval/mean")
        .order_by("seq")
        .values_list("payload", flat=True)
    ]
    steps = [payload["step"] for payload in evaluations]
    found = {
        key.removeprefix("eval/") for payload in evaluations for key in payload if key.startswith("eval/")
    }
    domains = sorted(found - {"mean"})
    if len(domains) > 1:
        domains.append("mean")  # the mean over every row, below the domains it averages
    scores = [[payload.get(f"eval/{domain}") for payload in evaluations] for domain in domains]
    return domains, steps, scores


# --- the queue and running attempts ------------------------------------------------------------------------


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
    for position, job in enumerate(jobs_waiting(), start=1):
        held = team_blocked(job, jobs, devices, limits)
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


def control_action(*, job_id: int, attempt: int) -> str | None:
    """What the training process of ``attempt`` should do now (gpu_jobs.control.JobControl.requested)."""
    row = Job.objects.filter(pk=job_id).values_list("state", "attempt").first()
    if row is None or row[1] != attempt or row[0] not in ACTIVE_STATES:
        return "abandon"
    return {JobState.PAUSING: "pause", JobState.STOPPING: "stop"}.get(row[0])
