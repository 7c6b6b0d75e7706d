"""Launch-time checks of prompt length: the overflow policy, the model's context window and the device memory.

``prompt_length_check`` counts every training and held-out prompt in the chosen model's tokens (the model
folder's tokenizer.json, read with the ``tokenizers`` library; the tiny model family counts bytes, which is
exact for its one-token-a-byte tokenizer), applies the job's ``overflow_policy`` with the same function the
training child, the evaluation and the deployment gate use (gpu_jobs.prompt_length.fit_rows), and refuses:

- under ``refuse``, when any prompt is longer than ``max_prompt_length`` (with the count and the longest);
- when the longest prompt the job would feed plus ``max_completion_length`` exceeds the model's context
  window (with both numbers);
- when a step's memory (gpu_jobs.memory.training_memory) exceeds the device type's memory
  (settings.JOB_DEVICE_MEMORY_GIB), with the estimate term by term and the settings that lower it. Agent jobs
  (an ``environment``) are checked for memory only, each episode counted at environment.context_tokens.

What it measured is frozen in the spec as ``prompt_tokens`` (the cost estimate and the job page read it).
Versions of more than ``COUNT_ROWS_UP_TO`` rows are not read here: the training child applies the policy and
the window check when it starts. Where no tokenizer is on this machine (a hub id, a built-in model not yet
imported) the count is the prompts' size in bytes, an upper bound for byte-level tokenizers: it then feeds
the estimates but refuses nothing, and the child checks the exact count.
"""

from __future__ import annotations

from django.conf import settings

from anneal.datasets.models import DatasetVersion
from anneal.datasets.storage import read_rows
from anneal.errors import InputError
from gpu_jobs.curriculum import parse_curriculum, stage_bands
from gpu_jobs.memory import (
    GIB,
    MemoryEstimate,
    ModelShape,
    kv_read_weight,
    model_folder,
    model_shape,
    training_memory,
)
from gpu_jobs.model_store import TINY, TINY_LONG
from gpu_jobs.prompt_length import (
    PromptTooLong,
    TokenCodec,
    byte_codec,
    check_window,
    codec_from_folder,
    fit_rows,
)
from gpu_jobs.spec import TrainingSettings

COUNT_ROWS_UP_TO = 100_000


def launch_codec(model: str) -> TokenCodec:
    """How the web process counts ``model``'s tokens (see the module docstring)."""
    folder = model_folder(model, store=settings.MODEL_STORE)
    codec = codec_from_folder(folder) if folder is not None else None
    if codec is not None:
        return codec
    if model in (TINY, TINY_LONG):  # one token per byte: exact before the model is built
        return TokenCodec(encode=byte_codec().encode, decode=byte_codec().decode, exact=True)
    return byte_codec()


def _rows(versions: list[DatasetVersion]) -> list[dict] | None:
    if sum(version.row_count for version in versions) > COUNT_ROWS_UP_TO:
        return None
    return [row for version in versions for row in read_rows(version.rows_path)]


def prompt_length_check(
    *,
    settings_: TrainingSettings,
    versions: list[DatasetVersion],
    eval_version: DatasetVersion | None,
    device_type: str,
) -> dict | None:
    """Refuse the launch (InputError naming the setting) as the module docstring says; return what was
    measured for the spec (None when the rows were too many to read here)."""
    shape = model_shape(settings_.model, store=settings.MODEL_STORE)
    if settings_.environment is not None:
        # Agent episodes: the environment bounds the context (environment.context_tokens), so only the memory.
        if shape is not None:
            _memory_check(agent_step_memory(settings_, shape=shape, device_type=device_type),
                          settings_=settings_, device_type=device_type)  # fmt: skip
        return None
    window = shape.window if shape is not None else None
    if settings_.max_prompt_length and window is not None:
        _window_check(settings_, longest=settings_.max_prompt_length, window=window)
    rows = _rows(versions)
    if rows is None:
        return None
    codec = launch_codec(settings_.model)
    train = _fit(settings_, rows, codec=codec, what="training rows", field="dataset_version")
    try:
        settings_.check_row_count(len(train.rows))
    except ValueError:
        raise InputError(
            f"{len(train.rows)} training rows are left after dropping {len(train.dropped)} longer than "
            f"max_prompt_length={settings_.max_prompt_length}, but prompts_per_step is "
            f"{settings_.prompts_per_step}: raise max_prompt_length, truncate instead of dropping, or lower "
            "prompts_per_step",
            field="params.max_prompt_length",
        ) from None
    try:
        stage_bands(train.lengths, parse_curriculum(settings_.length_curriculum))
    except ValueError as error:
        raise InputError(
            str(error).removeprefix("length_curriculum: "), field="params.length_curriculum"
        ) from None
    held_out = None
    if eval_version is not None:
        eval_rows = _rows([eval_version])
        if eval_rows is not None:
            held_out = _fit(
                settings_, eval_rows, codec=codec, what="held-out rows", field="eval_dataset_version"
            )
    longest = max(train.lengths + (held_out.lengths if held_out else []), default=0)
    if codec.exact and window is not None:
        _window_check(settings_, longest=longest, window=window)
    summary = {
        "exact": codec.exact,
        "rows": len(rows),
        "kept": len(train.rows),
        "dropped": len(train.dropped),
        "truncated": train.truncated,
        "longest_before": train.longest_before,
        "longest": max(train.lengths, default=0),
        "mean": round(sum(train.lengths) / max(1, len(train.lengths)), 1),
        "window": window,
    }
    if held_out is not None:
        summary["held_out"] = held_out.summary()
    if shape is not None:
        estimate = step_memory(settings_, shape=shape, prompt_tokens=longest, device_type=device_type)
        summary["memory"] = estimate.to_dict()
        summary["kv_read_weight"] = kv_read_weight(shape)
        _memory_check(estimate, settings_=settings_, device_type=device_type)
    return summary


