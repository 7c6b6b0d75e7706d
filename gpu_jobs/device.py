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
# vLLM reserves this share of GPU memory for its KV cache in colocate mode; the rest stays for training.
VLLM_GPU_MEMORY_UTILIZATION = 0.3


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


def device_args(*, device: str, use_vllm: bool, host: HostInfo) -> dict[str, Any]:
    """Keyword arguments for ``trl.GRPOConfig`` that depend on where the job runs.

    ``use_vllm`` applies on CUDA only (vLLM has no CPU path here); asking for it on a CUDA host without
    vLLM installed raises DeviceError rather than silently generating ten times slower.
    """
    if resolve_device(device, host) == "cpu":
        return {
            "use_cpu": True,
            "bf16": False,
            # TRL turns it on by default; on a small model on the CPU it only costs time.
            "activation_checkpointing": False,
            "use_vllm": False,
        }
    args: dict[str, Any] = {
        "use_cpu": False,
        "bf16": host.bf16,
        "fp16": not host.bf16,
        # Recomputes activations in the backward pass: less memory for longer completions and bigger groups.
        "activation_checkpointing": True,
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
