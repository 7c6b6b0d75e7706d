"""How the launch form lays out the job's settings for a domain expert: the essentials on one screen, the
rest under "Advanced" in groups, each in plain words with a link to the glossary (anneal.glossary).

The settings themselves come from gpu_jobs.spec.TrainingSettings and anneal.training.limits.RunLimits. Only
the names in ``ESSENTIALS`` are shown up front; every other setting, including one added to the dataclass
later, lands under Advanced: in the group its metadata names (``"group"``), else the group listed here, else
``OTHER_GROUP``. The API keeps the engine's own help (GET /api/v1/jobs/spec); the form shows ``PLAIN_HELP``
where the engine's words are jargon.
"""

ESSENTIALS = ("model", "max_steps", "budget")
OTHER_GROUP = "Other settings"

# (title, settings) in the order shown; a setting not listed goes to its metadata's group or OTHER_GROUP.
GROUPS: tuple[tuple[str, tuple[str, ...]], ...] = (
    (
        "How the model learns",
        (
            "algorithm",
            "num_generations",
            "prompts_per_step",
            "batch_size",
            "learning_rate",
            "lr_scheduler_type",
            "warmup_steps",
            "temperature",
            "beta",
            "loss_type",
            "seed",
        ),
    ),
    ("Lengths", ("max_completion_length", "max_prompt_length", "overflow_policy", "length_curriculum")),
    ("Light fine-tuning (LoRA)", ("lora_rank", "lora_alpha", "lora_dropout", "lora_target_modules")),
    (
        "Which prompts to train on",
        ("adaptive_sampling", "domain_floor", "profile_k", "profile_max_prompts"),
    ),
    (
        "Evaluation, checkpoints and alarms",
        ("eval_steps", "save_steps", "rollouts_per_step", "forgetting_margin"),
    ),
    (
        "Hardware, time and queue",
        (
            "device",
            "use_vllm",
            "generate_ahead",
            "activation_checkpointing",
            "devices",
            "device_type",
            "time_limit_minutes",
            "priority",
        ),
    ),
    ("Pausing", ("pause_on_alarms",)),
    ("Agent jobs", ("environment",)),
)
GROUP_OF = {name: title for title, names in GROUPS for name in names}

LABELS = {
    "model": "Model",
    "max_steps": "Training steps",
    "budget": "Budget (USD)",
    "num_generations": "Completions per prompt",
    "beta": "KL penalty (beta)",
    "lr_scheduler_type": "Learning-rate schedule",
    "lora_rank": "LoRA rank",
    "lora_alpha": "LoRA alpha",
    "lora_dropout": "LoRA dropout",
    "lora_target_modules": "LoRA target modules",
    "profile_k": "Difficulty profiling: tries per prompt",
    "profile_max_prompts": "Difficulty profiling: most prompts",
    "use_vllm": "Use vLLM on a GPU",
    "generate_ahead": "Generate ahead",
    "activation_checkpointing": "Activation checkpointing",
    "time_limit_minutes": "Time limit (minutes)",
}

