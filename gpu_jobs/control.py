"""How a running job learns that it must checkpoint and exit, and where it resumes from.

The engine asks a ``JobControl`` (implemented by the caller: the gpu-worker reads the job's row) after every
optimiser step whether it should go on. On "pause" or "stop" the ``ControlCallback`` makes the trainer save a
full checkpoint (weights, optimiser, scheduler, RNG and trainer state) and end training cleanly; the next run
of the same job passes that folder to ``trainer.train(resume_from_checkpoint=...)`` and goes on from there.
"""

from __future__ import annotations

import re
import time
from pathlib import Path
from typing import Any, Protocol

CHECKPOINT_PATTERN = re.compile(r"^checkpoint-(\d+)$")
# transformers writes trainer_state.json after the weights, optimiser and RNG state: a folder that has it is
# whole, one without it was cut short by a kill.
COMPLETE_MARKER = "trainer_state.json"


class JobControl(Protocol):
    def requested(self) -> str | None:
        """None to go on; "pause" or "stop" to checkpoint and exit; "abandon" to exit at once, saving nothing
        (another run of the job took over). Called between steps; should return quickly."""


class NoControl:
    """Never interrupts: scripts and tests that run a job to its end."""

    def requested(self) -> str | None:
        return None


def latest_checkpoint(trainer_dir: Path) -> tuple[Path, int] | None:
    """The newest complete trainer checkpoint in ``trainer_dir`` and its step, or None."""
    found = []
    if Path(trainer_dir).is_dir():
        for child in Path(trainer_dir).iterdir():
            match = CHECKPOINT_PATTERN.match(child.name)
            if match and (child / COMPLETE_MARKER).is_file():
                found.append((int(match.group(1)), child))
    if not found:
        return None
    step, path = max(found)
    return path, step


class JobAbandoned(Exception):
    """Another run of the job took over (it was requeued while this one still ran): stop, write nothing."""


def control_callback(control: JobControl, *, poll_s: float = 0.5) -> Any:
    """A transformers TrainerCallback that polls ``control`` at most every ``poll_s`` seconds and, when asked,
    stops the trainer with a checkpoint. Its ``stopped_for`` says why training ended early, if it did.

    Built here rather than at import so that this module stays light: the worker imports it without torch.
    """
    from transformers import TrainerCallback

    class ControlCallback(TrainerCallback):
        def __init__(self) -> None:
            self.last_poll = 0.0
            self.stopped_for: str | None = None

        # TrainerCallback names the third parameter `control`, which here is the job's JobControl; transformers
        # passes it by position.
        def on_step_end(  # type: ignore[override]
            self, args: Any, state: Any, train_control: Any, **kwargs: Any
        ) -> None:
            now = time.monotonic()
            if now - self.last_poll < poll_s:
                return
            self.last_poll = now
            action = control.requested()
            if action == "abandon":
                raise JobAbandoned("another run of this job took over, or its worker is gone")
            if action in ("pause", "stop") and state.global_step < state.max_steps:
                self.stopped_for = action
                train_control.should_save = True
                train_control.should_training_stop = True

    return ControlCallback()
