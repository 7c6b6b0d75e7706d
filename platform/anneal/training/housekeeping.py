"""Periodic clean-up run by Celery beat."""

from datetime import timedelta

from django.utils import timezone

from anneal.training.models import ACTIVE_STATES, EventKind, Job, JobEvent, JobState
from anneal.training.state import attempt_end


def jobs_reap_stale(*, timeout_s: int) -> int:
    """Jobs whose worker stopped sending heartbeats (its host died or was killed): a running one goes back to
    the queue and resumes from its latest checkpoint (or fails after settings.JOB_MAX_RESTARTS restarts); one
    that was cancelling is cancelled, one that was pausing or stopping is paused or stopped."""
    cutoff = timezone.now() - timedelta(seconds=timeout_s)
    stale = list(
        Job.objects.filter(state__in=ACTIVE_STATES, heartbeat_at__lt=cutoff).values_list(
            "pk", "state", "attempt", "heartbeat_at"
        )
    )
    ends = {
        JobState.CANCELLING: JobState.CANCELLED,
        JobState.PAUSING: JobState.PAUSED,
        JobState.STOPPING: JobState.STOPPED,
        JobState.RUNNING: JobState.QUEUED,
    }
    for job_id, state, attempt, heartbeat_at in stale:
        attempt_end(
            job_id=job_id,
            attempt=attempt,
            state=ends[state],
            reason=f"the worker running this job sent no heartbeat for {timeout_s} s and is presumed dead",
            until=heartbeat_at,
        )
    return len(stale)


# What a pruned rollout keeps: enough for the charts and filters, without the texts that take the space.
ROLLOUT_KEPT_FIELDS = ("step", "reward", "parts", "domain", "tampering", "held_out")


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
