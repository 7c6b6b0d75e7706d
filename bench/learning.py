"""Does the demo job teach the tiny model? Runs the demo job's spec in-process and prints the tiny model's
greedy accuracy on the held-out split before and after, the gain in points and the time it took.

    .venv/bin/python bench/learning.py                       # the demo job as `make demo` seeds it
    .venv/bin/python bench/learning.py --steps 100 --lr 1e-4  # try other settings (see --help)

The spec is the one in gpu_jobs.addition (DEMO_*), which the demo's seed command launches too: the same
train rows, the same two verifiers (exact match, and Python tests run in bubblewrap sandboxes on this
machine), the same held-out rows, the same hyper-parameters. Accuracy is measured here, apart from the
job's own evaluation: greedy completions, stripped, equal to the answer exactly; the held-out sums are
never among the training prompts (gpu_jobs.addition splits the 10,000 sums once).

Times: wall, and CPU (this process plus its children, i.e. the sandboxes); on a machine other jobs share,
CPU time is the comparable figure. The tiny model's build (once per store) is timed apart.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "platform")]

from gpu_jobs.addition import (  # noqa: E402
    DEMO_EVAL_ROWS,
    DEMO_PARAMS,
    DEMO_TRAIN_ROWS,
    DEMO_VERIFIERS,
    addition_rows,
    greedy_accuracy,
)
from gpu_jobs.config import GRPOJobConfig  # noqa: E402
from gpu_jobs.device import GENERATE_AHEAD  # noqa: E402
from gpu_jobs.grpo import main  # noqa: E402
from gpu_jobs.sink import FolderCheckpointStore, ListSink  # noqa: E402
from gpu_jobs.tiny_model import ensure_tiny_model  # noqa: E402


class ProgressSink(ListSink):
    """Keeps every event and prints each held-out evaluation as it comes."""

    def __init__(self) -> None:
        super().__init__()
        self.started = time.perf_counter()

    def emit(self, kind: str, payload: dict) -> None:
        if kind == "metric" and "eval/mean" in payload:
            elapsed = time.perf_counter() - self.started
            print(
                f"  step {payload['step']}: held-out eval {payload['eval/mean']:.3f} ({elapsed:.0f} s)",
                flush=True,
            )
        super().emit(kind, payload)


def cpu_seconds() -> float:
    own = resource.getrusage(resource.RUSAGE_SELF)
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def demo_config(*, store: Path, output_dir: Path, overrides: dict) -> GRPOJobConfig:
    return GRPOJobConfig(
        model="tiny",
        model_store=str(store),
        output_dir=str(output_dir),
        rows=addition_rows(**DEMO_TRAIN_ROWS),
        eval_rows=addition_rows(**DEMO_EVAL_ROWS),
        verifiers=[
            {"name": name, "spec": spec, "weight": weight} for name, (spec, weight) in DEMO_VERIFIERS.items()
        ],
        rollouts_per_step=0,
        **{**DEMO_PARAMS, **overrides},
    )


def main_cli() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--store",
        default=os.environ.get("ANNEAL_TEST_MODEL_STORE", "/tmp/anneal-test-models"),
        help="model store (the tiny model is built there once)",
    )
    parser.add_argument("--steps", type=int, help="override max_steps")
    parser.add_argument("--lr", type=float, help="override learning_rate")
    parser.add_argument("--prompts", type=int, help="override prompts_per_step")
    parser.add_argument("--generations", type=int, help="override num_generations")
    parser.add_argument("--temperature", type=float, help="override temperature")
    parser.add_argument("--seed", type=int, help="override seed")
    parser.add_argument(
        "--generate-ahead",
        choices=GENERATE_AHEAD,
        help="override generate_ahead (on: each batch's rewards scored while the next step generates; one "
        "step off-policy)",
    )
    args = parser.parse_args()
    overrides = {
        key: value
        for key, value in {
            "max_steps": args.steps,
            "learning_rate": args.lr,
            "prompts_per_step": args.prompts,
            "num_generations": args.generations,
            "temperature": args.temperature,
            "seed": args.seed,
            "generate_ahead": args.generate_ahead,
        }.items()
        if value is not None
    }
    store = Path(args.store)
    started = time.perf_counter()
    model_dir = ensure_tiny_model(store)
    print(f"tiny model: {model_dir} ({time.perf_counter() - started:.1f} s to build or find)", flush=True)

    eval_rows = addition_rows(**DEMO_EVAL_ROWS)
    train_prompts = {row["prompt"] for row in addition_rows(**DEMO_TRAIN_ROWS)}
    assert not train_prompts & {row["prompt"] for row in eval_rows}, "held-out rows overlap training rows"
    base = greedy_accuracy(model_dir, eval_rows)

    with tempfile.TemporaryDirectory(prefix="anneal-learning-") as tmp:
        config = demo_config(store=store, output_dir=Path(tmp) / "job", overrides=overrides)
        shown = {k: getattr(config, k) for k in ("max_steps", "prompts_per_step", "num_generations")}
        shown |= {k: getattr(config, k) for k in ("learning_rate", "temperature", "max_completion_length")}
        print("spec:", json.dumps(shown), "verifiers:", ", ".join(DEMO_VERIFIERS), flush=True)
        sink = ProgressSink()
        wall, cpu = time.perf_counter(), cpu_seconds()
        summary = main(config, sink=sink, checkpoints=FolderCheckpointStore(Path(tmp) / "kept"))
        wall, cpu = time.perf_counter() - wall, cpu_seconds() - cpu
        final = greedy_accuracy(summary["checkpoint"], eval_rows)

    metrics = sink.of_kind("metric")
    curve = [f"{m['step']}:{m['eval/mean']:.3f}" for m in metrics if "eval/mean" in m]
    rewards = [m["reward"] for m in metrics if "reward" in m]
    print(f"job's own held-out eval (weighted verifier score) by step: {' '.join(curve)}")
    if rewards:
        tenth = max(1, len(rewards) // 10)
        print(
            f"sampled reward: first {tenth} steps {sum(rewards[:tenth]) / tenth:.3f}, "
            f"last {tenth} steps {sum(rewards[-tenth:]) / tenth:.3f}"
        )
    print(
        f"held-out greedy accuracy ({len(eval_rows)} sums): base {base:.1%} -> final {final:.1%}, "
        f"{(final - base) * 100:+.1f} points"
    )
    print(
        f"{summary['steps']} steps: wall {wall:.0f} s, CPU {cpu:.0f} s (this process and its sandboxes); "
        f"load average now {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores"
    )


if __name__ == "__main__":
    main_cli()
