"""Where a training step's time goes: generation, reward (verification) and update, per reward mode, with
and without rewards overlapped with the rest of the step.

    .venv/bin/python bench/train_step.py            # the demo job's spec, 12 steps per mode
    .venv/bin/python bench/train_step.py --steps 20
    .venv/bin/python bench/train_step.py --overlap-only   # only the last three modes and the alternating run

Runs the demo job's spec (gpu_jobs.addition DEMO_*: exact match plus Python tests in bubblewrap sandboxes)
six times in one process, each time from the same tiny model with the same seed:

- ``sequential, every sample``: TRL calls the verifiers one after another, each scores every completion
  (how jobs ran before);
- ``sequential, distinct``: one after another, each distinct (row, completion) pair scored once;
- ``concurrent, distinct``: async reward functions, all verifiers of a step in flight at once (TRL gathers
  them), distinct pairs only; the step waits for them;
- ``concurrent, distinct, overlapped``: the job's default where the model trains on the CPU: the same, scored
  on a worker thread while the step's forward passes run (gpu_jobs.overlap), then waited for; the completions
  that end early in generation are scored while the rest are generated (gpu_jobs.early_ends). The run is the
  same one (same rewards, same weights), only the timing differs;
- ``generate ahead``: the job's default where the model trains on a GPU (generate_ahead auto): each batch's
  rewards scored while the next step generates and updates (gpu_jobs.ahead), one step off-policy;
- ``alternating``: one more run of the last mode with every other step overlapped, printed as two rows
  (its plain steps, its overlapped steps): a paired comparison, both kinds of step seeing the same load,
  where the two separate runs above may have met different loads on a shared machine.

Generation and reward are timed by wrapping the trainer's ``_generate`` and ``_calculate_rewards``; overlapped
(or generated ahead), the reward time is the trainer's own ``overlap/reward_time``: from the first verifier
started to the last one done; "reward wait" is how long the step stood waiting for the rewards (all of the
reward time unless overlapped; the trainer's ``overlap/reward_wait`` metric when overlapped). A step is the
time between two metric events; update is the rest of it (step - generation - reward wait: log-probabilities,
loss, backward, optimiser). The first two steps of each mode are left out (warm-up of the sandbox pool and the
allocator). Medians per step, in milliseconds; the machine's load is printed, as other jobs may share the
cores, and with only two of them the sandboxes and the forward pass also compete for the same CPU. "cores
busy" is the share of all cores' time in use during a step (every process on the machine, the sandboxes'
included; /proc/stat): near 100%, no core is left idle for the rewards to hide behind, and hiding more of them
only moves CPU time around.
"""

from __future__ import annotations

import argparse
import dataclasses
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
from gpu_jobs.device import HostInfo, resolve_device  # noqa: E402
from gpu_jobs.sink import FolderCheckpointStore, ListSink  # noqa: E402
from gpu_jobs.tiny_model import ensure_tiny_model  # noqa: E402

MODES = {
    "sequential, every sample": {"concurrent": False, "distinct": False, "overlap": False},
    "sequential, distinct": {"concurrent": False, "distinct": True, "overlap": False},
    "concurrent, distinct": {"concurrent": True, "distinct": True, "overlap": False},
    "concurrent, distinct, overlapped": {"concurrent": True, "distinct": True, "overlap": True},
    # The generate_ahead setting: each batch's rewards scored while the next batch is generated and the step
    # updates on the batch before (gpu_jobs.ahead): one step off-policy, so its rewards differ from the rest.
    "generate ahead": {"concurrent": True, "distinct": True, "overlap": True, "ahead": True},
}
# One job whose odd steps are overlapped and even ones not: a paired comparison under the same load.
ALTERNATING = {"concurrent": True, "distinct": True, "overlap": "alternate"}
SKIP = 2


class TimedSink(ListSink):
    """Records when each metric event arrives (one per step, sent as the step ends) and the machine's CPU time
    used so far."""

    def __init__(self) -> None:
        super().__init__()
        self.step_ends: list[float] = []
        self.cpu_at_ends: list[tuple[int, int]] = []

    def emit(self, kind: str, payload: dict) -> None:
        if kind == "metric" and "loss" in payload:
            self.step_ends.append(time.perf_counter())
            self.cpu_at_ends.append(cpu_ticks())
        super().emit(kind, payload)


