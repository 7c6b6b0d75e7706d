"""Periodic clean-up run by Celery beat."""

from datetime import timedelta

from django.utils import timezone

from anneal.training.models import EventKind, Job, JobEvent, JobState
from anneal.training.services import job_finish


def jobs_reap_stale(*, timeout_s: int) -> int:
    """Fail running jobs whose worker stopped sending heartbeats (its host died or was killed)."""
    cutoff = timezone.now() - timedelta(seconds=timeout_s)
    stale = list(
        Job.objects.filter(
            state__in=[JobState.RUNNING, JobState.CANCELLING], heartbeat_at__lt=cutoff
        ).values_list("pk", "state")
    )
    for job_id, state in stale:
        if state == JobState.CANCELLING:
            job_finish(job_id=job_id, state=JobState.CANCELLED)
        else:
            job_finish(
                job_id=job_id,
                state=JobState.FAILED,
                error=f"the worker running this job sent no heartbeat for {timeout_s} s and is presumed dead",
            )
    return len(stale)


# What a pruned rollout keeps: enough for the charts and filters, without the texts that take the space.
ROLLOUT_KEPT_FIELDS = ("step", "reward", "parts", "domain")


def rollouts_prune(*, older_than_days: int, batch: int = 1000) -> int:
    """Drop the texts of rollout events older than ``older_than_days`` (0 keeps everything).

    The event rows stay, so sequences keep no gaps and a reconnecting client replays as before; the payload
    keeps the step, reward and parts and says ``"pruned": true``. Returns how many were pruned.
    """
    if older_than_days <= 0:
        return 0
    cutoff = timezone.now() - timedelta(days=older_than_days)
    pruned = 0
    while True:
        events = list(
            JobEvent.objects.filter(kind=EventKind.ROLLOUT, created_at__lt=cutoff)
            .exclude(payload__has_key="pruned")
            .order_by("id")[:batch]
        )
        if not events:
            return pruned
        for event in events:
            event.payload = {k: event.payload[k] for k in ROLLOUT_KEPT_FIELDS if k in event.payload} | {
                "pruned": True
            }
        JobEvent.objects.bulk_update(events, ["payload"])
        pruned += len(events)
