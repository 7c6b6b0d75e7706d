"""Deployments of checkpoints behind the /v1 endpoint: replicas, API keys, metered usage, batch jobs and the
regression gate each deployment passes before it turns ready."""

import hashlib
import secrets

from django.conf import settings
from django.db import models
from django.utils.crypto import salted_hmac

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


# A deployment in one of these states may be stopped, switched or called; the others are finished.
ACTIVE_STATES = frozenset({DeploymentState.PENDING, DeploymentState.STARTING, DeploymentState.READY})


class Deployment(models.Model):
    team = models.ForeignKey(Team, on_delete=models.CASCADE, related_name="deployments")
    checkpoint = models.ForeignKey(Checkpoint, on_delete=models.PROTECT, related_name="deployments")
    name = models.CharField(max_length=200)
    tier = models.CharField(max_length=16, choices=Tier.choices, default=Tier.STANDARD)
    state = models.CharField(max_length=16, choices=DeploymentState.choices, default=DeploymentState.PENDING)
    replicas = models.PositiveSmallIntegerField(default=1)
    max_concurrency = models.PositiveSmallIntegerField(default=4)
    error = models.TextField(blank=True)
    # An owner let it through a regression gate that blocked it (audited as deployment.gate_override).
    gate_overridden = models.BooleanField(default=False)
    # The preparation (regression gate, then replicas) by a default worker: its heartbeat while the gate runs,
    # and how many times it was claimed. A preparation whose worker went silent is started again by beat's
    # reaper, up to MAX_PREPARE_ATTEMPTS (anneal.deployments.services).
    prepare_heartbeat_at = models.DateTimeField(null=True, blank=True)
    prepare_attempts = models.PositiveSmallIntegerField(default=0)
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True)
    created_at = models.DateTimeField(auto_now_add=True)
    ready_at = models.DateTimeField(null=True, blank=True)
    stopped_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["team", "name"], name="deployment_name_unique_in_team")
        ]
        ordering = ["-created_at"]

    def __str__(self) -> str:
        return f"{self.name} ({self.tier}, {self.state})"

    @property
    def is_active(self) -> bool:
        return self.state in ACTIVE_STATES


class ReplicaState(models.TextChoices):
    STARTING = "starting"
    READY = "ready"
    DRAINING = "draining"
    STOPPED = "stopped"
    FAILED = "failed"


class Replica(models.Model):
    """One serving process (``python -m gpu_jobs.serving``) of a deployment, supervised by a `serve` worker."""

    deployment = models.ForeignKey(Deployment, on_delete=models.CASCADE, related_name="replica_set")
    tier = models.CharField(max_length=16, choices=Tier.choices)
    state = models.CharField(max_length=16, choices=ReplicaState.choices, default=ReplicaState.STARTING)
    worker = models.CharField(max_length=200, blank=True)
    host = models.CharField(max_length=200, blank=True)
    port = models.PositiveIntegerField(null=True, blank=True)
    pid = models.IntegerField(null=True, blank=True)
    # Random, set when the process starts. The credential the replica demands is derived from it and the
    # server's SECRET_KEY (see `credential`), so the database alone does not hold it. Shown nowhere.
    credential_salt = models.CharField(max_length=64, blank=True, editable=False)
    error = models.TextField(blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    ready_at = models.DateTimeField(null=True, blank=True)
    heartbeat_at = models.DateTimeField(null=True, blank=True)
    stopped_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["deployment", "id"]

    def __str__(self) -> str:
        return f"replica {self.pk} of {self.deployment_id} ({self.tier}, {self.state})"

    @property
    def base_url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host  # an IPv6 address
        return f"http://{host}:{self.port}"

    @property
    def credential(self) -> str:
        """The bearer credential this replica's process demands (gpu_jobs.serving.auth). Web and workers
        derive the same one: they share SECRET_KEY."""
        value = f"{self.pk}:{self.credential_salt}"
        return salted_hmac("anneal.deployments.replica", value, algorithm="sha256").hexdigest()

    @property
    def auth_headers(self) -> dict[str, str]:
        """What every call from the platform to the replica sends, health checks included."""
        return {"Authorization": f"Bearer {self.credential}"}


KEY_PREFIX = "sk-anneal-"


def key_hash(raw: str) -> str:
    # Keys carry 256 bits of randomness, so a fast hash is enough: nothing to brute-force.
    return hashlib.sha256(raw.encode()).hexdigest()


def key_generate() -> str:
    return KEY_PREFIX + secrets.token_urlsafe(32)


class DeploymentKey(models.Model):
    """An API key for /v1, bound to a team and optionally to one deployment. Only its hash is stored."""

    team = models.ForeignKey(Team, on_delete=models.CASCADE, related_name="deployment_keys")
    deployment = models.ForeignKey(
        Deployment,
        on_delete=models.CASCADE,
        null=True,
        blank=True,
        related_name="keys",
        help_text="The one deployment the key may call; empty: every deployment of the team.",
    )
    name = models.CharField(max_length=100)
    key_hash = models.CharField(max_length=64, unique=True)
    key_hint = models.CharField(max_length=20)
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True)
    created_at = models.DateTimeField(auto_now_add=True)
    last_used_at = models.DateTimeField(null=True, blank=True)
    revoked_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at"]

    def __str__(self) -> str:
        return f"{self.name} ({self.key_hint}…)"

    @property
    def is_active(self) -> bool:
        return self.revoked_at is None