def cpu_ticks() -> tuple[int, int]:
    """(busy, all) clock ticks of every core since boot, from /proc/stat: every process counts, the
    sandboxes' included."""
    user, nice, system, idle, iowait, irq, softirq, steal = (
        int(value) for value in Path("/proc/stat").read_text().split(maxsplit=9)[1:9]
    )
    busy = user + nice + system + irq + softirq + steal
    return busy, busy + idle + iowait


def busy_share(before: tuple[int, int], after: tuple[int, int]) -> float:
    return (after[0] - before[0]) / max(1, after[1] - before[1])


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


def run_mode(*, store: Path, steps: int, mode: dict) -> list[dict]:
    """One job of the demo spec in ``mode``; per step (warm-up steps left out): its time, generation,
    reward, reward wait, sandbox checks, reward and whether its rewards were overlapped."""
    from trl import GRPOTrainer

    from gpu_jobs.overlap import overlapped

    generation: list[float] = []
    rewards: list[float] = []
    originals = {name: getattr(GRPOTrainer, name) for name in ("_generate", "_calculate_rewards")}
    timed(GRPOTrainer, "_generate", generation)
    timed(GRPOTrainer, "_calculate_rewards", rewards)
    recorder_class = grpo.RolloutRecorder
    grpo.RolloutRecorder = partial(recorder_class, concurrent=mode["concurrent"], distinct=mode["distinct"])
    trainer_class = overlapped(GRPOTrainer)
    if mode["overlap"] == "alternate":
        # Every other step overlapped, in one run: both kinds of step see the same load on the machine. The
        # run is the same whichever steps are overlapped, so this changes nothing else.
        can_overlap = trainer_class._can_overlap
        trainer_class._can_overlap = lambda self: can_overlap(self) and self.state.global_step % 2 == 1
    sink = TimedSink()
    try:
        with tempfile.TemporaryDirectory(prefix="anneal-step-") as tmp:
            config = dataclasses.replace(
                demo_config(
                    store=store,
                    output_dir=Path(tmp) / "job",
                    overrides={
                        "max_steps": steps,
                        "eval_steps": 0,
                        # Explicit: the default (auto) turns it on where the model trains on a GPU.
                        "generate_ahead": "on" if mode.get("ahead") else "off",
                    },
                ),
                eval_rows=[],  # the config is frozen
            )
            grpo.main(
                config,
                sink=sink,
                checkpoints=FolderCheckpointStore(Path(tmp) / "kept"),
                overlap_rewards=bool(mode["overlap"]),
            )
    finally:
        grpo.RolloutRecorder = recorder_class
        for name, original in originals.items():
            setattr(GRPOTrainer, name, original)
        if "_can_overlap" in trainer_class.__dict__:
            del trainer_class._can_overlap
    metrics = [m for m in sink.of_kind("metric") if "loss" in m]
    records = []
    for index, metric in enumerate(metrics):
        if index < SKIP:
            continue
        distinct = [value for key, value in metric.items() if key.startswith("verify_distinct/python")]
        overlapped_step = "overlap/reward_wait" in metric
        records.append(
            {
                "step": sink.step_ends[index] - sink.step_ends[index - 1],
                "cores busy": busy_share(sink.cpu_at_ends[index - 1], sink.cpu_at_ends[index]),
                "generation": generation[index],
                # Overlapped (or generated ahead), the trainer times the step's rewards: from the first verifier
                # started (on the completions that ended early, while the rest were generated) to the last done.
                "reward": metric.get("overlap/reward_time", rewards[index]),
                # Overlapped: the trainer times its wait for the rewards; else the step waits for them all.
                "reward wait": metric["overlap/reward_wait"] if overlapped_step else rewards[index],
                "sandbox checks": distinct[0] if distinct else float("nan"),
                "overlapped": overlapped_step,
                "reward value": metric["reward"],
            }
        )
    return records


