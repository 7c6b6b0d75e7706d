"""Organisations, teams, roles, API tokens and the audit log. Every other object belongs to a team."""

import hashlib
import secrets

from django.conf import settings
from django.db import models


class Organisation(models.Model):
    name = models.CharField(max_length=200, unique=True)
    created_at = models.DateTimeField(auto_now_add=True)

    def __str__(self) -> str:
        return self.name


class Team(models.Model):
    organisation = models.ForeignKey(Organisation, on_delete=models.CASCADE, related_name="teams")
    name = models.CharField(max_length=200)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["organisation", "name"], name="team_name_unique_in_org")
        ]

    def __str__(self) -> str:
        return f"{self.organisation.name} / {self.name}"


class Role(models.TextChoices):
    OWNER = "owner", "Owner"
    EXPERT = "expert", "Expert"
    VIEWER = "viewer", "Viewer"


# Roles that may create, launch, cancel and delete; a viewer only looks.
WRITE_ROLES = frozenset({Role.OWNER, Role.EXPERT})


class Membership(models.Model):
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="memberships")
    team = models.ForeignKey(Team, on_delete=models.CASCADE, related_name="memberships")
    role = models.CharField(max_length=16, choices=Role.choices, default=Role.EXPERT)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["user", "team"], name="one_membership_per_team")]

    def __str__(self) -> str:
        return f"{self.user} in {self.team} ({self.role})"


TOKEN_PREFIX = "ann_"


def token_hash(raw: str) -> str:
    # Tokens carry 256 bits of randomness, so a fast hash is enough: nothing to brute-force.
    return hashlib.sha256(raw.encode()).hexdigest()


def token_generate() -> str:
    return TOKEN_PREFIX + secrets.token_urlsafe(32)


class ApiToken(models.Model):
    """A personal API token bound to one team. Only its hash is stored; the token is shown once."""

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="api_tokens")
    team = models.ForeignKey(Team, on_delete=models.CASCADE, related_name="api_tokens")
    name = models.CharField(max_length=100)
    key_hash = models.CharField(max_length=64, unique=True)
    key_hint = models.CharField(
        max_length=12, help_text="The first characters of the token, to recognise it."
    )
    created_at = models.DateTimeField(auto_now_add=True)
    last_used_at = models.DateTimeField(null=True, blank=True)
    revoked_at = models.DateTimeField(null=True, blank=True)

    def __str__(self) -> str:
        return f"{self.name} ({self.key_hint}…)"

    @property
    def is_active(self) -> bool:
        return self.revoked_at is None


class AuditEntry(models.Model):
    team = models.ForeignKey(Team, on_delete=models.CASCADE, related_name="audit_entries", null=True)
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, blank=True)
    action = models.CharField(max_length=64)
    object_type = models.CharField(max_length=64, blank=True)
    object_id = models.CharField(max_length=64, blank=True)
    detail = models.JSONField(default=dict, blank=True)
    created_at = models.DateTimeField(auto_now_add=True, db_index=True)

    class Meta:
        ordering = ["-created_at"]
        verbose_name_plural = "audit entries"

    def __str__(self) -> str:
        return (
            f"{self.created_at:%Y-%m-%d %H:%M} {self.user} {self.action} {self.object_type} {self.object_id}"
        )


class TeamSecret(models.Model):
    """A named value a team's verifiers use, such as a judge endpoint's API key.

    Stored encrypted (anneal.accounts.secret_box); write-only: no page or API returns the value after it is
    set, and only the platform decrypts it, when it builds a verifier for this team.
    """

    team = models.ForeignKey(Team, on_delete=models.CASCADE, related_name="secrets")
    name = models.CharField(max_length=100)
    ciphertext = models.TextField()
    # Issued by the platform itself (the key a judge uses to call a team deployment): not listed or editable.
    managed = models.BooleanField(default=False)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, blank=True, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)
    updated_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, blank=True, related_name="+"
    )
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["team", "name"], name="secret_name_unique_in_team")]
        ordering = ["name"]

    def __str__(self) -> str:
        return f"{self.team} / secret {self.name}"


class OutboundHost(models.Model):
    """A host an owner lets the team's verifiers call (a model judge's endpoint), in the form
    gpu_jobs.rewards.outbound.parse_host_entry reads: ``api.example.com``, ``*.example.com``, ``10.0.0.5:8000``."""

    team = models.ForeignKey(Team, on_delete=models.CASCADE, related_name="outbound_hosts")
    host = models.CharField(max_length=300)
    note = models.CharField(max_length=200, blank=True)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, blank=True, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["team", "host"], name="outbound_host_unique_in_team")]
        ordering = ["host"]

    def __str__(self) -> str:
        return f"{self.team} → {self.host}"
