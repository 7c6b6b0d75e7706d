"""Writes for accounts: organisations, teams, memberships, tokens and audit entries."""

from django.contrib.auth.models import User
from django.db import models, transaction
from django.utils import timezone

from anneal.accounts.models import (
    ApiToken,
    AuditEntry,
    Membership,
    Organisation,
    Role,
    Team,
    token_generate,
    token_hash,
)


def audit(
    *, team: Team | None, user: User | None, action: str, obj: models.Model | None = None, **detail
) -> None:
    AuditEntry.objects.create(
        team=team,
        user=user if user is not None and user.is_authenticated else None,
        action=action,
        object_type=obj._meta.model_name if obj is not None else "",
        object_id=str(obj.pk) if obj is not None else "",
        detail=detail,
    )


@transaction.atomic
def team_create(*, organisation: Organisation, name: str, owner: User) -> Team:
    team = Team.objects.create(organisation=organisation, name=name)
    Membership.objects.create(user=owner, team=team, role=Role.OWNER)
    audit(team=team, user=owner, action="team.create", obj=team)
    return team


@transaction.atomic
def membership_set(*, team: Team, user: User, role: str, by: User | None = None) -> Membership:
    membership, _ = Membership.objects.update_or_create(team=team, user=user, defaults={"role": role})
    audit(team=team, user=by, action="membership.set", obj=membership, member=user.username, role=role)
    return membership


@transaction.atomic
def api_token_create(*, user: User, team: Team, name: str) -> tuple[ApiToken, str]:
    """Create a token for ``user`` in ``team`` (the user must be a member). Returns (token, raw secret)."""
    if not Membership.objects.filter(user=user, team=team).exists():
        raise PermissionError(f"{user.username} is not a member of {team}")
    raw = token_generate()
    token = ApiToken.objects.create(
        user=user, team=team, name=name, key_hash=token_hash(raw), key_hint=raw[:8]
    )
    audit(team=team, user=user, action="api_token.create", obj=token, name=name)
    return token, raw


@transaction.atomic
def api_token_revoke(*, token: ApiToken, by: User) -> None:
    if token.revoked_at is None:
        token.revoked_at = timezone.now()
        token.save(update_fields=["revoked_at"])
        audit(team=token.team, user=by, action="api_token.revoke", obj=token)


@transaction.atomic
def member_ensure(
    *, username: str, password: str | None, organisation: str, team: str, role: str, staff: bool = False
) -> tuple[User, Team]:
    """Create (or update) a user, their organisation and team, and their role there. Idempotent."""
    if role not in Role.values:
        raise ValueError(f"role {role!r}: expected one of {', '.join(Role.values)}")
    org, _ = Organisation.objects.get_or_create(name=organisation)
    team_obj, _ = Team.objects.get_or_create(organisation=org, name=team)
    user, created = User.objects.get_or_create(username=username)
    if password:
        user.set_password(password)
    if staff:
        user.is_staff = user.is_superuser = True
    if created or password or staff:
        user.save()
    membership_set(team=team_obj, user=user, role=role)
    return user, team_obj