def summary(records: list[dict]) -> dict[str, float]:
    """Medians per step; update is the rest of the step: step - generation - reward wait."""
    medians = {
        key: statistics.median(r[key] for r in records)
        for key in ("step", "generation", "reward", "reward wait", "sandbox checks", "cores busy")
    }
    medians["update"] = statistics.median(r["step"] - r["generation"] - r["reward wait"] for r in records)
    return medians


def hidden_share(row: dict[str, float]) -> float:
    """The share of a step's reward time during which the step did not wait (1 - reward wait / reward)."""
    return 1 - row["reward wait"] / row["reward"] if row["reward"] else 0.0


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--store", default=os.environ.get("ANNEAL_TEST_MODEL_STORE", "/tmp/anneal-test-models")
    )
    parser.add_argument("--steps", type=int, default=12)
    parser.add_argument(
        "--overlap-only",
        action="store_true",
        help="only the last three modes (concurrent, distinct; the same overlapped; generate ahead) and the "
        "alternating run",
    )
    args = parser.parse_args()
    store = Path(args.store)
    ensure_tiny_model(store)
    modes = dict(list(MODES.items())[-3:]) if args.overlap_only else MODES
    records = {}
    for name, mode in {**modes, "alternating": ALTERNATING}.items():
        records[name] = run_mode(store=store, steps=args.steps, mode=mode)
        print(f"{name}: done (load average {os.getloadavg()[0]:.1f})", flush=True)
    alternating = records.pop("alternating")
    results = {name: summary(steps) for name, steps in records.items()}
    for overlapped_step, name in (
        (False, "alternating: plain steps"),
        (True, "alternating: overlapped steps"),
    ):
        results[name] = summary([r for r in alternating if r["overlapped"] == overlapped_step])
    baseline = next(iter(results.values()))
    print(f"\nmedian per step over steps {SKIP + 1}-{args.steps}, ms ({os.cpu_count()} cores)")
    print(
        f"{'mode':<34} {'step':>6} {'generation':>11} {'reward':>7} {'reward wait':>12} {'update':>7} "
        f"{'sandbox checks':>15} {'cores busy':>11}  vs first"
    )
    for name, r in results.items():
        print(
            f"{name:<34} {r['step'] * 1000:6.0f} {r['generation'] * 1000:11.0f} {r['reward'] * 1000:7.0f} "
            f"{r['reward wait'] * 1000:12.0f} {r['update'] * 1000:7.0f} {r['sandbox checks']:15.0f} "
            f"{r['cores busy']:11.0%}  "
            f"{baseline['step'] / r['step']:.2f}x"
        )
    for plain_name, overlapped_name in (
        ("concurrent, distinct", "concurrent, distinct, overlapped"),
        ("alternating: plain steps", "alternating: overlapped steps"),
        ("concurrent, distinct", "generate ahead"),
    ):
        plain, overlapped = results[plain_name], results[overlapped_name]
        print(
            f"\n{overlapped_name} vs {plain_name}: step {plain['step'] * 1000:.0f} -> "
            f"{overlapped['step'] * 1000:.0f} ms ({plain['step'] / overlapped['step']:.2f}x); waiting for "
            f"rewards {plain['reward wait'] * 1000:.0f} -> {overlapped['reward wait'] * 1000:.0f} ms; "
            f"reward time hidden behind the step's other work: {hidden_share(overlapped):.0%} (goal >= 80%)"
        )
    # generate_ahead's default (auto) is on where the model trains on a GPU, off on the CPU.
    device = resolve_device("auto", HostInfo.detect())
    default = "generate ahead" if device == "cuda" else "concurrent, distinct, overlapped"
    print(
        f"\nthe default settings on this host (the model on {device}: {default}): "
        f"{results[default]['step'] * 1000:.0f} ms a step, reward time hidden {hidden_share(results[default]):.0%}"
    )
    same = (
        [r["reward value"] for r in records["concurrent, distinct"]]
        == [r["reward value"] for r in records["concurrent, distinct, overlapped"]]
        == [r["reward value"] for r in alternating]
    )
    print(f"same reward every step, with and without overlap: {same}")


if __name__ == "__main__":
    main()
