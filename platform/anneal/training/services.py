"""Writes for training: launch, cancel, retry, and the state changes the gpu worker makes."""

import dataclasses

from django.contrib.auth.models import User
from django.db import transaction
from django.db.models import F, Value
from django.db.models.functions import Coalesce
from django.utils import timezone

from anneal.accounts.models import Team
from anneal.accounts.services import audit
from anneal.datasets.models import DatasetVersion
from anneal.errors import InputError, reject_nul, without_nul
from anneal.training.dispatch import dispatch_on_commit
from anneal.training.events import job_event_record
from anneal.training.limits import job_columns, run_limits_split
from anneal.training.models import Job, JobDataset, JobState, JobVerifier
from anneal.training.spec import dataset_versions_check, domains_check, model_check, version_domains
from anneal.verifiers.models import VerifierVersion
from gpu_jobs.agent.spec import validate_environment
from gpu_jobs.config import GRPOJobConfig

# Fields of the engine's config that a user sets; the rest (rows, paths) the platform fills in.
_PLATFORM_FIELDS = {"model_store", "output_dir", "rows", "verifiers", "eval_rows", "domain_weights"}
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
    if merged.get("environment") is not None:
        # An agent job's option is checked alone here; its rows (files, tests) at launch (agent_rows_check).
        try:
            merged["environment"] = validate_environment(merged["environment"]).to_dict()
        except ValueError as exc:
            raise InputError(str(exc), field="params.environment") from None
    try:
        checked = GRPOJobConfig(
            **{**merged, "environment": None},
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
    # A batch_size sets prompts_per_step: the frozen spec says what the run will do.
    merged["prompts_per_step"] = checked.prompts_per_step
    return merged


@transaction.atomic
def job_launch(
    *,
    team: Team,
    user: User,
    name: str,
    dataset_version_id: int | None = None,
    verifiers: list[dict],
    params: dict | None = None,
    eval_dataset_version_id: int | None = None,
    dataset_version_ids: list[int] | None = None,
    domain_weights: dict | None = None,
) -> Job:
    """Freeze a job spec and queue it on the gpu queue. ``verifiers``: [{"verifier_version": id, "weight",
    "domains": optional list, the domains it scores}].

    The rows come from ``dataset_version_ids`` (several versions, pooled) or ``dataset_version_id`` (one);
    ``domain_weights``: {domain: share of the prompts}, summing to 1 (empty: equal shares).
    ``eval_dataset_version_id``: held-out rows the job is evaluated on, per domain, before, during and after.
    """
    reject_nul(name, field="name")
    reject_nul(params or {}, field="params")
    reject_nul(domain_weights or {}, field="domain_weights")
    name = (name or "").strip() or "untitled job"
    if dataset_version_ids:
        versions = dataset_versions_check(team=team, ids=list(dataset_version_ids))
    elif dataset_version_id is None:
        raise InputError(
            "choose the dataset version to train on (or several, in dataset_versions)",
            field="dataset_version",
        )
    else:
        first = DatasetVersion.objects.filter(pk=dataset_version_id, dataset__team=team).first()
        if first is None:
            raise InputError(
                f"no dataset version with id {dataset_version_id} in team '{team.name}'",
                field="dataset_version",
            )
        versions = [first]
    version = versions[0]
    eval_version = None
    if eval_dataset_version_id is not None:
        eval_version = DatasetVersion.objects.filter(pk=eval_dataset_version_id, dataset__team=team).first()
        if eval_version is None:
            raise InputError(
                f"no dataset version with id {eval_dataset_version_id} in team '{team.name}'",
                field="eval_dataset_version",
            )
    # Agent jobs (params.environment) are rewarded by their environment; verifiers are optional extras there.
    agentic = isinstance(params, dict) and params.get("environment") is not None
    if not verifiers and not agentic:
        raise InputError("choose at least one verifier", field="verifiers")
    chosen: list[tuple[VerifierVersion, float]] = []
    for index, item in enumerate(verifiers):
        wanted = item.get("verifier_version")
        if not isinstance(wanted, int) or isinstance(wanted, bool):
            raise InputError(
                f"give a verifier version's id (a whole number), got {wanted!r}",
                field=f"verifiers[{index}].verifier_version",
            )
        vv = VerifierVersion.objects.filter(pk=wanted, verifier__team=team).first()
        if vv is None:
            raise InputError(
                f"no verifier version with id {wanted} in team '{team.name}'",
                field=f"verifiers[{index}].verifier_version",
            )
        weight = item.get("weight", 1.0)
        if not isinstance(weight, int | float) or weight < 0:
            raise InputError("weight must be a number >= 0", field=f"verifiers[{index}].weight")
        chosen.append((vv, float(weight)))
    if chosen and not any(weight > 0 for _, weight in chosen):
        raise InputError("at least one verifier needs a weight above 0", field="verifiers")
    names = [vv.verifier.name for vv, _ in chosen]
    if len(set(names)) != len(names):
        raise InputError("the same verifier is chosen twice", field="verifiers")
    # Scheduling and cost limits (priority, devices, budget, time limit) are checked apart from the engine's.
    params, limits = run_limits_split(params or {}, team=team)
    hyper = _hyper_check(params, row_count=sum(v.row_count for v in versions))
    model_check(hyper["model"])
    routes = [item.get("domains") or [] for item in verifiers]
    if agentic:
        agent_rows_check(versions)
        domain_rows = None  # the environment rewards every row; the engine rejects domain weights for it
    else:
        domain_rows = domains_check(
            versions=versions,
            domain_weights=domain_weights,
            verifiers=[{"weight": w, "domains": route} for (_, w), route in zip(chosen, routes, strict=True)],
        )
    spec = {
        **hyper,
        **limits,
        "dataset_version": version.id,
        "dataset_versions": [v.id for v in versions],
        "domain_weights": dict(domain_weights or {}),
        "domain_rows": domain_rows,
        "eval_dataset_version": eval_version.id if eval_version else None,
        "verifiers": [
            {
                "name": vv.verifier.name,
                "verifier_version": vv.id,
                "version": vv.number,
                "weight": w,
                **({"domains": list(route)} if route else {}),
            }
            for (vv, w), route in zip(chosen, routes, strict=True)
        ],
    }
    job = Job.objects.create(
        team=team,
        created_by=user,
        name=name,
        spec=spec,
        dataset_version=version,
        eval_dataset_version=eval_version,
        max_steps=hyper["max_steps"],
        **job_columns(limits),
    )
    for vv, weight in chosen:
        JobVerifier.objects.create(job=job, verifier_version=vv, name=vv.verifier.name, weight=weight)
    for position, used in enumerate(versions):
        JobDataset.objects.create(
            job=job, dataset_version=used, position=position, domains=version_domains(used) or {}
        )
    job_event_record(job_id=job.id, kind="state", payload={"state": JobState.QUEUED})
    audit(team=team, user=user, action="job.launch", obj=job)
    _enqueue(job)
    return job


def agent_rows_check(versions: list[DatasetVersion]) -> None:
    """An agent job's data must be repositories: rows with files and test_files (e.g. the repo-fix pack)."""
    for index, version in enumerate(versions):
        missing = sorted({"prompt", "files", "test_files"} - set(version.columns or []))
        if missing:
            raise InputError(
                f"{version} has no {', '.join(missing)} column(s): an environment job trains on repositories "
                "(rows with prompt, files and test_files), such as the repo-fix task pack",
                field=f"dataset_versions[{index}]",
            )


def _enqueue(job: Job) -> None:
    # The job waits until the scheduler has a gpu slot for it within its team's limits (training.dispatch).
    dispatch_on_commit()


def job_cancel(*, job: Job, user: User | None) -> Job:
    """Queued and paused jobs end at once; a running one is marked cancelling and its worker kills the process
    group."""
    with transaction.atomic():
        if Job.objects.filter(pk=job.pk, state__in=[JobState.QUEUED, JobState.PAUSED]).update(
            state=JobState.CANCELLED, finished_at=timezone.now()
        ):
            job_event_record(job_id=job.pk, kind="state", payload={"state": JobState.CANCELLED})
            dispatch_on_commit()  # a queued job may have held a gpu slot
        elif Job.objects.filter(
            pk=job.pk, state__in=[JobState.RUNNING, JobState.PAUSING, JobState.STOPPING]
        ).update(state=JobState.CANCELLING):
            job_event_record(job_id=job.pk, kind="state", payload={"state": JobState.CANCELLING})
        audit(team=job.team, user=user, action="job.cancel", obj=job)
    job.refresh_from_db()
    return job


class JobInputsGone(InputError):
    """A dataset version the job's spec names was deleted (before versions in use were protected): the job
    cannot run as it was frozen. The API answers 409."""


def job_inputs_check(*, job: Job) -> None:
    """JobInputsGone naming the first dataset version ``job``'s spec names that no longer exists."""
    spec = job.spec if isinstance(job.spec, dict) else {}
    named = [("dataset_versions", v) for v in spec.get("dataset_versions") or [spec.get("dataset_version")]]
    named.append(("eval_dataset_version", spec.get("eval_dataset_version")))
    wanted = {v for _, v in named if isinstance(v, int)}
    existing = set(DatasetVersion.objects.filter(pk__in=wanted).values_list("pk", flat=True))
    for field, version in named:
        if isinstance(version, int) and version not in existing:
            role = "held-out evaluation" if field == "eval_dataset_version" else "training"
            raise JobInputsGone(
                f"job #{job.pk} cannot run again: its {role} dataset version (id {version}) was deleted. "
                "Launch a new job with the versions you have now.",
                field=field,
            )


@transaction.atomic
def job_retry(*, job: Job, user: User) -> Job:
    """Launch a new job with the same frozen spec."""
    if not job.is_finished:
        raise InputError(f"job #{job.pk} is {job.state}; only a finished job can be retried", field="state")
    job_inputs_check(job=job)
    new = Job.objects.create(
        team=job.team,
        created_by=user,
        name=job.name,
        spec=job.spec,
        dataset_version=job.dataset_version,
        eval_dataset_version=job.eval_dataset_version,
        max_steps=job.max_steps,
        retry_of=job,
        **job_columns(job.spec),
    )
    for jv in job.job_verifiers.all():
        JobVerifier.objects.create(
            job=new, verifier_version=jv.verifier_version, name=jv.name, weight=jv.weight
        )
    for jd in job.job_datasets.all():
        JobDataset.objects.create(
            job=new, dataset_version=jd.dataset_version, position=jd.position, domains=jd.domains
        )
    job_event_record(job_id=new.id, kind="state", payload={"state": JobState.QUEUED, "retry_of": job.pk})
    audit(team=job.team, user=user, action="job.retry", obj=new, retry_of=job.pk)
    _enqueue(new)
    return new


def job_claim(*, job_id: int, worker: str, resume_step: int | None = None) -> int | None:
    """Move a queued job to running for this worker as a new attempt and return its number; None when another
    worker, a pause or a cancel got there first. ``resume_step``: the checkpoint step this attempt resumes from.
    """
    with transaction.atomic():
        now = timezone.now()
        claimed = Job.objects.filter(pk=job_id, state=JobState.QUEUED).update(
            state=JobState.RUNNING,
            worker=worker,
            started_at=Coalesce("started_at", Value(now)),
            attempt_started_at=now,
            heartbeat_at=now,
            attempt=F("attempt") + 1,
            reason="",
        )
        if not claimed:
            return None
        attempt = Job.objects.values_list("attempt", flat=True).get(pk=job_id)
        payload = {"state": JobState.RUNNING, "worker": worker, "attempt": attempt}
        if resume_step is not None:
            payload["resumed_from_step"] = resume_step
        job_event_record(job_id=job_id, kind="state", payload=payload)
    return attempt


def job_finish(*, job_id: int, state: str, error: str = "") -> None:
    """End a job. ``error`` is the end of the child's log, which may hold anything the job printed: a NUL in it
    is stored as U+FFFD, so the job still ends."""
    error = without_nul(error)
    with transaction.atomic():
        Job.objects.filter(pk=job_id).update(
            state=state, error=error, finished_at=timezone.now(), child_pid=None
        )
        payload = {"state": state}
        if error:
            payload["error"] = error
        job_event_record(job_id=job_id, kind="state", payload=payload)
