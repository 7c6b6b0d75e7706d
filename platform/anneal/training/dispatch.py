"""Dispatch: which waiting jobs go to the gpu queue now.

Scheduling is database state plus Celery, no cluster manager of its own. A launched job waits (state queued,
``dispatched_at`` empty) until ``jobs_dispatch`` sends its task to the gpu queue; it does so only while the gpu
workers have a free slot (settings.JOB_GPU_SLOTS, their total concurrency) and the job's team is under its
limits (running jobs, devices: TeamLimits or the settings' defaults, anneal.training.limits). Waiting jobs go by
priority (higher first), then by the time they were queued. Dispatch runs after every launch, resume, cancel
and attempt end, and from Celery beat. The queue as users see it (positions, estimated starts) is
anneal.training.selectors.queue_state, which applies the same rules.
"""

from collections import Counter
from datetime import timedelta

from django.conf import settings
from django.db import connection, transaction
from django.db.models import Q
from django.utils import timezone

from anneal.tasks import JOB_RUN, enqueue
from anneal.training.limits import team_limits
from anneal.training.models import ACTIVE_STATES, Job, JobState

# A dispatched job whose task no worker took within this time is sent again (claiming is idempotent).
REDISPATCH_AFTER = timedelta(minutes=10)
_DISPATCH_LOCK_KEY = 0x616E6E65  # pg advisory lock: one dispatcher at a time


def jobs_waiting() -> list[Job]:
    """Jobs waiting for a gpu slot, in the order they may start."""
    return list(
        Job.objects.filter(state=JobState.QUEUED, dispatched_at__isnull=True)
        .select_related("team")
        .order_by("-priority", "queued_at", "id")
    )


def jobs_holding_slot() -> list[Job]:
    """Jobs that hold a gpu slot: running ones, and queued ones whose task is on its way to a worker."""
    return list(
        Job.objects.filter(
            Q(state__in=ACTIVE_STATES) | Q(state=JobState.QUEUED, dispatched_at__isnull=False)
        ).only("id", "team_id", "devices", "state", "dispatched_at")
    )


def team_blocked(job: Job, jobs: Counter, devices: Counter, limits: dict) -> str | None:
    """Why ``job``'s team may not start it now (None: it may), given the jobs and devices each team holds;
    ``limits`` caches each team's (jobs, devices) limits across calls."""
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
        holding = jobs_holding_slot()
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
        for job in jobs_waiting() if free > 0 else []:
            if len(chosen) >= free:
                break
            if team_blocked(job, jobs, devices, limits):
                continue
            chosen.append(job.pk)
            jobs[job.team_id] += 1
            devices[job.team_id] += job.devices
        Job.objects.filter(pk__in=chosen, state=JobState.QUEUED).update(dispatched_at=now)
        for job_id in chosen + resend:
            enqueue(JOB_RUN, job_id)
    return chosen


def dispatch_on_commit() -> None:
    """Dispatch once the current transaction commits (a slot or a waiting job may have changed)."""
    transaction.on_commit(jobs_dispatch)
