"""Writes for training: launch, cancel, retry, and the state changes the gpu worker makes."""

from typing import NamedTuple

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
from anneal.training.length import prompt_length_check
from anneal.training.limits import job_columns, run_limits_split
from anneal.training.models import Job, JobDataset, JobState, JobVerifier
from anneal.training.spec import (
    dataset_versions_check,
    domains_check,
    model_check,
    settings_check,
    version_domains,
)
from anneal.verifiers.models import VerifierVersion
from gpu_jobs.spec import TrainingSettings


class VerifierChoice(NamedTuple):
    version: VerifierVersion
    weight: float
    domains: list[str]  # the domains it scores; empty: every domain


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
    ``params``: the user's settings (gpu_jobs.spec.TrainingSettings) and run limits (anneal.training.limits).
    """
    name = _launch_text_check(name=name, params=params, domain_weights=domain_weights)
    versions = _training_versions(team=team, ids=dataset_version_ids, version_id=dataset_version_id)
    eval_version = _eval_version(team=team, version_id=eval_dataset_version_id)
    # Agent jobs (params.environment) are rewarded by their environment; verifiers are optional extras there.
    agentic = isinstance(params, dict) and params.get("environment") is not None
    choices = _verifier_choices(team=team, verifiers=verifiers, agentic=agentic)
    # Scheduling and cost limits (priority, devices, budget, time limit) are checked apart from the settings.
    params, limits = run_limits_split(params or {}, team=team)
    settings = settings_check(params, row_count=sum(v.row_count for v in versions))
    model_check(settings.model)
    # Prompts against max_prompt_length, the model's window and the device's memory (anneal.training.length).
    prompt_tokens = prompt_length_check(
        settings_=settings, versions=versions, eval_version=eval_version, device_type=limits["device_type"]
    )
    domain_rows = _domain_rows(
        versions=versions, domain_weights=domain_weights, choices=choices, agentic=agentic
    )
    if agentic and eval_version is not None:
        # An agent job's held-out rows are tasks too: the evaluation plays an episode on each.
        agent_rows_check([eval_version], field="eval_dataset_version")
    spec = _frozen_spec(
        settings=settings,
        limits=limits,
        versions=versions,
        eval_version=eval_version,
        domain_weights=domain_weights,
        domain_rows=domain_rows,
        choices=choices,
    )
    spec["prompt_tokens"] = prompt_tokens
    job = _job_create(
        team=team,
        user=user,
        name=name,
        spec=spec,
        verifiers=[(c.version, c.version.verifier.name, c.weight) for c in choices],
        dataset_version=versions[0],
        datasets=[(version, version_domains(version) or {}) for version in versions],
        eval_version=eval_version,
    )
    job_event_record(job_id=job.id, kind="state", payload={"state": JobState.QUEUED})
    audit(team=team, user=user, action="job.launch", obj=job)
    _enqueue(job)
    return job


def _launch_text_check(*, name: str, params: dict | None, domain_weights: dict | None) -> str:
    """The job's name, once no text the user gave holds a NUL."""
    reject_nul(name, field="name")
    reject_nul(params or {}, field="params")
    reject_nul(domain_weights or {}, field="domain_weights")
    return (name or "").strip() or "untitled job"


def _training_versions(*, team: Team, ids: list[int] | None, version_id: int | None) -> list[DatasetVersion]:
    """The versions the job trains on: several (``ids``) or one; the first is the job's main version."""
    if ids:
        return dataset_versions_check(team=team, ids=list(ids))
    if version_id is None:
        raise InputError(
            "choose the dataset version to train on (or several, in dataset_versions)",
            field="dataset_version",
        )
    version = DatasetVersion.objects.filter(pk=version_id, dataset__team=team).first()
    if version is None:
        raise InputError(
            f"no dataset version with id {version_id} in team '{team.name}'", field="dataset_version"
        )
    return [version]


def _eval_version(*, team: Team, version_id: int | None) -> DatasetVersion | None:
    if version_id is None:
        return None
    version = DatasetVersion.objects.filter(pk=version_id, dataset__team=team).first()
    if version is None:
        raise InputError(
            f"no dataset version with id {version_id} in team '{team.name}'", field="eval_dataset_version"
        )
    return version


