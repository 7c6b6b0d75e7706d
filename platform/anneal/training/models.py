"""Jobs, their ordered events and their checkpoints."""

from django.conf import settings
from django.db import models

from anneal.accounts.models import Team
from anneal.datasets.models import DatasetVersion
from anneal.verifiers.models import VerifierVersion


class JobState(models.TextChoices):
    QUEUED = "queued"
    RUNNING = "running"
    CANCELLING = "cancelling"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    CANCELLED = "cancelled"


TERMINAL_STATES = frozenset({JobState.SUCCEEDED, JobState.FAILED, JobState.CANCELLED})


class Job(models.Model):
    team = models.ForeignKey(Team, on_delete=models.CASCADE, related_name="jobs")
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True)
    name = models.CharField(max_length=200)
    state = models.CharField(max_length=16, choices=JobState.choices, default=JobState.QUEUED, db_index=True)
    # The frozen spec: everything needed to reproduce the run (hyper-parameters, versions, weights).
    spec = models.JSONField()
    dataset_version = models.ForeignKey(DatasetVersion, on_delete=models.PROTECT, related_name="jobs")
    verifier_versions = models.ManyToManyField(VerifierVersion, through="JobVerifier", related_name="jobs")
    retry_of = models.ForeignKey(
        "self", on_delete=models.SET_NULL, null=True, blank=True, related_name="retries"
    )
    error = models.TextField(blank=True)
    step = models.PositiveIntegerField(default=0)
    max_steps = models.PositiveIntegerField(default=0)
    last_seq = models.PositiveIntegerField(default=0)
    worker = models.CharField(max_length=200, blank=True)
    child_pid = models.IntegerField(null=True, blank=True)
    heartbeat_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at"]

    def __str__(self) -> str:
        return f"#{self.pk} {self.name}"

    @property
    def is_finished(self) -> bool:
        return self.state in TERMINAL_STATES

    @property
    def progress(self) -> float:
        return min(1.0, self.step / self.max_steps) if self.max_steps else 0.0


class JobVerifier(models.Model):
    job = models.ForeignKey(Job, on_delete=models.CASCADE, related_name="job_verifiers")
    verifier_version = models.ForeignKey(VerifierVersion, on_delete=models.PROTECT, related_name="job_uses")
    name = models.CharField(max_length=200)
    weight = models.FloatField(default=1.0)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["job", "name"], name="job_verifier_name_unique")]


class EventKind(models.TextChoices):
    METRIC = "metric"
    ROLLOUT = "rollout"
    ALARM = "alarm"
    LOG = "log"
    STATE = "state"
    CHECKPOINT = "checkpoint"


class JobEvent(models.Model):
    """One event of a job, numbered 1, 2, 3… per job with no gap: clients resume from the last one they saw."""

    job = models.ForeignKey(Job, on_delete=models.CASCADE, related_name="events")
    seq = models.PositiveIntegerField()
    kind = models.CharField(max_length=16, choices=EventKind.choices)
    payload = models.JSONField()
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["job", "seq"], name="job_event_seq_unique")]
        ordering = ["job", "seq"]

    def __str__(self) -> str:
        return f"job {self.job_id} #{self.seq} {self.kind}"

    def as_message(self) -> dict:
        return {
            "seq": self.seq,
            "kind": self.kind,
            "payload": self.payload,
            "created_at": self.created_at.isoformat(),
        }


class Checkpoint(models.Model):
    job = models.ForeignKey(Job, on_delete=models.CASCADE, related_name="checkpoints")
    step = models.PositiveIntegerField()
    location = models.CharField(max_length=500)
    # Lineage: what the checkpoint came from, so it can be reproduced and compared.
    lineage = models.JSONField(default=dict)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["job", "step"], name="checkpoint_step_unique")]
        ordering = ["job", "-step"]

    def __str__(self) -> str:
        return f"job {self.job_id} step {self.step}"

    @property
    def team(self) -> Team:
        return self.job.team
