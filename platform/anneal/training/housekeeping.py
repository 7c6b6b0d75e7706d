"""Periodic clean-up run by Celery beat."""

from datetime import timedelta

from django.utils import timezone

from anneal.training.models import Job, JobState
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
