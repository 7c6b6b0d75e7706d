"""Guided tool calls on one warmed-up model: its held-out episodes with and without environment.guided_calls.

The held-out evaluation of bench/agent_learning.py's agent job (the same held-out tasks, environment and greedy
episodes, through AgentRollouts.evaluate in this process), played on a warm-up model a job left behind
(``<job output>/trainer/warmup-model``), once unguided and once guided, so the difference is the guide's alone.
Prints the held-out figures of each, the malformed calls by kind, and the wall time of each evaluation.

    .venv/bin/python bench/agent_guided_calls.py --warmup-model /tmp/anneal-agent-learning-*/data/runs/job-1/trainer/warmup-model \\
        --model smollm2 --train-tasks 12 --held-tasks 6 --held-mutants 4 --warmup-mutants 8
"""

from __future__ import annotations

import collections
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench import agent_learning  # noqa: E402


def malformed(sink) -> collections.Counter:
    """Error observations of the held-out episodes, by their first words."""
    kinds: collections.Counter = collections.Counter()
    for event in sink.of_kind("rollout"):
        for turn in event.get("turns", []):
            if turn.get("status") == "error":
                kinds[(turn.get("observation") or "").split("(")[0].split(";")[0][:60]] += 1
    return kinds


def all_passed(reason: str) -> bool:
    """Whether an episode's reason ("3/3 tests pass") says every test passed."""
    passed, _, total = reason.partition(" ")[0].partition("/")
    return passed.isdigit() and passed == total


def main() -> None:
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from gpu_jobs.agent.training import agent_rollouts
    from gpu_jobs.sink import ListSink

    parser = agent_learning.parser()
    parser.add_argument(
        "--warmup-model", type=Path, required=True, help="a job's trainer/warmup-model folder"
    )
    args = parser.parse_args()
    model = AutoModelForCausalLM.from_pretrained(args.warmup_model)
    tokenizer = AutoTokenizer.from_pretrained(args.warmup_model)
    store = Path(tempfile.mkdtemp(prefix="anneal-guided-"))
    for guided in (False, True):
        args.guided_calls = guided
        config = agent_learning.agent_config(
            args, args.seeds[0], store=store, output_dir=store / "job", overrides={}
        )
        sink = ListSink()
        agent = agent_rollouts(config, sink=sink, step_metrics={})
        started = time.monotonic()
        scores = agent.evaluate(config.eval_rows, model, tokenizer, step=0)
        wall = time.monotonic() - started
        print(
            f"\n{'guided' if guided else 'unguided'}: {len(config.eval_rows)} held-out tasks, {wall / 60:.1f} min"
        )
        for key, label in agent_learning.HABITS.items():
            print(f"  {label:<32} {scores[f'eval_agent/{key}']:.2f}")
        solved = [e["task"] for e in sink.of_kind("rollout") if all_passed(e.get("reason", ""))]
        print(f"  solved: {', '.join(solved) or 'none'}")
        for kind, count in malformed(sink).most_common():
            print(f"  {count:>3} x {kind}")


if __name__ == "__main__":
    main()
