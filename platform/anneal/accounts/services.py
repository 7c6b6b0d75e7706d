"""Writes for accounts: organisations, teams, memberships, tokens, team secrets, allowed hosts, audit entries."""

import re

from django.contrib.auth.models import User
from django.core.exceptions import PermissionDenied
from django.db import models, transaction
from django.utils import timezone

from anneal.accounts.models import (
    WRITE_ROLES,
    ApiToken,
    AuditEntry,
    Membership,
    Organisation,
    OutboundHost,
    Role,
    Team,
    TeamSecret,
    token_generate,
    token_hash,
)
from anneal.accounts.secret_box import encrypt
from anneal.accounts.selectors import role_in
from anneal.errors import InputError, reject_nul


class AlreadyExists(InputError):
    """The secret name or allowed host is taken: the API answers 409 Conflict."""


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


# --- team secrets and outbound hosts (what the team's verifiers may reach, and with which keys) ----------

SECRET_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_.-]{0,99}$")
SECRET_MAX_BYTES = 8192


def _require_role(*, user: User, team: Team, roles: frozenset, what: str) -> None:
    role = role_in(user, team)
    if role not in roles:
        allowed = " or ".join(sorted(str(r) for r in roles))
        raise PermissionDenied(f"Only an {allowed} of team '{team.name}' may {what}; your role is {role}.")


@transaction.atomic
def team_secret_set(*, team: Team, user: User, name: str, value: str, replace: bool = False) -> TeamSecret:
    """Store ``value`` under ``name`` in ``team`` (owners and experts). A new name only, unless ``replace``;
    replacing needs the name to exist. The value is never returned by anything afterwards."""
    _require_role(user=user, team=team, roles=WRITE_ROLES, what="set secrets")
    name = (name or "").strip()
    if not SECRET_NAME.match(name):
        raise InputError(
            "a name of letters, digits, _ . - (up to 100, starting with a letter or _), e.g. OPENAI_KEY",
            field="name",
        )
    if not isinstance(value, str) or not value:
        raise InputError("give the secret's value", field="value")
    reject_nul(value, field="value")
    if len(value.encode()) > SECRET_MAX_BYTES:
        raise InputError(f"at most {SECRET_MAX_BYTES} bytes, got {len(value.encode())}", field="value")
    existing = TeamSecret.objects.select_for_update().filter(team=team, name=name, managed=False).first()
    if existing is None and replace:
        raise InputError(f"team '{team.name}' has no secret named '{name}'", field="name")
    if existing is not None and not replace:
        raise AlreadyExists(
            f"team '{team.name}' already has a secret named '{name}': replace it instead", field="name"
        )
    if existing is None:
        secret = TeamSecret.objects.create(
            team=team, name=name, ciphertext=encrypt(value), created_by=user, updated_by=user
        )
        audit(team=team, user=user, action="team_secret.create", obj=secret, name=name)
        return secret
    existing.ciphertext = encrypt(value)
    existing.updated_by = user
    existing.save(update_fields=["ciphertext", "updated_by", "updated_at"])
    audit(team=team, user=user, action="team_secret.replace", obj=existing, name=name)
    return existing


@transaction.atomic
def team_secret_delete(*, secret: TeamSecret, user: User) -> None:
    _require_role(user=user, team=secret.team, roles=WRITE_ROLES, what="delete secrets")
    if secret.managed:
        raise InputError("this key is issued by the platform and cannot be deleted by hand", field="name")
    audit(team=secret.team, user=user, action="team_secret.delete", obj=secret, name=secret.name)
    secret.delete()


@transaction.atomic
def outbound_host_add(*, team: Team, user: User, host: str, note: str = "") -> OutboundHost:
    """Let the team's verifiers call ``host`` (owners only): see gpu_jobs.rewards.outbound.parse_host_entry."""
    from gpu_jobs.rewards.outbound import parse_host_entry

    _require_role(user=user, team=team, roles=frozenset({Role.OWNER}), what="change allowed endpoints")
    reject_nul(host or "", field="host")
    try:
        entry = str(parse_host_entry(host))
    except ValueError as exc:
        raise InputError(str(exc), field="host") from None
    note = (note or "").strip()
    reject_nul(note, field="note")
    if len(note) > 200:
        raise InputError(f"at most 200 characters, got {len(note)}", field="note")
    if OutboundHost.objects.filter(team=team, host=entry).exists():
        raise AlreadyExists(f"{entry} is already allowed for team '{team.name}'", field="host")
    allowed = OutboundHost.objects.create(team=team, host=entry, note=note, created_by=user)
    audit(team=team, user=user, action="outbound_host.add", obj=allowed, host=entry)
    return allowed


@transaction.atomic
def outbound_host_remove(*, allowed: OutboundHost, user: User) -> None:
    _require_role(
        user=user, team=allowed.team, roles=frozenset({Role.OWNER}), what="change allowed endpoints"
    )
    audit(team=allowed.team, user=user, action="outbound_host.remove", obj=allowed, host=allowed.host)
    allowed.delete()
