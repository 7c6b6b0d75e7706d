"""Writes for verifiers: every save validates the spec and freezes a new version."""

from django.contrib.auth.models import User
from django.db import IntegrityError, transaction
from django.db.models import Max

from anneal.accounts.models import Team
from anneal.accounts.services import audit
from anneal.errors import InputError
from anneal.verifiers.models import Verifier, VerifierVersion
from gpu_jobs.rewards import SpecError, validate_spec


def verifier_spec_check(spec: object) -> dict:
    """Return the normalised spec or raise InputError naming the field (prefixed ``spec.``)."""
    if not isinstance(spec, dict):
        raise InputError("the spec must be a JSON object with a 'type'", field="spec")
    try:
        return validate_spec(spec)
    except SpecError as exc:
        raise InputError(exc.message, field=f"spec.{exc.field}") from None


@transaction.atomic
def verifier_create(*, team: Team, user: User, name: str, spec: dict) -> Verifier:
    name = (name or "").strip()
    if not name:
        raise InputError("give the verifier a name", field="name")
    normalised = verifier_spec_check(spec)
    try:
        with transaction.atomic():
            verifier = Verifier.objects.create(team=team, name=name, created_by=user)
    except IntegrityError:
        raise InputError(f"a verifier named '{name}' already exists in this team", field="name") from None
    VerifierVersion.objects.create(verifier=verifier, number=1, spec=normalised, created_by=user)
    audit(team=team, user=user, action="verifier.create", obj=verifier, type=normalised["type"])
    return verifier


@transaction.atomic
def verifier_version_create(*, verifier: Verifier, user: User, spec: dict) -> VerifierVersion:
    normalised = verifier_spec_check(spec)
    Verifier.objects.select_for_update().filter(pk=verifier.pk).first()
    number = (verifier.versions.aggregate(n=Max("number"))["n"] or 0) + 1
    version = VerifierVersion.objects.create(
        verifier=verifier, number=number, spec=normalised, created_by=user
    )
    audit(team=verifier.team, user=user, action="verifier.version", obj=version, number=number)
    return version
