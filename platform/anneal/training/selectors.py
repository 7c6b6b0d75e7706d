from django.db.models import QuerySet

from anneal.training.models import EventKind, Job, JobEvent


def job_events_after(*, job: Job, after: int, limit: int = 500) -> QuerySet[JobEvent]:
    return job.events.filter(seq__gt=after).order_by("seq")[:limit]


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
