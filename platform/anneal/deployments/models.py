"""Deployments of checkpoints behind the /v1 endpoint. Serving itself arrives with the deployments issue."""

from django.conf import settings
from django.db import models

from anneal.accounts.models import Team
from anneal.training.models import Checkpoint


class Tier(models.TextChoices):
    BATCH = "batch"
    STANDARD = "standard"
    TURBO = "turbo"


class DeploymentState(models.TextChoices):
    PENDING = "pending"
    STARTING = "starting"
    READY = "ready"
    DRAINING = "draining"
    STOPPED = "stopped"
    FAILED = "failed"


class Deployment(models.Model):
    team = models.ForeignKey(Team, on_delete=models.CASCADE, related_name="deployments")
    checkpoint = models.ForeignKey(Checkpoint, on_delete=models.PROTECT, related_name="deployments")
    name = models.CharField(max_length=200)
    tier = models.CharField(max_length=16, choices=Tier.choices, default=Tier.STANDARD)
    state = models.CharField(max_length=16, choices=DeploymentState.choices, default=DeploymentState.PENDING)
    replicas = models.PositiveSmallIntegerField(default=1)
    max_concurrency = models.PositiveSmallIntegerField(default=4)
    error = models.TextField(blank=True)
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["team", "name"], name="deployment_name_unique_in_team")
        ]
        ordering = ["-created_at"]

    def __str__(self) -> str:
        return f"{self.name} ({self.tier}, {self.state})"
