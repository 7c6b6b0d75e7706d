"""Where a job runs: the device-dependent part of TRL's ``GRPOConfig``, chosen from the job's config and
the host.

The same job spec runs on a laptop and on a GPU host. On the CPU it trains in float32 with plain
``transformers`` generation; on a CUDA device it trains in bf16 (where the GPU supports it, else fp16),
with activation (gradient) checkpointing, and generates rollouts with vLLM in TRL's colocate mode
(vLLM shares the training process and the GPU, so one GPU is enough). More GPUs: start the job's process
with ``accelerate launch --num_processes N``; TRL shards the batch and vLLM colocates on each GPU.

Torch-free: callers pass what they found on the host (``HostInfo``), so the mapping is testable anywhere.
"""

from __future__ import annotations

from dataclasses import dataclass
from importlib.util import find_spec
from typing import Any

DEVICES = ("auto", "cpu", "cuda")
CHECKPOINTING = ("auto", "on", "off")  # activation (gradient) checkpointing; auto: on a GPU only
# generate_ahead: each batch's rewards scored during the next step (gpu_jobs.ahead); auto: on a GPU only.
GENERATE_AHEAD = ("auto", "on", "off")
# vLLM reserves this share of GPU memory for its KV cache in colocate mode; the rest stays for training.
VLLM_GPU_MEMORY_UTILIZATION = 0.3
# What long prompts need from the colocated vLLM engine: a group's completions share their prompt, so its KV
# cache is computed once and reused (prefix caching), and a prompt longer than the engine's token budget per
# step (TRL sets max_num_batched_tokens=4096) is prefilled in chunks instead of refused (chunked prefill).
VLLM_ENGINE_OPTIONS = {"enable_prefix_caching": True, "enable_chunked_prefill": True}


class DeviceError(ValueError):
    """The job asks for something this host cannot give; the message names the field and what to do."""


@dataclass(frozen=True)
class HostInfo:
    """What the host offers: CUDA devices, bf16 support on them, and whether vLLM is installed."""

    cuda_devices: int = 0
    bf16: bool = False
    vllm: bool = False

    @classmethod
    def detect(cls) -> HostInfo:
        """The running host (imports torch)."""
        import torch

        cuda = torch.cuda.device_count() if torch.cuda.is_available() else 0
        return cls(
            cuda_devices=cuda,
            bf16=bool(cuda and torch.cuda.is_bf16_supported()),
            vllm=find_spec("vllm") is not None,
        )


def resolve_device(device: str, host: HostInfo) -> str:
    """The device the job runs on, "cpu" or "cuda"; "auto" takes CUDA when the host has a device."""
    if device not in DEVICES:
        raise DeviceError(f"device: must be one of {', '.join(DEVICES)}, got {device!r}")
    if device == "auto":
        return "cuda" if host.cuda_devices else "cpu"
    if device == "cuda" and not host.cuda_devices:
        raise DeviceError(
            "device: 'cuda' was asked for but this host has no CUDA device; "
            "run the job on a GPU worker or set device to 'auto' or 'cpu'"
        )
    return device


def _checkpointing_name() -> str:
    """TrainingArguments' name for activation checkpointing: "activation_checkpointing" from transformers 5.21
    on, "gradient_checkpointing" before (the GPU set, requirements/gpu.txt, pins 5.20 for vLLM)."""
    import inspect

    from transformers import TrainingArguments

    names = inspect.signature(TrainingArguments.__init__).parameters
    return "activation_checkpointing" if "activation_checkpointing" in names else "gradient_checkpointing"


def device_args(
    *, device: str, use_vllm: bool, host: HostInfo, activation_checkpointing: str = "auto"
) -> dict[str, Any]:
    """Keyword arguments for ``trl.GRPOConfig`` that depend on where the job runs.

    ``activation_checkpointing`` (one of CHECKPOINTING): auto turns it on on a GPU and off on the CPU.

    ``use_vllm`` applies on CUDA only (vLLM has no CPU path here); asking for it on a CUDA host without
    vLLM installed raises DeviceError rather than silently generating ten times slower.
    """
    checkpointing = _checkpointing_name()
    if resolve_device(device, host) == "cpu":
        return {
            "use_cpu": True,
            "bf16": False,
            # TRL turns it on by default; on a small model on the CPU it only costs time. A real model's agent
            # episodes (1,000-token sequences) need it: without it SmolLM2's step took 21 GB here.
            checkpointing: activation_checkpointing == "on",
            "use_vllm": False,
        }
    args: dict[str, Any] = {
        "use_cpu": False,
        "bf16": host.bf16,
        "fp16": not host.bf16,
        # Recomputes activations in the backward pass: less memory for longer completions and bigger groups.
        checkpointing: activation_checkpointing != "off",
        "use_vllm": False,
    }
    if use_vllm:
        if not host.vllm:
            raise DeviceError(
                "use_vllm: vLLM is not installed on this GPU host; install the GPU set "
                "(pip install -r requirements/gpu.txt) or set use_vllm to false"
            )
        args.update(
            use_vllm=True,
            vllm_mode="colocate",
            vllm_gpu_memory_utilization=VLLM_GPU_MEMORY_UTILIZATION,
        )
    return args


def install_vllm_engine_options(module: Any = None, options: dict[str, Any] | None = None) -> bool:
    """Make TRL's colocated vLLM engine start with ``VLLM_ENGINE_OPTIONS`` (``options``), which TRL 1.16 does
    not expose: its ``LLM`` name in ``trl.generation.vllm_generation`` (``module``) becomes a factory that adds
    them to the keywords TRL passes. Returns False where vLLM is not installed (nothing to change); calling it
    twice changes nothing more. Options TRL itself passes are left as TRL sets them."""
    if module is None:
        import trl.generation.vllm_generation as module
    engine = getattr(module, "LLM", None)
    if engine is None:
        return False
    if getattr(engine, "anneal_engine_options", None) is not None:
        return True
    wanted = dict(VLLM_ENGINE_OPTIONS if options is None else options)

    def engine_with_options(*args: Any, **kwargs: Any) -> Any:
        for name, value in wanted.items():
            kwargs.setdefault(name, value)
        return engine(*args, **kwargs)

    engine_with_options.anneal_engine_options = wanted  # type: ignore[attr-defined]
    module.LLM = engine_with_options
    return True
