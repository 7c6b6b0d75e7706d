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
    # After ingest: rows, rows per domain, token lengths (see anneal.datasets.ingest).
    stats = models.JSONField(default=dict, blank=True)
    # A split makes a train and an eval version from a parent; ``split`` records how (method, seed, ...).
    parent = models.ForeignKey(
        "self", on_delete=models.SET_NULL, null=True, blank=True, related_name="derived"
    )
    split_role = models.CharField(max_length=8, blank=True, choices=[("train", "train"), ("eval", "eval")])
    split = models.JSONField(default=dict, blank=True)
    # A domain pack's generator settings (tasks, size, difficulty, seed): enough to make the rows again.
    pack = models.JSONField(default=dict, blank=True)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, blank=True, related_name="+"
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
    MAPPING = "mapping"  # stored, waiting for the expert to map columns
    PENDING = "pending"  # queued for ingest
    PROCESSING = "processing"
    REVIEW = "review"  # some rows are bad: the expert accepts (bad rows skipped) or rejects
    READY = "ready"
    FAILED = "failed"  # nothing usable: no version, the errors say why
    REJECTED = "rejected"


FINISHED_UPLOAD_STATES = frozenset(
    {UploadState.REVIEW, UploadState.READY, UploadState.FAILED, UploadState.REJECTED}
)


class DatasetUpload(models.Model):
    """One attempt to turn a file into a dataset version. A failed attempt keeps its errors and stores no rows."""

    team = models.ForeignKey(Team, on_delete=models.CASCADE, related_name="dataset_uploads")
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True)
    dataset_name = models.CharField(max_length=200)
    file_name = models.CharField(max_length=255)
    file_path = models.CharField(max_length=500)
    size_bytes = models.BigIntegerField(default=0)
    file_format = models.CharField(max_length=16, blank=True)
    mapping = models.JSONField(default=dict)
    tokenizer = models.CharField(max_length=500, default="tiny")
    state = models.CharField(max_length=16, choices=UploadState.choices, default=UploadState.PENDING)
    rows_seen = models.PositiveIntegerField(default=0)  # records read so far (live progress)
    progress = models.FloatField(default=0.0)  # fraction of the file read, 0..1
    rows_valid = models.PositiveIntegerField(default=0)  # unique valid rows a version would hold
    duplicate_count = models.PositiveIntegerField(default=0)
    duplicates = models.JSONField(default=list, blank=True)  # the first few: {"row", "duplicate_of"}
    errors = models.JSONField(default=list, blank=True)  # the first ones, for the page
    error_count = models.PositiveIntegerField(default=0)
    errors_path = models.CharField(max_length=500, blank=True)  # every error, JSON Lines (the download)
    # The valid rows of an upload in review, kept out of every version until the expert accepts.
    staged_path = models.CharField(max_length=500, blank=True)
    staged = models.JSONField(default=dict, blank=True)  # sha256, columns, stats of the staged rows
    # The columns and first rows (anneal.datasets.preview), read by the worker for the mapping page; empty
    # until it has read them.
    preview = models.JSONField(default=dict, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at"]

    def __str__(self) -> str:
        return f"{self.file_name} → {self.dataset_name} ({self.state})"