def _verifier_choices(*, team: Team, verifiers: list[dict], agentic: bool) -> list[VerifierChoice]:
    """The team's verifier versions the launch names, each with its weight and domains."""
    if not verifiers and not agentic:
        raise InputError("choose at least one verifier", field="verifiers")
    choices = []
    for index, item in enumerate(verifiers):
        wanted = item.get("verifier_version")
        if not isinstance(wanted, int) or isinstance(wanted, bool):
            raise InputError(
                f"give a verifier version's id (a whole number), got {wanted!r}",
                field=f"verifiers[{index}].verifier_version",
            )
        version = VerifierVersion.objects.filter(pk=wanted, verifier__team=team).first()
        if version is None:
            raise InputError(
                f"no verifier version with id {wanted} in team '{team.name}'",
                field=f"verifiers[{index}].verifier_version",
            )
        weight = item.get("weight", 1.0)
        if not isinstance(weight, int | float) or weight < 0:
            raise InputError("weight must be a number >= 0", field=f"verifiers[{index}].weight")
        choices.append(VerifierChoice(version, float(weight), item.get("domains") or []))
    if choices and not any(choice.weight > 0 for choice in choices):
        raise InputError("at least one verifier needs a weight above 0", field="verifiers")
    names = [choice.version.verifier.name for choice in choices]
    if len(set(names)) != len(names):
        raise InputError("the same verifier is chosen twice", field="verifiers")
    return choices


def _domain_rows(
    *,
    versions: list[DatasetVersion],
    domain_weights: dict | None,
    choices: list[VerifierChoice],
    agentic: bool,
) -> dict[str, int] | None:
    """Rows per domain of the data, once the weights and the verifiers' domains are checked against it."""
    if agentic:
        agent_rows_check(versions)
        return None  # the environment rewards every row; the engine rejects domain weights for it
    return domains_check(
        versions=versions,
        domain_weights=domain_weights,
        verifiers=[{"weight": choice.weight, "domains": choice.domains} for choice in choices],
    )


def _frozen_spec(
    *,
    settings: TrainingSettings,
    limits: dict,
    versions: list[DatasetVersion],
    eval_version: DatasetVersion | None,
    domain_weights: dict | None,
    domain_rows: dict[str, int] | None,
    choices: list[VerifierChoice],
) -> dict:
    """Everything the run needs, in the job's one spec: the user's settings, the run limits, the data and
    the verifiers. The training child reads the settings back with ``TrainingSettings.from_spec``."""
    return {
        **settings.to_dict(),
        **limits,
        "dataset_version": versions[0].id,
        "dataset_versions": [v.id for v in versions],
        "domain_weights": dict(domain_weights or {}),
        "domain_rows": domain_rows,
        "eval_dataset_version": eval_version.id if eval_version else None,
        "verifiers": [
            {
                "name": choice.version.verifier.name,
                "verifier_version": choice.version.id,
                "version": choice.version.number,
                "weight": choice.weight,
                **({"domains": list(choice.domains)} if choice.domains else {}),
            }
            for choice in choices
        ],
    }


def _job_create(
    *,
    team: Team,
    user: User,
    name: str,
    spec: dict,
    verifiers: list[tuple[VerifierVersion, str, float]],
    dataset_version: DatasetVersion,
    datasets: list[tuple[DatasetVersion, dict]],
    eval_version: DatasetVersion | None,
    retry_of: Job | None = None,
) -> Job:
    """The job's row with its verifiers (version, name, weight) and the datasets it mixes (version, rows per
    domain); ``dataset_version`` is its main one."""
    job = Job.objects.create(
        team=team,
        created_by=user,
        name=name,
        spec=spec,
        dataset_version=dataset_version,
        eval_dataset_version=eval_version,
        retry_of=retry_of,
        **job_columns(spec),
    )
    for version, verifier_name, weight in verifiers:
        JobVerifier.objects.create(job=job, verifier_version=version, name=verifier_name, weight=weight)
    for position, (version, domains) in enumerate(datasets):
        JobDataset.objects.create(job=job, dataset_version=version, position=position, domains=domains)
    return job


def agent_rows_check(versions: list[DatasetVersion], *, field: str = "") -> None:
    """An agent job's data must be repositories: rows with files and test_files (e.g. the repo-fix pack).
    Errors name ``field`` when given, else dataset_versions[index]."""
    for index, version in enumerate(versions):
        missing = sorted({"prompt", "files", "test_files"} - set(version.columns or []))
        if missing:
            raise InputError(
                f"{version} has no {', '.join(missing)} column(s): an environment job trains and is evaluated "
                "on repositories (rows with prompt, files and test_files), such as the repo-fix task pack",
                field=field or f"dataset_versions[{index}]",
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
    new = _job_create(
        team=job.team,
        user=user,
        name=job.name,
        spec=job.spec,
        verifiers=[(jv.verifier_version, jv.name, jv.weight) for jv in job.job_verifiers.all()],
        dataset_version=job.dataset_version,
        datasets=[(jd.dataset_version, jd.domains) for jd in job.job_datasets.all()],
        eval_version=job.eval_dataset_version,
        retry_of=job,
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
