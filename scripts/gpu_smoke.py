"""`make gpu-smoke`: a short GRPO job on one CUDA GPU, printing step time, tokens per second and held-out accuracy.

By default the job is bench/learning_smollm.py's, unchanged: SmolLM2-135M-Instruct with LoRA on one
reasoning-gym domain (chain_sum), its own checker plus a one-word format check, the held-out prompts evaluated
before and after. ``--model tiny`` runs the demo job's spec instead (gpu_jobs.addition DEMO_*: two-digit
addition, exact match plus Python tests in sandboxes). Either way with ``device="cuda"``: TRL trains in bf16 with
gradient checkpointing and generates rollouts with vLLM in colocate mode (gpu_jobs.device). On a host without a
CUDA device, or without vLLM when it is asked for, it says so and exits with status 2 instead of failing
half-way.

    .venv/bin/python scripts/gpu_smoke.py                       # SmolLM2 on chain_sum, 20 steps
    .venv/bin/python scripts/gpu_smoke.py --domain basic_arithmetic --steps 40
    .venv/bin/python scripts/gpu_smoke.py --model tiny --no-vllm
    accelerate launch --num_processes 4 scripts/gpu_smoke.py    # more GPUs (TRL shards the batch)

Needs the GPU host's set (requirements/gpu.txt: vLLM and the torch it wants).
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import statistics
import sys
import tempfile
import time
from importlib.util import find_spec
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "platform")]

NOT_READY = 2


def host_problem(*, use_vllm: bool) -> str:
    """Why this host cannot run the smoke job, or "" when it can."""
    try:
        import torch
    except ImportError:
        return "torch is not installed: run `make venv`, or install requirements/gpu.txt on a GPU host"
    if not torch.cuda.is_available():
        return (
            "no CUDA device on this host (torch.cuda.is_available() is False): the GPU smoke job needs an "
            "NVIDIA GPU with its driver and a CUDA build of torch (requirements/gpu.txt). Nothing was run."
        )
    if use_vllm and find_spec("vllm") is None:
        return (
            "vLLM is not installed: pip install -r requirements/gpu.txt on this GPU host, or pass --no-vllm "
            "to generate with transformers instead. Nothing was run."
        )
    return ""


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--model",
        default="smollm2-135m-instruct",
        help='smollm2-135m-instruct (imported on first use) with --domain, or "tiny" (the demo spec)',
    )
    parser.add_argument("--domain", default="chain_sum", help="the reasoning-gym task SmolLM2 trains on")
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--no-vllm", action="store_true", help="generate with transformers, not vLLM")
    parser.add_argument("--store", default=str(ROOT / "var" / "models"), help="model store")
    args = parser.parse_args()
    use_vllm = not args.no_vllm
    problem = host_problem(use_vllm=use_vllm)
    if problem:
        print(f"gpu-smoke: {problem}", file=sys.stderr)
        return NOT_READY

    import torch

    from bench.learning import demo_config
    from bench.learning_smollm import domain_config
    from gpu_jobs.grpo import main as run_job
    from gpu_jobs.sink import FolderCheckpointStore, ListSink
    from gpu_jobs.smollm import SMOLLM2_NAME, ensure_smollm2

    device = torch.cuda.get_device_name(0)
    print(f"gpu-smoke: {torch.cuda.device_count()} CUDA device(s), running on {device}", flush=True)
    on_gpu = {"max_steps": args.steps, "device": "cuda", "use_vllm": use_vllm}
    with tempfile.TemporaryDirectory(prefix="anneal-gpu-smoke-") as tmp:
        if args.model == SMOLLM2_NAME:
            ensure_smollm2(Path(args.store))
            config = domain_config(
                task=args.domain, store=Path(args.store), output_dir=Path(tmp) / "job", overrides=on_gpu
            )
        else:
            config = dataclasses.replace(
                demo_config(
                    store=Path(args.store),
                    output_dir=Path(tmp) / "job",
                    overrides={**on_gpu, "eval_steps": 0},
                ),
                model=args.model,
            )
        sink = ListSink()
        started = time.perf_counter()
        summary = run_job(config, sink=sink, checkpoints=FolderCheckpointStore(Path(tmp) / "kept"))
        wall = time.perf_counter() - started

    steps = [m for m in sink.of_kind("metric") if "loss" in m]
    # The first steps include vLLM's start-up and CUDA graph capture: leave them out of the medians.
    steady = steps[2:] or steps
    step_times = [m["step_time"] for m in steady if "step_time" in m]
    completions = config.prompts_per_step * config.num_generations
    lengths = [m["completion_length"] for m in steady if "completion_length" in m]
    print(f"gpu-smoke: {summary['steps']} steps in {wall:.1f} s (model {args.model}, vLLM {use_vllm})")
    if step_times:
        step = statistics.median(step_times)
        tokens = completions * statistics.median(lengths) if lengths else float("nan")
        print(f"gpu-smoke: median step {step * 1000:.0f} ms, {tokens / step:,.0f} completion tokens/s")
    else:
        per_step = wall / max(1, summary["steps"])
        tokens = completions * (statistics.median(lengths) if lengths else float("nan"))
        print(
            f"gpu-smoke: {per_step * 1000:.0f} ms per step (wall / steps), {tokens / per_step:,.0f} tokens/s"
        )
    held_out = [m for m in sink.of_kind("metric") if "eval/mean" in m]
    if len(held_out) >= 2:
        first, last = held_out[0], held_out[-1]
        keys = sorted(key for key in last if key.startswith("eval_verifier/") and not key.endswith("/mean"))
        for key in keys:
            print(
                f"gpu-smoke: held-out {key.removeprefix('eval_verifier/')}: {first.get(key, float('nan')):.1%} "
                f"-> {last[key]:.1%}"
            )
    print(f"gpu-smoke: final reward {summary['reward']}, checkpoint kept in a temporary folder (removed)")
    return 0


if __name__ == "__main__":
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    sys.exit(main())
