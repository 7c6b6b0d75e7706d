"""Typed results: one dataclass per thing the API returns, with the fields users read most. Each keeps the
whole answer in ``raw`` (fields added to the API later are there before this package names them)."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any, ClassVar, TypeVar

M = TypeVar("M", bound="Model")

# The states in which a job no longer changes by itself.
JOB_TERMINAL_STATES = frozenset({"succeeded", "failed", "cancelled", "stopped"})
# Where waiting for a job stops: the end, or a pause (budget, alarm, a person) that needs someone to resume.
JOB_STOP_STATES = JOB_TERMINAL_STATES | {"paused"}


@dataclass
class Model:
    raw: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)
    # Fields holding a list of another model, turned into that model on the way in.
    nested: ClassVar[dict[str, type[Model]]] = {}

    @classmethod
    def from_api(cls: type[M], data: dict[str, Any]) -> M:
        values: dict[str, Any] = {}
        for f in dataclasses.fields(cls):
            if f.name == "raw" or f.name not in data:
                continue
            value = data[f.name]
            if f.name in cls.nested and isinstance(value, list):
                value = [cls.nested[f.name].from_api(item) for item in value]
            values[f.name] = value
        return cls(raw=data, **values)

    def to_dict(self) -> dict[str, Any]:
        """The API's answer as it came (JSON-ready)."""
        return self.raw


@dataclass
class DatasetVersion(Model):
    id: int = 0
    dataset: int = 0
    number: int = 0
    row_count: int = 0
    columns: list[str] = field(default_factory=list)
    stats: dict[str, Any] = field(default_factory=dict)
    split_role: str | None = None
    created_at: str | None = None


@dataclass
class Dataset(Model):
    id: int = 0
    name: str = ""
    description: str = ""
    created_at: str | None = None
    versions: list[DatasetVersion] = field(default_factory=list)
    nested: ClassVar[dict[str, type[Model]]] = {"versions": DatasetVersion}

    @property
    def latest_version(self) -> DatasetVersion | None:
        return max(self.versions, key=lambda v: v.number, default=None)


@dataclass
class Upload(Model):
    id: int = 0
    dataset_name: str = ""
    file_name: str = ""
    state: str = ""
    rows_seen: int = 0
    progress: float | None = None
    rows_valid: int = 0
    duplicate_count: int = 0
    error_count: int = 0
    errors: list[dict[str, Any]] = field(default_factory=list)
    dataset_version: int | None = None
    created_at: str | None = None
    finished_at: str | None = None

    @property
    def done(self) -> bool:
        """Whether ingest has finished: ready, review (some rows bad), failed or rejected."""
        return self.state in ("ready", "review", "failed", "rejected")


@dataclass
class VerifierVersion(Model):
    id: int = 0
    number: int = 0
    spec: dict[str, Any] = field(default_factory=dict)
    flagged: bool = False
    probe_flags: list[str] = field(default_factory=list)
    created_at: str | None = None
    diff: str | None = None


@dataclass
class Verifier(Model):
    id: int = 0
    name: str = ""
    flagged: bool = False
    created_at: str | None = None
    versions: list[VerifierVersion] = field(default_factory=list)
    nested: ClassVar[dict[str, type[Model]]] = {"versions": VerifierVersion}

    @property
    def latest_version(self) -> VerifierVersion | None:
        return max(self.versions, key=lambda v: v.number, default=None)


@dataclass
class ImportedVerifier(Verifier):
    """A verifier made from an OpenAI grader, with what was carried over differently (by grader path)."""

    notes: list[str] = field(default_factory=list)


@dataclass
class PreviewResult(Model):
    score: float = 0.0
    parts: dict[str, float] = field(default_factory=dict)
    reason: str = ""


@dataclass
class VerifierTestCase(Model):
    id: int = 0
    row: dict[str, Any] = field(default_factory=dict)
    completion: str = ""
    expected_pass: bool = True
    note: str = ""
    score: float = 0.0
    reason: str = ""
    ok: bool = False


@dataclass
class Checkpoint(Model):
    id: int = 0
    job: int = 0
    step: int = 0
    lineage: dict[str, Any] = field(default_factory=dict)
    created_at: str | None = None


@dataclass
class Job(Model):
    id: int = 0
    name: str = ""
    state: str = ""
    spec: dict[str, Any] = field(default_factory=dict)
    dataset_version: int | None = None
    error: str = ""
    reason: str = ""
    step: int = 0
    max_steps: int = 0
    progress: float = 0.0
    last_seq: int = 0
    spend: dict[str, Any] = field(default_factory=dict)
    created_at: str | None = None
    started_at: str | None = None
    finished_at: str | None = None
    checkpoints: list[Checkpoint] = field(default_factory=list)
    nested: ClassVar[dict[str, type[Model]]] = {"checkpoints": Checkpoint}

    @property
    def finished(self) -> bool:
        return self.state in JOB_TERMINAL_STATES

    @property
    def latest_checkpoint(self) -> Checkpoint | None:
        return max(self.checkpoints, key=lambda c: c.step, default=None)


@dataclass
class JobEvent(Model):
    seq: int = 0
    kind: str = ""  # metric, rollout, alarm, log, state, checkpoint
    payload: dict[str, Any] = field(default_factory=dict)
    created_at: str | None = None


@dataclass
class Estimate(Model):
    currency: str = ""
    seconds: float = 0.0
    device_type: str = ""
    devices: int = 0
    total: float = 0.0
    budget: float | None = None
    over_budget: bool = False
    basis: str = ""


@dataclass
class Deployment(Model):
    id: int = 0
    name: str = ""
    tier: str = ""
    state: str = ""
    error: str = ""
    replicas: int = 0
    checkpoint: int = 0
    job: int = 0
    base_url: str = ""
    price_per_mtok: str = ""
    gate: dict[str, Any] | None = None
    created_at: str | None = None
    ready_at: str | None = None


@dataclass
class DeploymentKey(Model):
    id: int = 0
    name: str = ""
    deployment: int | None = None
    key_hint: str = ""
    key: str | None = None  # the secret: only in the answer that created it
    created_at: str | None = None
    revoked_at: str | None = None


@dataclass
class BaseModel(Model):
    """A model a job may start from (GET /api/v1/models)."""

    name: str = ""
    kind: str = ""  # built-in, folder or hub
    description: str = ""
    ready: bool = False  # on disk already (a built-in one is built or imported on first use)
