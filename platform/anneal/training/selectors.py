from django.db.models import Q, QuerySet

from anneal.training.models import EventKind, Job, JobEvent
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


def job_rollouts(*, job: Job, tampering: bool | None = None, step: int | None = None) -> QuerySet[JobEvent]:
    """The job's rollout events in seq order; ``tampering`` True keeps only those that tried to tamper with
    a verifier (False: only the others); ``step`` keeps one step's."""
    rollouts = job.events.filter(kind=EventKind.ROLLOUT).order_by("seq")
    if tampering:
        rollouts = rollouts.filter(TAMPERING_ROLLOUT)
    elif tampering is not None:
        # Not exclude(TAMPERING_ROLLOUT): a missing JSON key is NULL in SQL, and NOT (NULL) drops the row.
        rollouts = rollouts.exclude(pk__in=rollouts.filter(TAMPERING_ROLLOUT).values("pk"))
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
