"""`make gpu-smoke`: a short GRPO job on one CUDA GPU, printing step time, tokens per second and held-out accuracy.

By default the job is bench/learning_smollm.py's, unchanged: SmolLM2-135M-Instruct with LoRA on one
reasoning-gym domain (chain_sum), its own checker plus a one-word format check, the held-out prompts evaluated
before and after. ``--model tiny`` runs the demo job's spec instead (gpu_jobs.addition DEMO_*: two-digit
addition, exact match plus Python tests in sandboxes). ``--agent "ARGS"`` runs bench/agent_learning.py's agent job
instead, ARGS being that bench's own options (repo-fix training and held-out tasks, the supervised warm-up, the
held-out habits before and after per seed), its episodes' sandboxes on this host's bubblewrap. Either way with
``device="cuda"``: TRL trains in bf16 with
gradient checkpointing and generates rollouts with vLLM in colocate mode (gpu_jobs.device). On a host without a
CUDA device, or without vLLM when it is asked for, it says so and exits with status 2 instead of failing
half-way.

    .venv/bin/python scripts/gpu_smoke.py                       # SmolLM2 on chain_sum, 20 steps
    .venv/bin/python scripts/gpu_smoke.py --domain basic_arithmetic --steps 40
    .venv/bin/python scripts/gpu_smoke.py --model tiny --no-vllm
    .venv/bin/python scripts/gpu_smoke.py --agent "--model smollm2 --steps 16 --warmup-steps 24 --seeds 0,1"
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

from gpu_jobs.device import GENERATE_AHEAD  # noqa: E402
from gpu_jobs.overlap import REWARD_TIME, REWARD_WAIT  # noqa: E402
from gpu_jobs.sink import ListSink  # noqa: E402

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
    parser.add_argument(
        "--generate-ahead",
        choices=GENERATE_AHEAD,
        default="auto",
        help="the job's generate_ahead (auto, the default, is on on a GPU when a verifier is slow, as the demo's "
        "Python tests are): run with off and with on to compare the step time and the reward time waited for",
    )
    parser.add_argument("--store", default=str(ROOT / "var" / "models"), help="model store")
    parser.add_argument(
        "--agent",
        metavar="ARGS",
        help="run bench/agent_learning.py's agent job with these options of that bench (quoted: \"--model "
        'smollm2 --seeds 0,1") instead of --model/--domain',
    )
    args = parser.parse_args()
    agent = agent_options(args.agent, store=Path(args.store)) if args.agent is not None else None
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
    if agent is not None:
        return run_agent(agent, store=Path(args.store), on_gpu={"device": "cuda", "use_vllm": use_vllm})
    on_gpu = {
        "max_steps": args.steps,
        "device": "cuda",
        "use_vllm": use_vllm,
        "generate_ahead": args.generate_ahead,
    }
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
    timed = [m for m in steady if REWARD_TIME in m and REWARD_WAIT in m]
    if timed:
        reward = statistics.median(m[REWARD_TIME] for m in timed)
        waited = statistics.median(m[REWARD_WAIT] for m in timed)
        print(
            f"gpu-smoke: generate_ahead {args.generate_ahead}: median reward time {reward * 1000:.0f} ms, "
            f"waited for {waited * 1000:.0f} ms, {1 - waited / reward if reward else 0:.0%} hidden"
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


class ProgressSink(ListSink):
    """A ListSink that also prints each step's agent figures, each held-out evaluation and each alarm as they
    come, so that a run stopped at its host's time limit still shows how far it got."""

    def __init__(self, label: str) -> None:
        super().__init__()
        self.label = label

    def emit(self, kind: str, payload: dict) -> None:
        super().emit(kind, payload)
        line = ""
        if kind == "metric" and "eval_agent/solved" in payload:
            shown = ("solved", "edited_then_tested", "tested_before_finish", "valid_calls", "turns")
            line = "held-out " + " ".join(
                f"{key} {payload.get(f'eval_agent/{key}', float('nan')):.2f}" for key in shown
            )
        elif kind == "metric" and "episode/format" in payload:
            shown = ("reward", "episode/tests", "episode/edited_then_tested", "episode/format", "step_time")
            line = "train " + " ".join(f"{key} {payload.get(key, float('nan')):.2f}" for key in shown)
        elif kind == "alarm":
            line = f"alarm {payload.get('name')}: {str(payload.get('message', ''))[:240]}"
        if line:
            print(f"gpu-smoke: {self.label} step {payload.get('step')}: {line}", flush=True)


def agent_options(options: str, *, store: Path) -> argparse.Namespace:
    """bench/agent_learning.py's options as given to --agent, checked on any host before anything runs: a wrong
    option, seed list (the bench's parser checks it) or setting exits 2 with argparse's message naming it."""
    import shlex

    from bench import agent_learning

    parser = agent_learning.parser()
    parser.prog = "gpu_smoke.py --agent"
    args = parser.parse_args(shlex.split(options))
    try:
        agent_learning.agent_config(
            args, args.seeds[0], store=store, output_dir=store / "check", overrides={}
        )
    except ValueError as exc:
        parser.error(str(exc))
    return args


def run_agent(args: argparse.Namespace, *, store: Path, on_gpu: dict) -> int:
    """bench/agent_learning.py's job for each of its seeds, in this process; its report per seed and over seeds."""
    from bench import agent_learning
    from gpu_jobs.grpo import main as run_job
    from gpu_jobs.sink import FolderCheckpointStore
    from gpu_jobs.smollm import ensure_smollm2

    seeds = args.seeds
    if args.model == "smollm2":
        ensure_smollm2(store)
    runs = []
    for seed in seeds:
        with tempfile.TemporaryDirectory(prefix="anneal-gpu-agent-") as tmp:
            config = agent_learning.agent_config(
                args, seed, store=store, output_dir=Path(tmp) / "job", overrides=on_gpu
            )
            sink = ProgressSink(f"seed {seed}")
            started = time.perf_counter()
            run_job(config, sink=sink, checkpoints=FolderCheckpointStore(Path(tmp) / "kept"))
            wall = time.perf_counter() - started
        events = [{"kind": kind, "payload": payload} for kind, payload in sink.events]
        step_times = [m["step_time"] for m in sink.of_kind("metric") if "step_time" in m]
        median = f", median step {statistics.median(step_times):.1f} s" if step_times else ""
        runs.append(agent_learning.report_seed(seed, f"model {config.model}{median}", wall, events))
        if args.held_out_episodes is not None:
            path = agent_learning.write_held_out_episodes(args.held_out_episodes, seed, events)
            print(f"gpu-smoke: seed {seed} held-out episodes: {path}", flush=True)
    agent_learning.report_seeds(args, seeds, runs)
    return 0


if __name__ == "__main__":
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    sys.exit(main())