# Settings whose engine help is jargon or names code: the form's words instead.
PLAIN_HELP = {
    "model": "The model to start from: tiny learns two-digit sums on a CPU in about a minute; "
    "smollm2-135m-instruct is a small real chat model (imported on first use); your team's own models too.",
    "max_steps": "How many rounds of training: each takes some prompts, writes completions, scores them and "
    "updates the model. More steps take longer and cost more.",
    "budget": "The most this job may spend, in USD (devices and sandboxes). When reached, the job saves a "
    "checkpoint and pauses, so nothing is lost. 0: no cap.",
    "algorithm": "How rewards become learning. grpo compares each completion with the average of its group "
    "(a good default); rloo compares it with the average of the other completions.",
    "num_generations": "Answers the model writes per prompt, compared with each other; at least 2. More gives "
    "a fairer comparison and costs proportionally more time.",
    "prompts_per_step": "Prompts per step; a step writes this many times 'completions per prompt' answers.",
    "batch_size": "Another way to size a step: answers per step, a multiple of completions per prompt. 0: use "
    "prompts per step.",
    "learning_rate": "How big each update of the model is: too high makes training unstable, too low changes "
    "nothing.",
    "temperature": "How varied the answers written during training are: higher explores more, lower stays "
    "safer; above 0.",
    "beta": "Keeps the trained model close to the one it started from; above 0 protects what it knew but "
    "learns slower and needs more memory. 0: off.",
    "loss_type": "A variant of the GRPO formula (only for algorithm grpo). dapo weighs every written token "
    "alike; leave it unless you reproduce a paper.",
    "lora_rank": "Train a small add-on beside the frozen model instead of every weight: less memory, faster "
    "on big models. The number is the add-on's size (8 or 16 are common); 0 trains the whole model.",
    "lora_alpha": "How strongly the add-on counts (only when LoRA rank is above 0); 16 is usual.",
    "lora_dropout": "Randomly drops part of the add-on while training to avoid overfitting, between 0 and 1 "
    "(only when LoRA rank is above 0).",
    "lora_target_modules": 'Which parts of the model get the add-on: "all-linear" (all of them, the usual '
    'choice) or names such as "q_proj,v_proj" (only when LoRA rank is above 0).',
    "profile_k": "Before training, try every prompt this many times with the starting model and drop those it "
    "always or never solves: they teach nothing. 0: off; otherwise at least 2.",
    "device": "Where the job trains: auto (a GPU when the machine has one, else the CPU), cpu or cuda (a GPU).",
    "use_vllm": "On a GPU, write the answers with vLLM, a faster engine; ignored on a CPU.",
    "generate_ahead": "Write the next step's answers while this step's are still being checked, so slow "
    "checks never hold training up; each update then learns from answers one update old. auto: on when the "
    "job trains on a GPU and a check runs code, calls out or runs a model; off on a CPU (where it makes steps "
    "slower) and when every check is quick. Only with the grpo algorithm, not for "
    "agent jobs.",
    "activation_checkpointing": "Trade time for memory: recompute parts of the model during the update "
    "instead of keeping them. Turn on when a job runs out of memory on long answers or agent episodes; "
    "auto: on on a GPU, off on a CPU.",
    "environment": "Only for agent jobs, where the model works in several turns in a sandbox and is rewarded "
    'by tests: a JSON object such as {"name": "repo_tests", "max_turns": 6}. Leave empty for ordinary jobs.',
}

# Setting -> glossary anchor (anneal.glossary.TERMS) of the word it needs.
GLOSSARY = {
    "model": "completion",
    "max_steps": "step",
    "budget": "budget",
    "algorithm": "grpo",
    "num_generations": "generations",
    "prompts_per_step": "step",
    "batch_size": "generations",
    "learning_rate": "learning-rate",
    "lr_scheduler_type": "learning-rate",
    "warmup_steps": "learning-rate",
    "temperature": "temperature",
    "beta": "kl",
    "loss_type": "loss-type",
    "max_completion_length": "max-completion-length",
    "max_prompt_length": "prompt-length",
    "overflow_policy": "prompt-length",
    "length_curriculum": "prompt-length",
    "lora_rank": "lora",
    "lora_alpha": "lora",
    "lora_dropout": "lora",
    "lora_target_modules": "lora",
    "adaptive_sampling": "adaptive-sampling",
    "domain_floor": "adaptive-sampling",
    "profile_k": "adaptive-sampling",
    "profile_max_prompts": "adaptive-sampling",
    "forgetting_margin": "held-out",
    "eval_steps": "held-out",
    "save_steps": "checkpoint",
    "use_vllm": "vllm",
    "generate_ahead": "generate-ahead",
    "environment": "agent",
}


def group_of(name: str, metadata_group: str | None = None) -> str:
    return metadata_group or GROUP_OF.get(name, OTHER_GROUP)


def group_order() -> list[str]:
    return [title for title, _ in GROUPS] + [OTHER_GROUP]