def _fit(settings_: TrainingSettings, rows: list[dict], *, codec: TokenCodec, what: str, field: str):
    try:
        return fit_rows(
            rows,
            codec=codec,
            max_length=settings_.max_prompt_length,
            policy=settings_.overflow_policy if codec.exact else "drop",
            what=what,
        )
    except PromptTooLong as error:
        if not codec.exact:
            # Counted in bytes, an upper bound: the training child decides with the exact count.
            return fit_rows(rows, codec=codec, max_length=0, policy="refuse", what=what)
        raise InputError(
            str(error).removeprefix("max_prompt_length: "), field="params.max_prompt_length"
        ) from None


def _window_check(settings_: TrainingSettings, *, longest: int, window: int) -> None:
    try:
        check_window(
            longest_prompt=longest,
            max_completion_length=settings_.max_completion_length,
            window=window,
            model=settings_.model,
        )
    except ValueError as error:
        raise InputError(
            str(error).removeprefix("max_prompt_length: "), field="params.max_prompt_length"
        ) from None


def uses_gpu(settings_: TrainingSettings, device_type: str) -> bool:
    """Whether the job trains on a GPU: its ``device`` setting, or "auto" on a GPU device type."""
    return settings_.device == "cuda" or (settings_.device == "auto" and device_type != "cpu")


def step_memory(
    settings_: TrainingSettings, *, shape: ModelShape, prompt_tokens: int, device_type: str
) -> MemoryEstimate:
    return training_memory(
        shape,
        prompt_tokens=prompt_tokens,
        completion_tokens=settings_.max_completion_length,
        sequences=settings_.prompts_per_step * settings_.num_generations,
        gpu=uses_gpu(settings_, device_type),
        lora_rank=settings_.lora_rank,
        reference=settings_.beta > 0,
        checkpointing=_checkpointing(settings_),
    )


def agent_step_memory(settings_: TrainingSettings, *, shape: ModelShape, device_type: str) -> MemoryEstimate:
    """An agent job's step: each of its prompts_per_step x num_generations episodes trains on one segment of up
    to environment.context_tokens (gpu_jobs.agent.training), all of it counted as completion: the loss's
    logits cover everything after the segment's first context."""
    assert settings_.environment is not None
    return training_memory(
        shape,
        prompt_tokens=0,
        completion_tokens=int(settings_.environment["context_tokens"]),
        sequences=settings_.prompts_per_step * settings_.num_generations,
        gpu=uses_gpu(settings_, device_type),
        lora_rank=settings_.lora_rank,
        reference=settings_.beta > 0,
        checkpointing=_checkpointing(settings_),
    )


def _checkpointing(settings_: TrainingSettings) -> bool | None:
    return {"on": True, "off": False}.get(settings_.activation_checkpointing)


def device_memory_bytes(device_type: str) -> int | None:
    gib = settings.JOB_DEVICE_MEMORY_GIB.get(device_type)
    return None if gib is None else int(float(gib) * GIB)


def _memory_check(estimate: MemoryEstimate, *, settings_: TrainingSettings, device_type: str) -> None:
    available = device_memory_bytes(device_type)
    if available is None or estimate.total <= available:
        return
    remedies = ["lower prompts_per_step or num_generations"]
    if settings_.environment is not None:
        remedies.append("a smaller environment.context_tokens")
    else:
        remedies.append("set a smaller max_prompt_length with a drop or truncate overflow_policy")
    if not uses_gpu(settings_, device_type) and settings_.activation_checkpointing != "on":
        remedies.append('turn activation_checkpointing "on" (slower steps, far fewer activations kept)')
    if not settings_.lora_rank:
        remedies.append("use LoRA (lora_rank)")
    raise InputError(
        f"a training step needs about {estimate.describe()}, more than the {available / GIB:.3g} GiB of a "
        f"{device_type} device (ANNEAL_DEVICE_MEMORY_GIB): {', '.join(remedies)}, or choose a device type "
        "with more memory",
        field="params.device_type",
    )
