"""A job's prompt lengths at run time: its rows fitted to ``max_prompt_length``, the model's window checked,
the length curriculum set up and the held-out buckets chosen, once, before training starts.

The launch did the same checks on the same rows with the same function (anneal.training.length); here they
run again with the tokenizer the model trains with, for rows too many to read at launch and for models whose
tokenizer was not on the web host. Torch-free.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path

from gpu_jobs.config import GRPOJobConfig
from gpu_jobs.curriculum import LengthCurriculum, parse_curriculum, stage_bands, stage_of
from gpu_jobs.evaluation import length_buckets
from gpu_jobs.memory import ModelShape
from gpu_jobs.prompt_length import TokenCodec, check_window, fit_message, fit_rows
from gpu_jobs.sink import EventSink


@dataclass
class JobLengths:
    """What ``prepare_lengths`` found: the config with its rows fitted, each row's prompt length, the
    curriculum (None: off) and its stage per row, and the held-out buckets' upper bounds."""

    config: GRPOJobConfig
    lengths: list[int]
    eval_lengths: list[int]
    curriculum: LengthCurriculum | None
    row_stages: list[int] | None
    eval_bounds: list[int]


def prepare_lengths(
    config: GRPOJobConfig, *, codec: TokenCodec, model_dir: str, sink: EventSink
) -> JobLengths:
    """Fit the rows as ``config.overflow_policy`` says (ValueError naming max_prompt_length under refuse),
    check the longest prompt plus the completion against the model's window, and set the curriculum up.
    Logs what the policy did and the curriculum's stages."""
    if config.environment is not None:
        return JobLengths(config, [], [], None, None, [])
    fitted = fit_rows(
        config.rows,
        codec=codec,
        max_length=config.max_prompt_length,
        policy=config.overflow_policy,
        what="training rows",
    )
    held_out = fit_rows(
        config.eval_rows,
        codec=codec,
        max_length=config.max_prompt_length,
        policy=config.overflow_policy,
        what="held-out rows",
    )
    for what, result in (("training rows", fitted), ("held-out rows", held_out)):
        message = fit_message(
            result, what=what, max_length=config.max_prompt_length, policy=config.overflow_policy
        )
        if message:
            sink.emit("log", {"message": message, "prompt_length": {"rows": what, **result.summary()}})
    window = _window(model_dir)
    check_window(
        longest_prompt=max(fitted.lengths + held_out.lengths, default=0),
        max_completion_length=config.max_completion_length,
        window=window,
        model=config.model,
    )
    if fitted.dropped or fitted.truncated or held_out.dropped or held_out.truncated:
        # Rebuilt, so the run's own checks (rows for a step, domains) hold for the rows it will train on.
        config = dataclasses.replace(config, rows=fitted.rows, eval_rows=held_out.rows)
    stages = parse_curriculum(config.length_curriculum)
    curriculum, row_stages = None, None
    if stages:
        counts = stage_bands(fitted.lengths, stages)
        curriculum = LengthCurriculum(
            stages, max_steps=config.max_steps, state_file=Path(config.output_dir) / "curriculum.json"
        )
        row_stages = [stage_of(length, stages) for length in fitted.lengths]
        sink.emit(
            "log",
            {
                "message": "length curriculum: "
                + "; ".join(
                    f"stage {index + 1} {stage.describe()} ({count} rows)"
                    for index, (stage, count) in enumerate(zip(stages, counts, strict=True))
                )
                + f"; now in stage {curriculum.current + 1}",
                "curriculum": {
                    "stage": curriculum.current + 1,
                    "stages": curriculum.describe(),
                    "rows": counts,
                },
            },
        )
    bounds = length_buckets(
        held_out.lengths, stage_bounds=[stage.max_length for stage in stages] if stages else None
    )
    return JobLengths(config, fitted.lengths, held_out.lengths, curriculum, row_stages, bounds)


def _window(model_dir: str) -> int | None:
    folder = Path(model_dir)
    if not (folder / "config.json").is_file():
        return None
    return ModelShape.from_folder(folder).window