class TeamBudget(models.Model):
    """A team's monthly spending cap on deployments (UTC calendar month); without a row the default applies."""

    team = models.OneToOneField(Team, on_delete=models.CASCADE, related_name="serving_budget")
    monthly_cap_usd = models.DecimalField(
        max_digits=14, decimal_places=6, null=True, blank=True, help_text="Empty: no cap."
    )
    updated_at = models.DateTimeField(auto_now=True)

    def __str__(self) -> str:
        return f"{self.team}: {self.monthly_cap_usd if self.monthly_cap_usd is not None else 'no cap'}"


class UsageRecord(models.Model):
    """One metered request: tokens in and out and what they cost at the tier that served them."""

    team = models.ForeignKey(Team, on_delete=models.CASCADE, related_name="usage_records")
    deployment = models.ForeignKey(Deployment, on_delete=models.CASCADE, related_name="usage_records")
    key = models.ForeignKey(
        DeploymentKey, on_delete=models.SET_NULL, null=True, blank=True, related_name="usage_records"
    )
    batch = models.ForeignKey(
        "BatchJob", on_delete=models.SET_NULL, null=True, blank=True, related_name="usage_records"
    )
    tier = models.CharField(max_length=16, choices=Tier.choices)
    endpoint = models.CharField(max_length=40)
    stream = models.BooleanField(default=False)
    prompt_tokens = models.PositiveIntegerField(default=0)
    completion_tokens = models.PositiveIntegerField(default=0)
    cost_usd = models.DecimalField(max_digits=18, decimal_places=10, default=0)
    latency_ms = models.PositiveIntegerField(default=0)
    status_code = models.PositiveSmallIntegerField(default=200)
    created_at = models.DateTimeField(auto_now_add=True, db_index=True)

    class Meta:
        ordering = ["-created_at"]
        indexes = [
            models.Index(fields=["team", "created_at"], name="usage_team_time"),
            models.Index(fields=["deployment", "created_at"], name="usage_deployment_time"),
        ]

    @property
    def total_tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens


class BatchFile(models.Model):
    """A file of the batch API: a JSONL of requests (purpose batch) or a results/errors file it produced."""

    team = models.ForeignKey(Team, on_delete=models.CASCADE, related_name="batch_files")
    key = models.ForeignKey(DeploymentKey, on_delete=models.SET_NULL, null=True, blank=True)
    filename = models.CharField(max_length=255)
    purpose = models.CharField(max_length=32)
    path = models.CharField(max_length=500)
    bytes = models.PositiveBigIntegerField(default=0)
    lines = models.PositiveIntegerField(default=0)
    created_at = models.DateTimeField(auto_now_add=True)

    @property
    def openai_id(self) -> str:
        return f"file-{self.pk}"


class BatchState(models.TextChoices):
    VALIDATING = "validating"
    IN_PROGRESS = "in_progress"
    FINALIZING = "finalizing"
    COMPLETED = "completed"
    FAILED = "failed"
    CANCELLING = "cancelling"
    CANCELLED = "cancelled"


class BatchJob(models.Model):
    team = models.ForeignKey(Team, on_delete=models.CASCADE, related_name="batch_jobs")
    key = models.ForeignKey(DeploymentKey, on_delete=models.SET_NULL, null=True, blank=True)
    endpoint = models.CharField(max_length=40)
    completion_window = models.CharField(max_length=16, default="24h")
    input_file = models.ForeignKey(BatchFile, on_delete=models.PROTECT, related_name="input_of")
    output_file = models.ForeignKey(
        BatchFile, on_delete=models.SET_NULL, null=True, blank=True, related_name="output_of"
    )
    error_file = models.ForeignKey(
        BatchFile, on_delete=models.SET_NULL, null=True, blank=True, related_name="error_of"
    )
    state = models.CharField(max_length=16, choices=BatchState.choices, default=BatchState.VALIDATING)
    errors = models.JSONField(default=list, blank=True)
    metadata = models.JSONField(default=dict, blank=True)
    total = models.PositiveIntegerField(default=0)
    completed = models.PositiveIntegerField(default=0)
    failed = models.PositiveIntegerField(default=0)
    created_at = models.DateTimeField(auto_now_add=True)
    in_progress_at = models.DateTimeField(null=True, blank=True)
    completed_at = models.DateTimeField(null=True, blank=True)
    failed_at = models.DateTimeField(null=True, blank=True)
    # Its run's heartbeat, and how many runs were claimed (anneal.deployments.batch_runs resumes a lost one).
    heartbeat_at = models.DateTimeField(null=True, blank=True)
    run_attempts = models.PositiveSmallIntegerField(default=0)

    class Meta:
        ordering = ["-created_at"]

    @property
    def openai_id(self) -> str:
        return f"batch_{self.pk}"


class BatchLine(models.Model):
    """One line of a batch, answered: kept (with its usage metered in the same transaction) as it comes, so a
    run resumed after its worker died sends only the lines not kept yet."""

    batch = models.ForeignKey(BatchJob, on_delete=models.CASCADE, related_name="lines")
    number = models.PositiveIntegerField()
    result = models.JSONField()

    class Meta:
        constraints = [models.UniqueConstraint(fields=["batch", "number"], name="batch_line_once")]


class GateResult(models.Model):
    """The regression gate of one deployment: the checkpoint against its base model, per domain."""

    deployment = models.ForeignKey(Deployment, on_delete=models.CASCADE, related_name="gate_results")
    passed = models.BooleanField()
    max_drop = models.FloatField(help_text="The threshold in force: the largest drop allowed.")
    # [{"set": "held-out"|"general", "domain", "base", "candidate", "drop", "rows", "blocked"}]
    scores = models.JSONField(default=list)
    note = models.TextField(blank=True)
    overridden_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, blank=True, related_name="+"
    )
    overridden_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-created_at"]

    @property
    def blocking(self) -> list[dict]:
        return [row for row in self.scores if row.get("blocked")]
