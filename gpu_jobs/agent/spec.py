"""The ``environment`` option of a job: which environment the episodes run in, its limits and its reward.

Torch-free and Django-free, so the web side validates it at launch. ``validate_environment(value)`` returns
the option with every default filled in, or raises ValueError whose message starts with the wrong key
(``environment.max_turns: ...``), the way GRPOJobConfig reports its fields.

Reward of an episode, computed on its final state: ``tests_weight * tests + format_weight * format
- turn_penalty * turns``, or ``formula`` over the same names (the formula language of composite verifiers):
tests = share of the task's tests passing at the end, format = share of turns with a well-formed tool call,
turns = model turns taken, finished = 1 when the model called finish, tested = 1 when it ran the tests after its
last edit and then called finish (gpu_jobs.agent.episode.tested_before_finish; with no edit, ran them at all),
edited = 1 when an edit applied (gpu_jobs.agent.episode.edited), solved = 1 when every test passes.
``edited * tested`` rewards the whole habit (change the code, run the tests, finish), where ``tested`` alone
also pays an episode that runs the tests and finishes without touching the code.

Warm-up (``warmup_sft_steps`` > 0): before GRPO, supervised steps on scripted traces of task-pack tasks the
job's rows do not hold (gpu_jobs.agent.warmup), so a model that never writes a tool call starts with some.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field, fields
from pathlib import PurePosixPath
from typing import Any

from gpu_jobs.agent.taskpack import held_out_rows
from gpu_jobs.agent.taskpack.mutants import MAX_MUTANTS
from gpu_jobs.rewards.formula import FormulaError, check_formula

ENVIRONMENT_NAMES = ("repo_tests",)
TOOL_FORMATS = ("auto", "plain", "chat_template")
REWARD_NAMES = ("tests", "format", "turns", "finished", "tested", "edited", "solved")
# An environment that fits the tiny model (gpu_jobs.tiny_model: 512 positions, one token per character): a short
# system prompt and small observations. A run_tests turn ("Run the tests.\n<tool>...</tool>") is 65 characters;
# read_file and replace_text turns do not fit 72 and are left out of its warm-up traces.
TINY_MODEL_ENVIRONMENT = {
    "max_turns": 4,
    "turn_tokens": 72,
    "token_budget": 288,
    "context_tokens": 460,
    "observation_chars": 120,
    "system_prompt": "Fix it.",
    "format_weight": 0.1,
}


MAX_EVAL_EPISODES = 16


@dataclass(frozen=True)
class EnvironmentSpec:
    name: str = "repo_tests"  # repo_tests: a task row's repository; reward from its tests (gpu_jobs.agent)
    max_turns: int = 6  # model turns per episode; an episode that reaches it ends as "turn_limit"
    turn_tokens: int = 96  # most tokens the model writes in one turn
    token_budget: int = 384  # most tokens the model writes in the whole episode ("token_budget")
    context_tokens: int = 1024  # when the next turn would not fit, old turns become a running summary
    observation_chars: int = 600  # a tool's output is cut to this many characters, with a marker
    tool_timeout_s: float = 5.0  # wall and CPU time of one tool call in the sandbox
    episode_timeout_s: float = 120.0  # wall time of a whole episode ("timeout")
    tmpfs_mb: int = 32  # the episode's sandbox disk
    tool_format: str = "auto"  # auto: the chat template's tool format when the tokenizer has one, else plain
    tests_weight: float = 1.0
    format_weight: float = 0.0
    turn_penalty: float = 0.0
    formula: str = ""  # instead of the weighted sum, e.g. "tests * (1 - 0.05 * turns)"
    system_prompt: str = ""  # replaces the default system message and its tool instructions (small models)
    warmup_sft_steps: int = field(
        default=0,
        metadata={
            "help": "Supervised steps before GRPO on scripted traces (run the tests, read the module, apply "
            "the fix, run the tests, finish) of task-pack tasks the job's rows do not hold, rendered in the "
            "job's tool-call format, with the loss on the model's own turns only. For a model that never "
            "writes a well-formed tool call (its reward would be flat). 0: none."
        },
    )
    warmup_sft_learning_rate: float = field(
        default=1e-4,
        metadata={
            "help": "Learning rate of the warm-up (AdamW; a short ramp, a linear decay over the last quarter)."
        },
    )
    warmup_sft_batch_size: int = field(
        default=8, metadata={"help": "Traces (conversation segments) per warm-up step."}
    )
    warmup_mutants: int = field(
        default=0,
        metadata={
            "help": "Besides its planted bug, this many more bugs in each warm-up repository, traced alike: "
            "one-token mutations its tests catch (gpu_jobs.agent.taskpack.mutants), so the warm-up shows "
            f"more fixes of the kinds the pack plants. At most {MAX_MUTANTS}; 0: none."
        },
    )
    eval_episodes: int = field(
        default=1,
        metadata={
            "help": "Episodes per held-out task in each evaluation. 1: one greedy episode. More: that many "
            "episodes sampled at the job's temperature, with the same seed at every evaluation, so the shares "
            "move in finer steps than 1/tasks and a change between evaluations is the model's, not the "
            f"sampling's. At most {MAX_EVAL_EPISODES}."
        },
    )

    guided_calls: bool = field(
        default=False,
        metadata={
            "help": "While a turn writes its tool call, no token may close the call before every argument its "
            "tool requires is named (gpu_jobs.agent.guided_calls): a small model that ends replace_text "
            "without 'new' is made to write it. The rest of the turn is the model's. The turns are then written "
            "by transformers on a GPU too: vLLM's are not guided, so use_vllm does not apply."
        },
    )

    def to_dict(self) -> dict:
        return asdict(self)


_INTS = {"max_turns": 1, "turn_tokens": 1, "token_budget": 1, "context_tokens": 16, "observation_chars": 16,
         "tmpfs_mb": 4, "warmup_sft_steps": 0, "warmup_sft_batch_size": 1, "eval_episodes": 1,
         "warmup_mutants": 0}  # fmt: skip
_NUMBERS = ("tool_timeout_s", "episode_timeout_s")
_WEIGHTS = ("tests_weight", "format_weight", "turn_penalty")
MAX_TOOL_TIMEOUT_S = 60.0
MAX_SYSTEM_PROMPT_CHARS = 4000
MAX_WARMUP_SFT_STEPS = 10000


def validate_environment(value: object) -> EnvironmentSpec:
    """The environment option as an EnvironmentSpec; ValueError naming the wrong key otherwise."""
    if isinstance(value, EnvironmentSpec):
        value = value.to_dict()
    if not isinstance(value, dict):
        raise ValueError(f'environment: must be an object such as {{"name": "repo_tests"}}, got {value!r}')
    known = {f.name for f in fields(EnvironmentSpec)}
    unknown = sorted(set(value) - known)
    if unknown:
        raise ValueError(f"environment.{unknown[0]}: unknown option; options: {', '.join(sorted(known))}")
    name = value.get("name", "repo_tests")
    if name not in ENVIRONMENT_NAMES:
        raise ValueError(f"environment.name: must be one of {', '.join(ENVIRONMENT_NAMES)}, got {name!r}")
    for key, low in _INTS.items():
        if key in value:
            v = value[key]
            if isinstance(v, bool) or not isinstance(v, int) or v < low:
                raise ValueError(f"environment.{key}: must be a whole number >= {low}, got {v!r}")
    for key in (*_NUMBERS, *_WEIGHTS):
        if key in value:
            v = value[key]
            if isinstance(v, bool) or not isinstance(v, int | float) or not math.isfinite(v):
                raise ValueError(f"environment.{key}: must be a number, got {v!r}")
            if key in _NUMBERS and not 0 < v <= (MAX_TOOL_TIMEOUT_S if key == "tool_timeout_s" else 3600):
                raise ValueError(
                    f"environment.{key}: must be above 0 and at most "
                    f"{MAX_TOOL_TIMEOUT_S if key == 'tool_timeout_s' else 3600:g} seconds"
                )
            if key in _WEIGHTS and v < 0:
                raise ValueError(f"environment.{key}: must be >= 0, got {v}")
    if value.get("warmup_sft_steps", 0) > MAX_WARMUP_SFT_STEPS:
        raise ValueError(f"environment.warmup_sft_steps: at most {MAX_WARMUP_SFT_STEPS}")
    if value.get("warmup_mutants", 0) > MAX_MUTANTS:
        raise ValueError(
            f"environment.warmup_mutants: at most {MAX_MUTANTS} per repository, got {value['warmup_mutants']}"
        )
    if value.get("eval_episodes", 1) > MAX_EVAL_EPISODES:
        raise ValueError(
            f"environment.eval_episodes: at most {MAX_EVAL_EPISODES} episodes per held-out task, "
            f"got {value['eval_episodes']}"
        )
    if "warmup_sft_learning_rate" in value:
        v = value["warmup_sft_learning_rate"]
        if isinstance(v, bool) or not isinstance(v, int | float) or not math.isfinite(v) or not 0 < v <= 1:
            raise ValueError(
                f"environment.warmup_sft_learning_rate: must be a number above 0, at most 1, got {v!r}"
            )
    if not isinstance(value.get("guided_calls", False), bool):
        raise ValueError(f"environment.guided_calls: must be true or false, got {value['guided_calls']!r}")
    fmt = value.get("tool_format", "auto")
    if fmt not in TOOL_FORMATS:
        raise ValueError(f"environment.tool_format: must be one of {', '.join(TOOL_FORMATS)}, got {fmt!r}")
    system_prompt = value.get("system_prompt", "")
    if not isinstance(system_prompt, str) or len(system_prompt) > MAX_SYSTEM_PROMPT_CHARS:
        raise ValueError(
            f"environment.system_prompt: must be text of at most {MAX_SYSTEM_PROMPT_CHARS} characters"
        )
    formula = value.get("formula", "")
    if not isinstance(formula, str):
        raise ValueError("environment.formula: must be text")
    if formula.strip():
        try:
            check_formula(formula, names=set(REWARD_NAMES))
        except FormulaError as exc:
            raise ValueError(f"environment.formula: {exc}") from None
    spec = EnvironmentSpec(**value)
    if spec.turn_tokens > spec.token_budget:
        raise ValueError(
            f"environment.turn_tokens: {spec.turn_tokens} is more than token_budget ({spec.token_budget})"
        )
    if not spec.formula.strip() and spec.tests_weight == 0 and spec.format_weight == 0:
        raise ValueError("environment.tests_weight: tests_weight or format_weight must be above 0")
    return spec


class RowError(ValueError):
    """The dataset row cannot start an episode; the message names the field."""


def check_row(row: object) -> tuple[dict[str, str], list[str]]:
    """The row's files and test files; RowError naming the field otherwise."""
    if not isinstance(row, dict):
        raise RowError("row: must be an object with prompt, files and test_files")
    files = row.get("files")
    if not isinstance(files, dict) or not files:
        raise RowError("files: must be an object of relative path -> file text")
    for name, text in files.items():
        path = PurePosixPath(str(name))
        if not name or path.is_absolute() or ".." in path.parts or not isinstance(text, str):
            raise RowError(f"files[{name!r}]: needs a relative path inside the repository and text")
    tests = row.get("test_files")
    if not isinstance(tests, list) or not tests:
        raise RowError("test_files: must list the repository's test modules (e.g. tests/test_x.py)")
    for name in tests:
        if name not in files or not str(name).endswith(".py"):
            raise RowError(f"test_files: {name!r} must be a .py file listed in files")
    return files, tests


