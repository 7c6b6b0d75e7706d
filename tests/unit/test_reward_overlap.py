"""Rewards overlapped with the rest of the step (gpu_jobs.overlap): the same run as without it, bit for
bit, with the verifiers (sandboxed Python tests included) really running while the forward passes do."""

import os
import time
from pathlib import Path

import pytest

from gpu_jobs.addition import DEMO_VERIFIERS, addition_rows
from gpu_jobs.config import GRPOJobConfig
from gpu_jobs.grpo import main
from gpu_jobs.overlap import EARLY_FORWARD, EARLY_SCORED, REWARD_TIME, REWARD_WAIT, overlapped
from gpu_jobs.sink import FolderCheckpointStore, ListSink

MODEL_STORE = Path(os.environ.get("ANNEAL_TEST_MODEL_STORE", "/tmp/anneal-test-models"))
ROWS = addition_rows(n=64, seed=11)
# The demo's verifiers: exact match in process, Python tests in bubblewrap sandboxes.
VERIFIERS = [
    {"name": name, "spec": spec, "weight": weight} for name, (spec, weight) in DEMO_VERIFIERS.items()
]
# Wall-clock figures differ from run to run; everything else a job reports must not.
TIMINGS = ("step_time", "verify_time/", "overlap/")


def run(output_dir: Path, *, overlap: bool, **overrides) -> tuple[ListSink, dict]:
    config = GRPOJobConfig(
        **{
            "model_store": str(MODEL_STORE),
            "output_dir": str(output_dir),
            "rows": ROWS,
            "verifiers": VERIFIERS,
            "max_steps": 3,
            "num_generations": 4,
            "prompts_per_step": 8,
            "seed": 3,
            "rollouts_per_step": 4,
            **overrides,
        }
    )
    sink = ListSink()
    summary = main(
        config, sink=sink, checkpoints=FolderCheckpointStore(output_dir / "kept"), overlap_rewards=overlap
    )
    return sink, summary


def without_timings(metric: dict) -> dict:
    return {key: value for key, value in metric.items() if not key.startswith(TIMINGS)}


@pytest.mark.parametrize(
    "overrides",
    [{}, {"beta": 0.04}, {"algorithm": "rloo"}, {"lora_rank": 4}],
    ids=["grpo", "grpo-kl", "rloo", "lora"],
)
def test_an_overlapped_run_is_the_plain_run_bit_for_bit(tmp_path, overrides):
    from safetensors.torch import load_file

    plain, _ = run(tmp_path / "plain", overlap=False, **overrides)
    overlapped_sink, _ = run(tmp_path / "overlap", overlap=True, **overrides)

    plain_metrics, overlap_metrics = plain.of_kind("metric"), overlapped_sink.of_kind("metric")
    assert [m["step"] for m in overlap_metrics] == [1, 2, 3]
    # Rewards, their spread, every verifier's part, pass rates, the loss (which carries the advantages),
    # entropy, grad norm, KL: equal, not close.
    assert [without_timings(m) for m in overlap_metrics] == [without_timings(m) for m in plain_metrics]
    assert all(m["verify_distinct/python tests"] > 0 for m in overlap_metrics), "no sandbox ran"
    # The rollouts, with their completions and rewards, are the same ones.
    assert overlapped_sink.of_kind("rollout") == plain.of_kind("rollout")
    # And so is the model that comes out.
    plain_dir = Path(plain.of_kind("checkpoint")[-1]["location"])
    overlap_dir = Path(overlapped_sink.of_kind("checkpoint")[-1]["location"])
    before, after = load_file(plain_dir / "model.safetensors"), load_file(overlap_dir / "model.safetensors")
    assert before.keys() == after.keys()
    assert all(before[name].equal(after[name]) for name in before)

    # The overlapped run says what it overlapped: the loss used the forward pass run during scoring.
    for metric in overlap_metrics:
        assert metric[EARLY_FORWARD] == 1.0
        assert 0 <= metric[REWARD_WAIT] <= metric[REWARD_TIME] + 0.05
    # Completions that ended while the rest were generated were scored then (gpu_jobs.early_ends), and the
    # run is still the same.
    assert any(metric[EARLY_SCORED] > 0 for metric in overlap_metrics)
    assert not any(key.startswith("overlap/") for m in plain_metrics for key in m)


