"""How a training engine reports: an event sink and a checkpoint store, both implemented by the caller.

The gpu-worker implements them on top of the database and storage; ``ListSink`` and
``FolderCheckpointStore`` are the small real implementations that tests and scripts use.

Event kinds and payloads (every payload is JSON-serialisable):

- ``"metric"``: ``{"step", "reward", "reward_std", "rewards/<verifier name>", "kl", "completion_length",
  "entropy", "step_time", "learning_rate", "loss", ...}``, whatever the trainer logged, numbers only;
- ``"rollout"``: ``{"step", "prompt", "completion", "reward", "parts": {verifier name: score}, "reason",
  "reference"}``;
- ``"log"``: ``{"message"}``;
- ``"checkpoint"``: ``{"step", "location"}``.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Protocol

EVENT_KINDS = ("metric", "rollout", "log", "checkpoint", "alarm")


class EventSink(Protocol):
    def emit(self, kind: str, payload: dict) -> None:
        """Record one event. Called from the training process, in order; should return quickly."""

    def emit_many(self, events: list[tuple[str, dict]]) -> None:
        """Record several events at once, in order (a step's rollouts): one write, one broadcast."""


class CheckpointStore(Protocol):
    def save(self, *, step: int, local_dir: Path) -> str:
        """Keep a copy of ``local_dir`` (a model folder) for ``step``; return where it is kept.

        ``local_dir`` may be deleted or overwritten once this returns.
        """


class ListSink:
    """Keeps events in memory, in order. Payloads are round-tripped through JSON on the way in, so a
    payload that the real sink could not store fails here too, at the call that emitted it."""

    def __init__(self) -> None:
        self.events: list[tuple[str, dict]] = []

    def emit(self, kind: str, payload: dict) -> None:
        if kind not in EVENT_KINDS:
            raise ValueError(f"kind: must be one of {', '.join(EVENT_KINDS)}, got {kind!r}")
        self.events.append((kind, json.loads(json.dumps(payload, allow_nan=False))))

    def emit_many(self, events: list[tuple[str, dict]]) -> None:
        for kind, payload in events:
            self.emit(kind, payload)

    def of_kind(self, kind: str) -> list[dict]:
        """The payloads of every event of ``kind``, in emission order."""
        return [payload for event_kind, payload in self.events if event_kind == kind]


class FolderCheckpointStore:
    """Copies each checkpoint to ``root / "step-<step>"``; saving a step again replaces its copy whole."""

    def __init__(self, root: Path) -> None:
        self.root = Path(root)

    def save(self, *, step: int, local_dir: Path) -> str:
        self.root.mkdir(parents=True, exist_ok=True)
        target = self.root / f"step-{step:06d}"
        # Copy beside the target then rename, so a reader never sees a half-copied checkpoint.
        partial = self.root / f".step-{step:06d}.partial-{os.getpid()}"
        shutil.rmtree(partial, ignore_errors=True)
        shutil.copytree(local_dir, partial)
        if target.exists():
            shutil.rmtree(target)
        os.rename(partial, target)
        return str(target)
