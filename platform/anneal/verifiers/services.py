"""Writes for verifiers: every save validates the spec, runs the hack probes and freezes a new version."""

from typing import TYPE_CHECKING

from django.conf import settings
from django.contrib.auth.models import User
from django.db import IntegrityError, transaction
from django.db.models import Max

from anneal.accounts.models import Team
from anneal.accounts.services import audit
from anneal.errors import InputError, reject_nul, without_nul
from anneal.verifiers.models import Verifier, VerifierTestCase, VerifierVersion
from anneal.verifiers.outbound import judge_spec_check, team_outbound
from anneal.verifiers.sandbox_quota import TeamSandbox
from gpu_jobs.rewards import SpecError, build_scorer, validate_spec
from gpu_jobs.rewards.probes import run_probes
from gpu_jobs.rewards.reward_model import model_folder, weights_mb
from sandboxes.client import SandboxClient

if TYPE_CHECKING:
    from anneal.training.models import Job


class VerifierInUse(InputError):
    """A job used the verifier: the API answers 409 Conflict, the page shows the message."""


def platform_sandbox(*, team: Team | None = None) -> SandboxClient:
    """The sandbox the web side scores code with: the same execution settings as training jobs, and the
    team's sandbox quota when a team is given."""
    return SandboxClient(
        mode=settings.SANDBOX_EXECUTION,
        backend=settings.SANDBOX_BACKEND,
        broker_url=settings.CELERY_BROKER_URL,
        result_backend_url=settings.CELERY_RESULT_BACKEND,
        timeout_s=60.0,
        team=str(team.pk) if team is not None else None,
        max_batch=settings.SANDBOX_TEAM_QUOTA,
    )


def team_sandbox(*, team: Team) -> TeamSandbox:
    """The platform sandbox with its runs counted against ``team``'s sandbox quota (previews, probes, test
    cases): its ``refused`` is set when the quota had no room."""
    return TeamSandbox(team=team, client=platform_sandbox(team=team))


def verifier_spec_check(spec: object) -> dict:
    """Return the normalised spec or raise InputError naming the field (prefixed ``spec.``)."""
    if not isinstance(spec, dict):
        raise InputError("the spec must be a JSON object with a 'type'", field="spec")
    reject_nul(spec, field="spec")
    try:
        return validate_spec(spec)
    except SpecError as exc:
        raise InputError(exc.message, field=f"spec.{exc.field}") from None


def web_model_problem(spec: dict) -> str:
    """Why the web process must not load a model `spec` (a normalised spec, composites' parts included)
    scores with ("" when it may): a reward model past PREVIEW_MODEL_MAX_MB."""
    limit = settings.PREVIEW_MODEL_MAX_MB
    for part in [spec, *[part.get("spec") or {} for part in spec.get("parts") or []]]:
        if part is not spec:
            problem = web_model_problem(part)
            if problem:
                return problem
        elif spec.get("type") == "reward_model":
            size = weights_mb(model_folder(spec["model"]))
            if size > limit:
                return (
                    f"reward model {spec['model']} is {size:,.1f} MB; the web process loads reward models up to "
                    f"{limit:,} MB (ANNEAL_PREVIEW_MODEL_MAX_MB): score with it in a job, on the gpu-worker"
                )
    return ""


def verifier_probe(*, spec: dict, team: Team, rows: list[dict] | None = None) -> tuple[list[dict], bool]:
    """The hack probes' results for a normalised spec, and whether any scored high.

    The probes' sandbox runs count against ``team``'s sandbox quota: SandboxBusy (a LimitReached) when it has
    no room, so that no version is saved unprobed for that. Any other failure is recorded, not raised.
    A reason may quote what the verifier's own code returned or printed, NUL included: it is stored as U+FFFD.
    """
    too_big = web_model_problem(spec)
    if too_big:
        skipped = {"name": "probes", "description": "Hack probes", "score": 0.0, "reason": ""}
        return [{**skipped, "flagged": False, "skipped": f"not probed here: {too_big}"}], False
    sandbox = team_sandbox(team=team)
    try:
        results = [without_nul(result.to_dict()) for result in run_probes(spec, rows=rows, sandbox=sandbox)]
    except Exception as exc:  # the probes must not stop a save: record that they could not run
        return [
            {
                "name": "probes",
                "description": "Hack probes",
                "score": 0.0,
                "reason": "",
                "flagged": False,
                "skipped": without_nul(f"the probes could not run: {type(exc).__name__}: {exc}"[:300]),
            }
        ], False
    if sandbox.refused is not None:
        raise sandbox.refused
    return results, any(result["flagged"] for result in results)


