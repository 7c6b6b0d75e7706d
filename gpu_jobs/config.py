"""`GRPOJobConfig`: everything one GRPO job needs, checked up front so that a bad job fails before it loads
a model.

Torch-free (it imports only ``gpu_jobs.rewards``), so the web side can validate a job spec on launch.
Every field carries its help text in ``field(metadata={"help": ...})``, the way TRL documents its configs;
``__post_init__`` raises ValueError whose message starts with the name of the wrong field.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field, fields

from gpu_jobs.rewards import SpecError, validate_spec

# The loss formulations TRL 1.16's GRPOTrainer accepts with its default token-level importance sampling;
# "luspo" also exists but needs importance_sampling_level="sequence", which this config does not expose.
LOSS_TYPES = ("grpo", "dr_grpo", "dapo", "bnpo", "cispo", "sapo", "vespo")


@dataclass(kw_only=True)
class GRPOJobConfig:
    """One GRPO run. Defaults suit the tiny model on a CPU; see each field's help."""

    model: str = field(
        default="tiny",
        metadata={
            "help": '"tiny" for the locally built tiny model, or the path of a local Hugging Face model folder.'
        },
    )
    model_store: str = field(
        metadata={
            "help": "Folder where built models live; the tiny model is built there on first use (~20 s)."
        }
    )
    output_dir: str = field(
        metadata={"help": "Working folder of this run: trainer files and checkpoints before they are stored."}
    )
    rows: list[dict] = field(
        metadata={
            "help": 'Dataset rows: each has a "prompt" (text) plus any columns the verifiers read, such as '
            '"answer" or "tests". Needs at least prompts_per_step rows.'
        }
    )
    verifiers: list[dict] = field(
        metadata={
            "help": 'Reward sources: [{"name": str, "spec": verifier spec, "weight": float >= 0}]. The reward '
            "of a completion is the weighted sum of its verifier scores; metrics are logged per name."
        }
    )
    max_steps: int = field(default=20, metadata={"help": "Number of optimiser steps."})
    num_generations: int = field(
        default=8,
        metadata={
            "help": "Completions sampled per prompt (the group whose rewards are compared); at least 2."
        },
    )
    prompts_per_step: int = field(
        default=8,
        metadata={
            "help": "Distinct prompts per step; a step trains on prompts_per_step * num_generations completions."
        },
    )
    learning_rate: float = field(default=3e-4, metadata={"help": "Constant learning rate of AdamW."})
    max_completion_length: int = field(default=8, metadata={"help": "Most tokens generated per completion."})
    temperature: float = field(
        default=1.0, metadata={"help": "Sampling temperature of the rollouts; above 0."}
    )
    beta: float = field(
        default=0.0,
        metadata={
            "help": "KL penalty against the starting model; 0 skips the reference model (faster, less memory)."
        },
    )
    loss_type: str = field(
        default="dapo", metadata={"help": f"TRL GRPO loss formulation, one of: {', '.join(LOSS_TYPES)}."}
    )
    save_steps: int = field(
        default=0, metadata={"help": "Save a checkpoint every this many steps; 0 saves only at the end."}
    )
    seed: int = field(default=0, metadata={"help": "Seed for sampling, prompt order and initialisation."})
    rollouts_per_step: int = field(
        default=4,
        metadata={"help": "Rollouts (prompt, completion, reward and why) reported per step; 0 for none."},
    )
    eval_rows: list[dict] = field(
        default_factory=list,
        metadata={
            "help": "Held-out rows scored with greedy completions by the job's verifiers, per domain (a row's "
            '"domain", else "all"): before the first step, every eval_steps and at the end. Empty: no evaluation.'
        },
    )
    eval_steps: int = field(
        default=0,
        metadata={
            "help": "Evaluate on eval_rows every this many steps; 0 only before training and at the end."
        },
    )

    def __post_init__(self) -> None:
        _check(
            isinstance(self.model, str) and self.model.strip() != "", "model", "must be a non-empty string"
        )
        for name in ("model_store", "output_dir"):
            value = getattr(self, name)
            _check(isinstance(value, str) and value.strip() != "", name, "must be a non-empty path")
        for name, low in (
            ("max_steps", 1),
            ("num_generations", 2),
            ("prompts_per_step", 1),
            ("max_completion_length", 1),
        ):
            _check_int(self, name, low)
        for name in ("save_steps", "rollouts_per_step", "seed", "eval_steps"):
            _check_int(self, name, 0)
        _check_number(self, "learning_rate", positive=True)
        _check_number(self, "temperature", positive=True)
        _check_number(self, "beta", positive=False)
        _check(
            self.loss_type in LOSS_TYPES,
            "loss_type",
            f"must be one of {', '.join(LOSS_TYPES)}, got {self.loss_type!r}",
        )
        self._check_rows()
        _check(isinstance(self.eval_rows, list), "eval_rows", "must be a list of rows")
        for index, row in enumerate(self.eval_rows):
            prompt = row.get("prompt") if isinstance(row, dict) else None
            _check(
                isinstance(prompt, str) and prompt != "",
                f"eval_rows[{index}].prompt",
                "must be a non-empty string",
            )
        self._check_verifiers()

    def _check_rows(self) -> None:
        _check(isinstance(self.rows, list) and len(self.rows) > 0, "rows", "must be a non-empty list of rows")
        for index, row in enumerate(self.rows):
            _check(isinstance(row, dict), f"rows[{index}]", "must be an object with a prompt")
            prompt = row.get("prompt")
            _check(
                isinstance(prompt, str) and prompt != "",
                f"rows[{index}].prompt",
                "must be a non-empty string",
            )
        # TRL draws prompts_per_step distinct prompts per step and drops an incomplete draw: with fewer rows
        # than that it would never produce a batch.
        _check(
            len(self.rows) >= self.prompts_per_step,
            "rows",
            f"has {len(self.rows)} rows but prompts_per_step is {self.prompts_per_step}: "
            "add rows or lower prompts_per_step",
        )

    def _check_verifiers(self) -> None:
        _check(
            isinstance(self.verifiers, list) and len(self.verifiers) > 0,
            "verifiers",
            "must be a non-empty list of {name, spec, weight}",
        )
        names: set[str] = set()
        for index, verifier in enumerate(self.verifiers):
            where = f"verifiers[{index}]"
            _check(isinstance(verifier, dict), where, "must be an object with name, spec and weight")
            unknown = set(verifier) - {"name", "spec", "weight"}
            _check(not unknown, where, f"has unknown keys {sorted(unknown)}; allowed: name, spec, weight")
            name = verifier.get("name")
            _check(
                isinstance(name, str) and name.strip() != "", f"{where}.name", "must be a non-empty string"
            )
            # Names become metric keys ("rewards/<name>"): a duplicate would merge two verifiers' curves.
            _check(name not in names, f"{where}.name", f"{name!r} is used by another verifier")
            names.add(name)
            weight = verifier.get("weight")
            _check(
                isinstance(weight, int | float) and not isinstance(weight, bool) and math.isfinite(weight),
                f"{where}.weight",
                "must be a number",
            )
            _check(weight >= 0, f"{where}.weight", f"must be >= 0, got {weight}")
            try:
                validate_spec(verifier.get("spec"))
            except SpecError as error:
                raise ValueError(f"{where}.spec.{error.field}: {error.message}") from error
        _check(
            any(v["weight"] > 0 for v in self.verifiers),
            "verifiers",
            "at least one verifier needs a weight above 0, or no completion is ever rewarded",
        )

    def to_dict(self) -> dict:
        """A JSON-serialisable copy; ``GRPOJobConfig(**config.to_dict())`` rebuilds it."""
        return asdict(self)

    @classmethod
    def field_help(cls) -> dict[str, str]:
        """Field name -> help text, for forms and the API schema."""
        return {f.name: f.metadata["help"] for f in fields(cls)}


def _check(ok: bool, name: str, message: str) -> None:
    if not ok:
        raise ValueError(f"{name}: {message}")


def _check_int(config: GRPOJobConfig, name: str, low: int) -> None:
    value = getattr(config, name)
    _check(isinstance(value, int) and not isinstance(value, bool), name, f"must be an integer, got {value!r}")
    _check(value >= low, name, f"must be >= {low}, got {value}")


def _check_number(config: GRPOJobConfig, name: str, *, positive: bool) -> None:
    value = getattr(config, name)
    ok_type = isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)
    _check(ok_type, name, f"must be a finite number, got {value!r}")
    if positive:
        _check(value > 0, name, f"must be > 0, got {value}")
    else:
        _check(value >= 0, name, f"must be >= 0, got {value}")
