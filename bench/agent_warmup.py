"""What the supervised warm-up on scripted traces does for the tiny model's agent episodes.

The tiny model (gpu_jobs/tiny_model.py) never writes a tool call, so an agent job's reward is flat. This
samples episodes on the first --tasks pack tasks (the job's rows) before and after the warm-up
(gpu_jobs.agent.warmup), which trains on the other pack tasks' scripted traces only, and prints: the share of
episodes with at least one well-formed tool call, the share of turns with one (format), the mean reward
(tests + 0.1 * format), the share of groups whose rewards differ (GRPO's signal), and the warm-up's time.

Run: .venv/bin/python bench/agent_warmup.py [--tasks 4] [--samples 8] [--steps 200] [--lr 2e-3] [--batch 4]
     [--temperature 0.7]

With --model smollm2 the same for SmolLM2-135M-Instruct (imported into $ANNEAL_MODEL_STORE or var/models on
first use) in its own chat turns, the tool instructions in the system message (its template drops the tools),
with the environment's default limits (6 turns of 96 tokens, 1024 tokens of context).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "platform")]

from gpu_jobs.agent.generation import TransformersTurns  # noqa: E402
from gpu_jobs.agent.spec import TINY_MODEL_ENVIRONMENT as ENVIRONMENT  # noqa: E402
from gpu_jobs.agent.taskpack import pack_rows  # noqa: E402
from gpu_jobs.agent.training import AgentRollouts  # noqa: E402
from gpu_jobs.config import GRPOJobConfig  # noqa: E402
from gpu_jobs.sink import ListSink  # noqa: E402
from gpu_jobs.smollm import SMOLLM2_NAME, ensure_smollm2  # noqa: E402
from gpu_jobs.tiny_model import ensure_tiny_model  # noqa: E402


def sample(model_dir: Path, config: GRPOJobConfig, samples: int, seed: int, temperature: float) -> dict:
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    torch.manual_seed(seed)
    model = AutoModelForCausalLM.from_pretrained(model_dir)
    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    agent = AgentRollouts(config=config, sink=ListSink())
    indices = [i for i in range(len(config.rows)) for _ in range(samples)]
    started = time.perf_counter()
    agent.run_episodes(
        indices, tokenizer, TransformersTurns(model, tokenizer, temperature=temperature), step=1
    )
    results = [agent.results[i] for i in sorted(agent.results)]
    groups = [[r.reward for r in results[k : k + samples]] for k in range(0, len(results), samples)]
    return {
        "called": sum(any(s.action for s in r.steps) for r in results) / len(results),
        "format": statistics.mean(r.parts["format"] for r in results),
        "reward": statistics.mean(r.reward for r in results),
        "varied_groups": sum(max(g) > min(g) for g in groups) / len(groups),
        "episodes": len(results),
        "seconds": time.perf_counter() - started,
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--tasks", type=int, default=4, help="the job's rows: the first N pack tasks")
    parser.add_argument("--samples", type=int, default=8, help="episodes per task (a GRPO group)")
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--lr", type=float, default=2e-3)
    parser.add_argument("--batch", type=int, default=4)
    parser.add_argument("--temperature", type=float, default=0.7)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--model", choices=("tiny", "smollm2"), default="tiny")
    args = parser.parse_args()
    if args.model == "smollm2":
        store = Path(os.environ.get("ANNEAL_MODEL_STORE", ROOT / "var" / "models"))
        model_dir, model, limits = ensure_smollm2(store), SMOLLM2_NAME, {}
    else:
        store = Path(tempfile.gettempdir()) / "anneal-test" / "models"
        model_dir, model, limits = ensure_tiny_model(store), "tiny", ENVIRONMENT
    rows = pack_rows(limit=args.tasks)
    with tempfile.TemporaryDirectory() as out:
        environment = {
            **limits,
            "warmup_sft_steps": args.steps,
            "warmup_sft_learning_rate": args.lr,
            "warmup_sft_batch_size": args.batch,
        }
        config = GRPOJobConfig(
            model=model, model_store=str(store), output_dir=out, rows=rows, verifiers=[],
            environment=environment, seed=args.seed, prompts_per_step=min(args.tasks, 8),
        )  # fmt: skip
        agent = AgentRollouts(config=config, sink=ListSink())
        before = sample(model_dir, config, args.samples, args.seed, args.temperature)
        started = time.perf_counter()
        warmed = agent.start_model(model_dir)
        seconds = time.perf_counter() - started
        after = sample(warmed, config, args.samples, args.seed, args.temperature)
    record = agent.warmup or {}
    print(
        f"{args.model}: warm-up {args.steps} steps, lr {args.lr:g}, on {len(record.get('tasks', []))} held-out pack tasks "
        f"(the job's {args.tasks} left out): {record.get('examples')} segments, loss {record.get('loss_first', 0):.3f}"
        f" -> {record.get('loss_last', 0):.3f}; {seconds:.1f} s (traces {record.get('trace_seconds')} s)"
    )
    for name, figures in (("before", before), ("after", after)):
        print(
            f"{name:6s}: episodes with a tool call {figures['called']:.0%}, well-formed turns "
            f"{figures['format']:.0%}, mean reward {figures['reward']:.3f}, groups with differing rewards "
            f"{figures['varied_groups']:.0%} ({figures['episodes']} episodes on the job's {args.tasks} tasks, "
            f"{figures['seconds']:.0f} s)"
        )


if __name__ == "__main__":
    main()
