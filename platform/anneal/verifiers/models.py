"""Verifiers and their versions. A spec is JSON checked by gpu_jobs.rewards; every save makes a new version."""

from django.conf import settings
from django.db import models

from anneal.accounts.models import Team


class Verifier(models.Model):
    team = models.ForeignKey(Team, on_delete=models.CASCADE, related_name="verifiers")
    name = models.CharField(max_length=200)
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["team", "name"], name="verifier_name_unique_in_team")]
        ordering = ["-created_at"]

    def __str__(self) -> str:
        return self.name

    @property
    def latest_version(self) -> "VerifierVersion | None":
        return self.versions.order_by("-number").first()


class VerifierVersion(models.Model):
    verifier = models.ForeignKey(Verifier, on_delete=models.CASCADE, related_name="versions")
    number = models.PositiveIntegerField()
    spec = models.JSONField()
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["verifier", "number"], name="verifier_version_unique")]
        ordering = ["verifier", "-number"]

    def __str__(self) -> str:
        return f"{self.verifier.name} v{self.number}"

    @property
    def kind(self) -> str:
        return self.spec.get("type", "")
