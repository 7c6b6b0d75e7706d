"""What the job spec's algorithm and fine-tuning choices become in TRL and PEFT.

- ``algorithm`` "grpo": TRL's ``GRPOTrainer`` with the spec's ``loss_type``; "rloo": TRL's ``RLOOTrainer``
  (no loss_type: its loss is fixed). Both take the same generation, reward and optimiser settings.
- ``overlap`` (the default): the trainer class is wrapped by ``gpu_jobs.overlap.overlapped``, which scores a
  step's rewards (sandboxed verifiers included) while the rest of the step's forward passes run.
- ``generate_ahead`` (``generates_ahead``): wrapped by ``gpu_jobs.ahead.ahead`` instead: a batch's rewards are
  scored while the next batch is generated and the step updates on the batch before (one step off-policy; grpo
  only). "auto" turns it on where the model trains on a GPU and a verifier is slow (sandboxed code, a call
  out, a model): there generation and the update leave the CPU's cores to the sandboxes, so the rewards are
  hidden whole; on the CPU the model and the sandboxes share the cores, nothing is left idle to hide them
  behind, and the step got slower (bench/train_step.py).
- ``lora_rank`` > 0: a PEFT ``LoraConfig`` handed to the trainer, which wraps the model; checkpoints are
  saved with the adapters merged into the base weights (``save_model``) so every checkpoint is a plain model
  folder that serving and evaluation load like any other.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from gpu_jobs.config import GRPOJobConfig
from gpu_jobs.spec import TrainingSettings


def generates_ahead(settings: TrainingSettings, *, device: str, slow_rewards: bool) -> bool:
    """Whether the job, training on ``device`` ("cpu" or "cuda"), scores each batch's rewards during the next
    step (gpu_jobs.ahead): "on"; or "auto" on a GPU, for a grpo job that is not an agent job, when
    ``slow_rewards`` (a verifier runs code in a sandbox, calls out or runs a model: registry.slow_to_score).
    Cheap verifiers (exact match, a pattern) take milliseconds: nothing to hide, so the step would only pay
    generating ahead's extra forward pass (the old policy's log-probabilities) and go off-policy."""
    if settings.generate_ahead == "on":
        return True
    return (
        settings.generate_ahead == "auto"
        and device == "cuda"
        and slow_rewards
        and settings.algorithm == "grpo"
        and settings.environment is None
    )


def algorithm_classes(
    config: TrainingSettings, *, overlap: bool = True, generate_ahead: bool = False
) -> tuple[type, type, dict]:
    """(TRL config class, trainer class, extra config arguments) for ``config.algorithm``; with ``overlap``
    the trainer scores rewards while the step's other work runs, with the same results (gpu_jobs.overlap);
    with ``generate_ahead`` (``generates_ahead``; grpo only), during the next step instead (gpu_jobs.ahead)."""
    from gpu_jobs.overlap import overlapped

    if config.algorithm == "rloo":
        from trl import RLOOConfig, RLOOTrainer

        return RLOOConfig, overlapped(RLOOTrainer) if overlap else RLOOTrainer, {}
    from trl import GRPOConfig, GRPOTrainer

    if generate_ahead:
        from gpu_jobs.ahead import ahead

        return GRPOConfig, ahead(GRPOTrainer), {"loss_type": config.loss_type}
    return GRPOConfig, overlapped(GRPOTrainer) if overlap else GRPOTrainer, {"loss_type": config.loss_type}


def lora_config(config: GRPOJobConfig) -> Any:
    """A PEFT ``LoraConfig`` when ``config.lora_rank`` > 0, else None (full fine-tuning)."""
    if config.lora_rank <= 0:
        return None
    from peft import LoraConfig

    return LoraConfig(
        r=config.lora_rank,
        lora_alpha=config.lora_alpha,
        lora_dropout=config.lora_dropout,
        target_modules=config.lora_targets(),
        task_type="CAUSAL_LM",
    )


def save_model(model: Any, folder: Path) -> None:
    """Save ``model`` as a plain Hugging Face folder; a PEFT model is saved with its adapters merged into a
    copy of the weights (the model being trained keeps its adapters)."""
    from peft import PeftModel

    if isinstance(model, PeftModel):
        import copy

        merged = copy.deepcopy(model).merge_and_unload()
        merged.save_pretrained(folder)
        return
    model.save_pretrained(folder)
