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
    # Hack probes run on save (gpu_jobs.rewards.probes): [{"name", "description", "score", "reason",
    # "flagged", "skipped"}]. `flagged` is true when any probe scored high; the launch form warns then.
    probe_results = models.JSONField(default=list, blank=True)
    flagged = models.BooleanField(default=False)
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

    @property
    def probe_flags(self) -> list[str]:
        """Descriptions of the hack probes this version scored high on (empty when none)."""
        return [
            p.get("description") or p.get("name", "") for p in self.probe_results or [] if p.get("flagged")
        ]


class VerifierTestCase(models.Model):
    """A completion an expert judged, kept to check every later version of the verifier against.

    Made from a rollout the expert flagged on a job page (a reward hack the verifier let through, or a right
    answer it refused). ``expected_pass``: whether the verifier should give this completion full marks.
    """

    verifier = models.ForeignKey(Verifier, on_delete=models.CASCADE, related_name="test_cases")
    row = models.JSONField(help_text="The dataset row the completion answered.")
    completion = models.TextField()
    expected_pass = models.BooleanField()
    note = models.TextField(blank=True)
    source_job = models.ForeignKey("training.Job", on_delete=models.SET_NULL, null=True, blank=True)
    source_seq = models.PositiveIntegerField(null=True, blank=True)
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-created_at"]

    def __str__(self) -> str:
        return f"{self.verifier.name}: should {'pass' if self.expected_pass else 'fail'}"
