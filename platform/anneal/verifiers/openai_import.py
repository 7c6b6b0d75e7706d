"""A verifier from an OpenAI fine-tuning grader: converted by gpu_jobs.rewards.openai_graders, saved as any new
verifier is (spec checked, judge targets checked against the team, hack probes, version 1)."""

from dataclasses import dataclass

from django.contrib.auth.models import User

from anneal.accounts.models import Team
from anneal.errors import InputError, reject_nul
from anneal.verifiers.models import Verifier
from anneal.verifiers.services import verifier_create
from gpu_jobs.rewards.openai_graders import GraderRefused, Judge, convert_grader

# A judge target the import filled in from the request: refused there, the error names the request's field.
_JUDGE_FIELDS = {"endpoint": "judge_endpoint", "api_key_secret": "judge_api_key_secret"}


@dataclass
class GraderImport:
    verifier: Verifier
    notes: list[str]


def openai_grader_convert(
    *, team: Team, grader: object, judge_endpoint: str = "", judge_api_key_secret: str = ""
) -> tuple[dict, str, list[str]]:
    """(the Anneal spec, the grader's name, notes) for ``grader``; InputError naming ``grader.<path>``.

    A score_model's model is the team's deployment of that name, else ``judge_endpoint`` serving it."""
    from anneal.deployments.models import Deployment

    reject_nul(grader, field="grader")
    judge = Judge(
        deployments=set(Deployment.objects.filter(team=team).values_list("name", flat=True)),
        endpoint=judge_endpoint.strip() or None,
        api_key_secret=judge_api_key_secret.strip() or None,
    )
    try:
        imported = convert_grader(grader, judge=judge)
    except GraderRefused as exc:
        raise InputError(exc.message, field=f"grader.{exc.field}") from None
    return imported.spec, imported.name, imported.notes


def verifier_import_openai(
    *,
    team: Team,
    user: User,
    grader: object,
    name: str = "",
    judge_endpoint: str = "",
    judge_api_key_secret: str = "",
) -> GraderImport:
    """A new verifier of ``team`` whose version 1 is ``grader`` carried over; named ``name`` or the grader's."""
    spec, grader_name, notes = openai_grader_convert(
        team=team, grader=grader, judge_endpoint=judge_endpoint, judge_api_key_secret=judge_api_key_secret
    )
    try:
        verifier = verifier_create(team=team, user=user, name=(name or "").strip() or grader_name, spec=spec)
    except InputError as exc:
        raise InputError([_request_field(error) for error in exc.errors]) from None
    return GraderImport(verifier=verifier, notes=notes)


def _request_field(error: dict) -> dict:
    """An error about the converted spec named by the request field it came from."""
    field = error.get("field", "")
    last = field.rsplit(".", 1)[-1]
    if field.startswith("spec") and last in _JUDGE_FIELDS:
        return {**error, "field": _JUDGE_FIELDS[last]}
    if field == "name":
        return {**error, "message": error["message"] + " (give name, or a name in the grader)"}
    return error
