"""Uploads, datasets and their immutable versions."""

from django.conf import settings
from django.db import models

from anneal.accounts.models import Team


class Dataset(models.Model):
    team = models.ForeignKey(Team, on_delete=models.CASCADE, related_name="datasets")
    name = models.CharField(max_length=200)
    description = models.TextField(blank=True)
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["team", "name"], name="dataset_name_unique_in_team")]
        ordering = ["-created_at"]

    def __str__(self) -> str:
        return self.name

    @property
    def latest_version(self) -> "DatasetVersion | None":
        return self.versions.order_by("-number").first()


class DatasetVersion(models.Model):
    """Frozen rows: the file at ``rows_path`` is written once and never changed; jobs reference versions."""

    dataset = models.ForeignKey(Dataset, on_delete=models.CASCADE, related_name="versions")
    number = models.PositiveIntegerField()
    row_count = models.PositiveIntegerField()
    columns = models.JSONField(default=list)
    sha256 = models.CharField(max_length=64)
    rows_path = models.CharField(max_length=500)
    source_upload = models.OneToOneField(
        "DatasetUpload", on_delete=models.SET_NULL, null=True, blank=True, related_name="produced_version"
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["dataset", "number"], name="dataset_version_unique")]
        ordering = ["dataset", "-number"]

    def __str__(self) -> str:
        return f"{self.dataset.name} v{self.number}"

    @property
    def team(self) -> Team:
        return self.dataset.team


class UploadState(models.TextChoices):
    PENDING = "pending"
    PROCESSING = "processing"
    READY = "ready"
    FAILED = "failed"


class DatasetUpload(models.Model):
    """One attempt to turn a file into a dataset version. A failed attempt keeps its errors and stores no rows."""

    team = models.ForeignKey(Team, on_delete=models.CASCADE, related_name="dataset_uploads")
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True)
    dataset_name = models.CharField(max_length=200)
    file_name = models.CharField(max_length=255)
    file_path = models.CharField(max_length=500)
    size_bytes = models.BigIntegerField(default=0)
    mapping = models.JSONField(default=dict)
    state = models.CharField(max_length=16, choices=UploadState.choices, default=UploadState.PENDING)
    rows_seen = models.PositiveIntegerField(default=0)
    errors = models.JSONField(default=list, blank=True)
    error_count = models.PositiveIntegerField(default=0)
    created_at = models.DateTimeField(auto_now_add=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at"]

    def __str__(self) -> str:
        return f"{self.file_name} → {self.dataset_name} ({self.state})"
