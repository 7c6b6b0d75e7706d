from django.db.models import QuerySet

from anneal.training.models import Job, JobEvent


def job_events_after(*, job: Job, after: int, limit: int = 500) -> QuerySet[JobEvent]:
    return job.events.filter(seq__gt=after).order_by("seq")[:limit]