def verifier_create(*, team: Team, user: User, name: str, spec: dict) -> Verifier:
    name = (name or "").strip()
    if not name:
        raise InputError("give the verifier a name", field="name")
    reject_nul(name, field="name")
    limit = Verifier._meta.get_field("name").max_length
    if len(name) > limit:
        raise InputError(f"at most {limit} characters, got {len(name)}", field="name")
    normalised = verifier_spec_check(spec)
    judge_spec_check(normalised, team=team)
    # Probes run sandboxes for seconds: before the transaction, so no row stays locked meanwhile.
    probe_results, flagged = verifier_probe(spec=normalised, team=team)
    with transaction.atomic():
        try:
            with transaction.atomic():
                verifier = Verifier.objects.create(team=team, name=name, created_by=user)
        except IntegrityError:
            raise InputError(f"a verifier named '{name}' already exists in this team", field="name") from None
        VerifierVersion.objects.create(
            verifier=verifier,
            number=1,
            spec=normalised,
            probe_results=probe_results,
            flagged=flagged,
            created_by=user,
        )
        audit(team=team, user=user, action="verifier.create", obj=verifier, type=normalised["type"])
    return verifier


def verifier_version_create(*, verifier: Verifier, user: User, spec: dict) -> VerifierVersion:
    normalised = verifier_spec_check(spec)
    judge_spec_check(normalised, team=verifier.team)
    probe_results, flagged = verifier_probe(spec=normalised, team=verifier.team)
    with transaction.atomic():
        Verifier.objects.select_for_update().filter(pk=verifier.pk).first()
        number = (verifier.versions.aggregate(n=Max("number"))["n"] or 0) + 1
        version = VerifierVersion.objects.create(
            verifier=verifier,
            number=number,
            spec=normalised,
            probe_results=probe_results,
            flagged=flagged,
            created_by=user,
        )
        audit(team=verifier.team, user=user, action="verifier.version", obj=version, number=number)
    return version


def verifier_clone(*, verifier: Verifier, user: User, name: str) -> Verifier:
    """A new verifier in the same team whose version 1 is `verifier`'s latest spec."""
    latest = verifier.latest_version
    if latest is None:
        raise InputError("this verifier has no version to copy", field="verifier")
    return verifier_create(team=verifier.team, user=user, name=name, spec=latest.spec)


@transaction.atomic
def verifier_delete(*, verifier: Verifier, user: User) -> None:
    """Delete a verifier and its versions; refused (InputError) while any job used one of its versions."""
    from anneal.training.models import JobVerifier

    jobs = sorted(
        set(JobVerifier.objects.filter(verifier_version__verifier=verifier).values_list("job_id", flat=True))
    )
    if jobs:
        shown = ", ".join(f"#{job}" for job in jobs[:5]) + (" and more" if len(jobs) > 5 else "")
        raise VerifierInUse(
            f"'{verifier.name}' cannot be deleted: {len(jobs)} job(s) used it ({shown}); jobs keep the "
            "version they ran with. Clone it or save a new version instead.",
            field="verifier",
        )
    audit(team=verifier.team, user=user, action="verifier.delete", obj=verifier, name=verifier.name)
    verifier.delete()


@transaction.atomic
def verifier_test_case_from_rollout(
    *, job: "Job", seq: int, verifier: Verifier, expected_pass: bool, note: str, user: User
) -> VerifierTestCase:
    """Keep a flagged rollout of ``job`` as a test case of ``verifier`` (one of the job's verifiers).

    The row comes from the job's frozen dataset version, so a python-tests case keeps its tests.
    """
    from anneal.datasets.storage import read_rows
    from anneal.training.models import EventKind

    event = job.events.filter(seq=seq, kind=EventKind.ROLLOUT).first()
    if event is None:
        raise InputError(f"job #{job.pk} has no rollout with seq {seq}", field="seq")
    if not job.job_verifiers.filter(verifier_version__verifier=verifier).exists():
        raise InputError(f"'{verifier.name}' is not one of job #{job.pk}'s verifiers", field="verifier")
    payload = event.payload
    if payload.get("pruned") or "row_index" not in payload:
        raise InputError(
            "this rollout's texts are no longer kept (retention), so it cannot be a test case", field="seq"
        )
    rows = read_rows(job.dataset_version.rows_path, offset=payload["row_index"], limit=1)
    if not rows:
        raise InputError(f"row {payload['row_index']} is missing from the job's dataset version", field="seq")
    case = VerifierTestCase.objects.create(
        verifier=verifier,
        row=rows[0],
        completion=payload.get("completion", ""),
        expected_pass=expected_pass,
        note=(note or "").strip(),
        source_job=job,
        source_seq=seq,
        created_by=user,
    )
    audit(team=verifier.team, user=user, action="verifier.test_case", obj=case, job=job.pk, seq=seq)
    return case


def verifier_test_cases_run(*, version: VerifierVersion) -> list[dict]:
    """Score every test case of the verifier with ``version``: [{"case", "score", "reason", "ok"}].

    ``ok`` when the verdict matches the expert's: full marks for a should-pass case, less for a should-fail one.
    """
    cases = list(version.verifier.test_cases.all())
    if not cases:
        return []
    # Counted against the team's sandbox quota; when it is full, each case shows that as its reason.
    team = version.verifier.team
    scorer = build_scorer(version.spec, sandbox=team_sandbox(team=team), outbound=team_outbound(team))
    results = scorer.score_batch([case.row for case in cases], [case.completion for case in cases])
    return [
        {
            "case": case,
            "score": result.score,
            "reason": result.reason,
            "ok": (result.score >= 1.0) == case.expected_pass,
        }
        for case, result in zip(cases, results, strict=True)
    ]
