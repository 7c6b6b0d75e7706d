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
    # Pause and the time limit ask the training process to checkpoint and exit (see anneal.training.state).
    PAUSING = "pausing"
    PAUSED = "paused"
    STOPPING = "stopping"
    STOPPED = "stopped"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    CANCELLED = "cancelled"


TERMINAL_STATES = frozenset({JobState.SUCCEEDED, JobState.FAILED, JobState.CANCELLED, JobState.STOPPED})
# States in which a worker holds the job (a gpu slot and the team's devices are in use).
ACTIVE_STATES = frozenset({JobState.RUNNING, JobState.CANCELLING, JobState.PAUSING, JobState.STOPPING})


class Job(models.Model):
    team = models.ForeignKey(Team, on_delete=models.CASCADE, related_name="jobs")
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True)
    name = models.CharField(max_length=200)
    state = models.CharField(max_length=16, choices=JobState.choices, default=JobState.QUEUED, db_index=True)
    # The frozen spec: everything needed to reproduce the run (hyper-parameters, versions, weights).
    spec = models.JSONField()
    dataset_version = models.ForeignKey(DatasetVersion, on_delete=models.PROTECT, related_name="jobs")
    # The held-out rows the job is evaluated on (spec "eval_dataset_version"), kept as a key so that the
    # version cannot be deleted while the job names it: lineage never points at nothing.
    eval_dataset_version = models.ForeignKey(
        DatasetVersion, on_delete=models.PROTECT, related_name="eval_jobs", null=True, blank=True
    )
    verifier_versions = models.ManyToManyField(VerifierVersion, through="JobVerifier", related_name="jobs")
    retry_of = models.ForeignKey(
        "self", on_delete=models.SET_NULL, null=True, blank=True, related_name="retries"
    )
    error = models.TextField(blank=True)
    step = models.PositiveIntegerField(default=0)
    last_seq = models.PositiveIntegerField(default=0)
    worker = models.CharField(max_length=200, blank=True)
    child_pid = models.IntegerField(null=True, blank=True)
    heartbeat_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    # Scheduling and cost (anneal.training.limits, .dispatch, .costs); copied from the spec at launch.
    priority = models.IntegerField(default=0, help_text="Higher runs first; ties go to the earlier queued.")
    devices = models.PositiveIntegerField(default=1)
    device_type = models.CharField(max_length=40, default="cpu")
    queued_at = models.DateTimeField(null=True, blank=True, db_index=True)
    # Set when the job's task was sent to the gpu queue; cleared when it goes back to waiting.
    dispatched_at = models.DateTimeField(null=True, blank=True)
    # Each run of the job's process is an attempt; writes of an older attempt are refused (fencing).
    attempt = models.PositiveIntegerField(default=0)
    restarts = models.PositiveIntegerField(default=0, help_text="Restarts after a crash or a lost worker.")
    attempt_started_at = models.DateTimeField(null=True, blank=True)
    run_seconds = models.FloatField(default=0.0, help_text="Device time of finished attempts.")
    sandbox_seconds = models.FloatField(default=0.0, help_text="Time spent verifying (sandboxes).")
    reason = models.TextField(blank=True, help_text="Why the job is paused, stopped or was requeued.")

    class Meta:
        ordering = ["-created_at"]

    def __str__(self) -> str:
        return f"#{self.pk} {self.name}"

    @property
    def is_finished(self) -> bool:
        return self.state in TERMINAL_STATES

    @property
    def max_steps(self) -> int:
        """The steps the job runs, from its spec (the settings are stored once, there); 0 when it names none."""
        value = self.spec.get("max_steps") if isinstance(self.spec, dict) else None
        return value if isinstance(value, int) and not isinstance(value, bool) else 0

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


class JobDataset(models.Model):
    """A dataset version a job trains on; a job may mix several (their rows are pooled, each row keeping its
    domain, and the spec's domain_weights share the prompts out). Versions never change, so a job's rows can
    always be read again. ``Job.dataset_version`` is the first of them (position 0)."""

    job = models.ForeignKey(Job, on_delete=models.CASCADE, related_name="job_datasets")
    dataset_version = models.ForeignKey(DatasetVersion, on_delete=models.PROTECT, related_name="job_uses")
    position = models.PositiveIntegerField(default=0)
    # Rows per domain of this version when the job was launched (from the version's statistics).
    domains = models.JSONField(default=dict, blank=True)

    class Meta:
        ordering = ["job", "position"]
        constraints = [
            models.UniqueConstraint(fields=["job", "dataset_version"], name="job_dataset_unique"),
        ]

    def __str__(self) -> str:
        return f"job {self.job_id} uses {self.dataset_version_id}"


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


class TeamLimits(models.Model):
    """A team's own scheduling limits; a team without a row uses the settings' defaults."""

    team = models.OneToOneField(Team, on_delete=models.CASCADE, related_name="job_limits")
    max_running_jobs = models.PositiveIntegerField(
        null=True, blank=True, help_text="Jobs of the team running at once; empty: the default."
    )
    max_devices = models.PositiveIntegerField(
        null=True, blank=True, help_text="Devices the team's running jobs hold at once; empty: the default."
    )

    class Meta:
        verbose_name_plural = "team limits"

    def __str__(self) -> str:
        return f"limits of {self.team}"