def check_job_environment(config: Any) -> dict:
    """Checks a GRPOJobConfig whose ``environment`` is set; returns the option with its defaults filled in.

    ValueError naming the field: the option itself, a row that cannot start an episode, or a job option
    that environment jobs do not support yet.
    """
    spec = validate_environment(config.environment)
    # The held-out rows are tasks too: the evaluation plays an episode on each.
    for field_name in ("rows", "eval_rows"):
        for index, row in enumerate(getattr(config, field_name, [])):
            try:
                check_row(row)
            except RowError as exc:
                raise ValueError(f"{field_name}[{index}].{exc}") from None
    unsupported = {
        "algorithm": getattr(config, "algorithm", "grpo") != "grpo",
        "profile_k": getattr(config, "profile_k", 0) != 0,
        "domain_weights": bool(getattr(config, "domain_weights", {})),
        "adaptive_sampling": bool(getattr(config, "adaptive_sampling", False)),
    }
    for name, used in unsupported.items():
        if used:
            raise ValueError(f"{name}: not supported with an environment yet; leave it at its default")
    if spec.warmup_sft_steps:
        if not held_out_rows([*config.rows, *getattr(config, "eval_rows", [])]):
            raise ValueError(
                "environment.warmup_sft_steps: the warm-up trains on task-pack tasks neither the job's rows "
                "nor its held-out rows hold, and they hold every one; train or evaluate on fewer pack tasks "
                "or set warmup_sft_steps to 0"
            )
    # use_vllm and device apply as for single-turn jobs (gpu_jobs.device): episodes generate through the
    # trainer's vLLM on a CUDA host (gpu_jobs.agent.training.VLLMTurns), with transformers elsewhere.
    return spec.to_dict()