def trl_trainer(trainer_class: type, reward, output_dir: Path, *, steps: int = 2):
    """A TRL trainer of ``trainer_class`` on the tiny model with one reward function, seeded."""
    from datasets import Dataset
    from transformers import AutoTokenizer
    from trl import GRPOConfig

    from gpu_jobs.model_store import resolve_model

    model_dir = resolve_model("tiny", store=MODEL_STORE, allow_hub=False)
    args = GRPOConfig(
        output_dir=str(output_dir),
        max_steps=steps,
        per_device_train_batch_size=8,
        num_generations=4,
        max_completion_length=8,
        learning_rate=3e-4,
        use_cpu=True,
        report_to="none",
        save_strategy="no",
        disable_tqdm=True,
        logging_steps=1,
        seed=3,
    )
    return trainer_class(
        model=str(model_dir),
        reward_funcs=[reward],
        args=args,
        train_dataset=Dataset.from_dict({"prompt": [row["prompt"] for row in ROWS[:16]]}),
        processing_class=AutoTokenizer.from_pretrained(model_dir),
    )


def digit_count(prompts, completions, **kwargs):
    return [float(sum(ch.isdigit() for ch in c)) for c in completions]


def test_rewards_are_scored_while_the_loss_forward_pass_runs(tmp_path):
    """A reward function that returns only once the model has run a forward pass with gradients in the
    same step: the plain trainer does that pass after the rewards, so there it waits in vain."""
    import torch
    from trl import GRPOTrainer

    def train(trainer_class: type, patience: float) -> list[bool]:
        forward_steps: list[int] = []
        seen: list[bool] = []

        def reward(prompts, completions, trainer_state, **kwargs):
            deadline = time.monotonic() + patience
            while trainer_state.global_step not in forward_steps and time.monotonic() < deadline:
                time.sleep(0.01)
            seen.append(trainer_state.global_step in forward_steps)
            return digit_count(prompts, completions)

        trainer = trl_trainer(trainer_class, reward, tmp_path / trainer_class.__name__)

        def record(module, inputs, output):
            if torch.is_grad_enabled():
                forward_steps.append(trainer.state.global_step)

        trainer.model.register_forward_hook(record)
        trainer.train()
        return seen

    assert train(overlapped(GRPOTrainer), patience=60) == [True, True]
    assert train(GRPOTrainer, patience=1) == [False, False]


def test_when_the_loss_asks_for_another_batch_it_runs_its_own_forward_and_the_run_is_unchanged(tmp_path):
    """Something that draws from torch's random state between scoring and the shuffle makes the shuffle
    differ from the one the early forward read ahead: the loss must not use that forward pass."""
    import torch
    from trl import GRPOTrainer

    def drawing(base: type) -> type:
        class Drawing(base):
            def _calculate_rewards(self, *args, **kwargs):
                rewards = super()._calculate_rewards(*args, **kwargs)
                torch.rand(1)
                return rewards

        return Drawing

    runs = {}
    for name, base in {"plain": GRPOTrainer, "overlap": overlapped(GRPOTrainer)}.items():
        trainer = trl_trainer(drawing(base), digit_count, tmp_path / name, steps=3)
        trainer.train()
        logs = [log for log in trainer.state.log_history if "loss" in log]
        runs[name] = (logs, trainer.model.state_dict())

    (plain_logs, plain_weights), (overlap_logs, overlap_weights) = runs["plain"], runs["overlap"]
    # Tried once, refused, then off for the rest of the run.
    assert [log.get(EARLY_FORWARD) for log in overlap_logs] == [0.0, None, None]
    for plain_log, overlap_log in zip(plain_logs, overlap_logs, strict=True):
        for key in ("loss", "reward", "reward_std", "entropy", "grad_norm"):
            assert overlap_log[key] == plain_log[key], key
    assert all(overlap_weights[name].equal(plain_weights[name]) for name in plain_weights)
