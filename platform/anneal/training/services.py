"""Writes for training: launch, cancel, retry, and the state changes the gpu worker makes."""

import dataclasses

from django.contrib.auth.models import User
from django.db import transaction
from django.utils import timezone

from anneal.accounts.models import Team
from anneal.accounts.services import audit
from anneal.datasets.models import DatasetVersion
from anneal.errors import InputError
from anneal.training.events import job_event_record
from anneal.training.models import Job, JobState, JobVerifier
from anneal.verifiers.models import VerifierVersion
from gpu_jobs.config import GRPOJobConfig

# Fields of the engine's config that a user sets; the rest (rows, paths) the platform fills in.
_PLATFORM_FIELDS = {"model_store", "output_dir", "rows", "verifiers", "eval_rows"}
HYPER_FIELDS = tuple(f.name for f in dataclasses.fields(GRPOJobConfig) if f.name not in _PLATFORM_FIELDS)


def hyper_defaults() -> dict:
    out = {}
    for f in dataclasses.fields(GRPOJobConfig):
        if f.name in HYPER_FIELDS and f.default is not dataclasses.MISSING:
            out[f.name] = f.default
    return out


def _hyper_check(params: dict, *, row_count: int) -> dict:
    unknown = sorted(set(params) - set(HYPER_FIELDS))
    if unknown:
        raise InputError(f"unknown setting(s) {unknown}; known: {list(HYPER_FIELDS)}", field="params")
    merged = {**hyper_defaults(), **params}
    try:
        GRPOJobConfig(
            **merged,
            model_store="(checked at launch)",
            output_dir="(checked at launch)",
            # As many rows as the check needs to compare with prompts_per_step, without loading the dataset.
            rows=[{"prompt": "check"}] * max(1, min(row_count, 4096)),
            verifiers=[{"name": "check", "spec": {"type": "exact_match"}, "weight": 1.0}],
        )
    except (TypeError, ValueError) as exc:
        message = str(exc)
        if message.startswith("rows"):
            raise InputError(
                message.replace("rows", "the dataset version", 1), field="dataset_version"
            ) from None
        field = next((name for name in HYPER_FIELDS if message.startswith(name)), None)
        raise InputError(message, field=f"params.{field}" if field else "params") from None
    return merged


@transaction.atomic
def job_launch(
    *,
    team: Team,
    user: User,
    name: str,
    dataset_version_id: int,
    verifiers: list[dict],
    params: dict | None = None,
    eval_dataset_version_id: int | None = None,
) -> Job:
    """Freeze a job spec and queue it on the gpu queue. ``verifiers``: [{"verifier_version": id, "weight"}].

    ``eval_dataset_version_id``: held-out rows the job is evaluated on, per domain, before, during and after.
    """
    name = (name or "").strip() or "untitled job"
    version = DatasetVersion.objects.filter(pk=dataset_version_id, dataset__team=team).first()
    if version is None:
        raise InputError(
            f"no dataset version with id {dataset_version_id} in team '{team.name}'", field="dataset_version"
        )
    eval_version = None
    if eval_dataset_version_id is not None:
        eval_version = DatasetVersion.objects.filter(pk=eval_dataset_version_id, dataset__team=team).first()
        if eval_version is None:
            raise InputError(
                f"no dataset version with id {eval_dataset_version_id} in team '{team.name}'",
                field="eval_dataset_version",
            )
    if not verifiers:
        raise InputError("choose at least one verifier", field="verifiers")
    chosen: list[tuple[VerifierVersion, float]] = []
    for index, item in enumerate(verifiers):
        vv = VerifierVersion.objects.filter(pk=item.get("verifier_version"), verifier__team=team).first()
        if vv is None:
            raise InputError(
                f"no verifier version with id {item.get('verifier_version')} in team '{team.name}'",
                field=f"verifiers[{index}].verifier_version",
            )
        weight = item.get("weight", 1.0)
        if not isinstance(weight, int | float) or weight < 0:
            raise InputError("weight must be a number >= 0", field=f"verifiers[{index}].weight")
        chosen.append((vv, float(weight)))
    if not any(weight > 0 for _, weight in chosen):
        raise InputError("at least one verifier needs a weight above 0", field="verifiers")
    names = [vv.verifier.name for vv, _ in chosen]
    if len(set(names)) != len(names):
        raise InputError("the same verifier is chosen twice", field="verifiers")
    hyper = _hyper_check(params or {}, row_count=version.row_count)
    spec = {
        **hyper,
        "dataset_version": version.id,
        "eval_dataset_version": eval_version.id if eval_version else None,
        "verifiers": [
            {"name": vv.verifier.name, "verifier_version": vv.id, "version": vv.number, "weight": w}
            for vv, w in chosen
        ],
    }
    job = Job.objects.create(
        team=team,
        created_by=user,
        name=name,
        spec=spec,
        dataset_version=version,
        max_steps=hyper["max_steps"],
    )
    for vv, weight in chosen:
        JobVerifier.objects.create(job=job, verifier_version=vv, name=vv.verifier.name, weight=weight)
    job_event_record(job_id=job.id, kind="state", payload={"state": JobState.QUEUED})
    audit(team=team, user=user, action="job.launch", obj=job)
    _enqueue(job)
    return job


