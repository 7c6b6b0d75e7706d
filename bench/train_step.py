"""Where a training step's time goes: generation, reward (verification) and update, per reward mode.

    .venv/bin/python bench/train_step.py            # the demo job's spec, 12 steps per mode
    .venv/bin/python bench/train_step.py --steps 20

Runs the demo job's spec (gpu_jobs.addition DEMO_*: exact match plus Python tests in bubblewrap sandboxes)
three times in one process, each time from the same tiny model with the same seed:

- ``sequential, every sample``: TRL calls the verifiers one after another, each scores every completion
  (how jobs ran before);
- ``sequential, distinct``: one after another, each distinct (row, completion) pair scored once;
- ``concurrent, distinct``: the job's default: async reward functions, all verifiers of a step in flight
  at once (TRL gathers them), distinct pairs only.

Generation and reward are timed by wrapping the trainer's ``_generate`` and ``_calculate_rewards``; a
step is the time between two metric events; update is the rest (log-probabilities, loss, backward,
optimiser). The first two steps of each mode are left out (warm-up of the sandbox pool and the allocator).
Medians per step, in milliseconds; the machine's load is printed, as other jobs may share the cores.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from functools import partial
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "platform")]

from bench.learning import demo_config  # noqa: E402
from gpu_jobs import grpo  # noqa: E402
from gpu_jobs.sink import FolderCheckpointStore, ListSink  # noqa: E402
from gpu_jobs.tiny_model import ensure_tiny_model  # noqa: E402

MODES = {
    "sequential, every sample": {"concurrent": False, "distinct": False},
    "sequential, distinct": {"concurrent": False, "distinct": True},
    "concurrent, distinct": {"concurrent": True, "distinct": True},
}
SKIP = 2


class TimedSink(ListSink):
    """Records when each metric event arrives: one per step, sent as the step ends."""

    def __init__(self) -> None:
        super().__init__()
        self.step_ends: list[float] = []

    def emit(self, kind: str, payload: dict) -> None:
        if kind == "metric" and "loss" in payload:
            self.step_ends.append(time.perf_counter())
        super().emit(kind, payload)


def timed(cls: type, name: str, log: list[float]) -> None:
    original = getattr(cls, name)

    def wrapper(self, *args, **kwargs):
        started = time.perf_counter()
        try:
            return original(self, *args, **kwargs)
        finally:
            log.append(time.perf_counter() - started)

    wrapper.__wrapped__ = original
    setattr(cls, name, wrapper)


def run_mode(*, store: Path, steps: int, mode: dict) -> dict[str, float]:
    from trl import GRPOTrainer

    generation: list[float] = []
    rewards: list[float] = []
    originals = {name: getattr(GRPOTrainer, name) for name in ("_generate", "_calculate_rewards")}
    timed(GRPOTrainer, "_generate", generation)
    timed(GRPOTrainer, "_calculate_rewards", rewards)
    recorder_class = grpo.RolloutRecorder
    grpo.RolloutRecorder = partial(recorder_class, **mode)
    sink = TimedSink()
    try:
        with tempfile.TemporaryDirectory(prefix="anneal-step-") as tmp:
            config = demo_config(
                store=store, output_dir=Path(tmp) / "job", overrides={"max_steps": steps, "eval_steps": 0}
            )
            config.eval_rows = []
            grpo.main(config, sink=sink, checkpoints=FolderCheckpointStore(Path(tmp) / "kept"))
    finally:
        grpo.RolloutRecorder = recorder_class
        for name, original in originals.items():
            setattr(GRPOTrainer, name, original)
    step_times = [b - a for a, b in zip(sink.step_ends, sink.step_ends[1:], strict=False)][SKIP - 1 :]
    generation, rewards = generation[SKIP:], rewards[SKIP:]
    distinct = [
        m[key] for m in sink.of_kind("metric")[SKIP:] for key in m if key.startswith("verify_distinct/python")
    ]
    step = statistics.median(step_times)
    gen, rew = statistics.median(generation), statistics.median(rewards)
    return {
        "step": step,
        "generation": gen,
        "reward": rew,
        "update": step - gen - rew,
        "sandbox runs": statistics.median(distinct) if distinct else float("nan"),
    }


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--store", default=os.environ.get("ANNEAL_TEST_MODEL_STORE", "/tmp/anneal-test-models")
    )
    parser.add_argument("--steps", type=int, default=12)
    args = parser.parse_args()
    store = Path(args.store)
    ensure_tiny_model(store)
    results = {}
    for name, mode in MODES.items():
        results[name] = run_mode(store=store, steps=args.steps, mode=mode)
        print(f"{name}: done (load average {os.getloadavg()[0]:.1f})", flush=True)
    baseline = results["sequential, every sample"]
    print(f"\nmedian per step over steps {SKIP + 1}-{args.steps}, ms ({os.cpu_count()} cores)")
    print(
        f"{'mode':<26} {'step':>7} {'generation':>11} {'reward':>8} {'update':>8} {'sandbox runs':>13}  vs first"
    )
    for name, r in results.items():
        print(
            f"{name:<26} {r['step'] * 1000:7.0f} {r['generation'] * 1000:11.0f} {r['reward'] * 1000:8.0f} "
            f"{r['update'] * 1000:8.0f} {r['sandbox runs']:13.0f}  {baseline['step'] / r['step']:.2f}x"
        )


if __name__ == "__main__":
    main()