def _enqueue(job: Job) -> None:
    def send() -> None:
        from workers.tasks import job_run

        job_run.delay(job.id)

    transaction.on_commit(send)


def job_cancel(*, job: Job, user: User | None) -> Job:
    """Queued jobs end at once; a running job is marked cancelling and its worker kills the process group."""
    with transaction.atomic():
        if Job.objects.filter(pk=job.pk, state=JobState.QUEUED).update(
            state=JobState.CANCELLED, finished_at=timezone.now()
        ):
            job_event_record(job_id=job.pk, kind="state", payload={"state": JobState.CANCELLED})
        elif Job.objects.filter(pk=job.pk, state=JobState.RUNNING).update(state=JobState.CANCELLING):
            job_event_record(job_id=job.pk, kind="state", payload={"state": JobState.CANCELLING})
        audit(team=job.team, user=user, action="job.cancel", obj=job)
    job.refresh_from_db()
    return job


@transaction.atomic
def job_retry(*, job: Job, user: User) -> Job:
    """Launch a new job with the same frozen spec."""
    if not job.is_finished:
        raise InputError(f"job #{job.pk} is {job.state}; only a finished job can be retried", field="state")
    new = Job.objects.create(
        team=job.team,
        created_by=user,
        name=job.name,
        spec=job.spec,
        dataset_version=job.dataset_version,
        max_steps=job.max_steps,
        retry_of=job,
    )
    for jv in job.job_verifiers.all():
        JobVerifier.objects.create(
            job=new, verifier_version=jv.verifier_version, name=jv.name, weight=jv.weight
        )
    job_event_record(job_id=new.id, kind="state", payload={"state": JobState.QUEUED, "retry_of": job.pk})
    audit(team=job.team, user=user, action="job.retry", obj=new, retry_of=job.pk)
    _enqueue(new)
    return new


def job_claim(*, job_id: int, worker: str) -> bool:
    """Move a queued job to running for this worker; False when another worker or a cancel got there first."""
    with transaction.atomic():
        claimed = Job.objects.filter(pk=job_id, state=JobState.QUEUED).update(
            state=JobState.RUNNING, worker=worker, started_at=timezone.now(), heartbeat_at=timezone.now()
        )
        if claimed:
            job_event_record(
                job_id=job_id, kind="state", payload={"state": JobState.RUNNING, "worker": worker}
            )
    return bool(claimed)


def job_finish(*, job_id: int, state: str, error: str = "") -> None:
    with transaction.atomic():
        Job.objects.filter(pk=job_id).update(
            state=state, error=error, finished_at=timezone.now(), child_pid=None
        )
        payload = {"state": state}
        if error:
            payload["error"] = error
        job_event_record(job_id=job_id, kind="state", payload=payload)
