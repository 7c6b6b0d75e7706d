"""A short seeded GRPO job on the tiny model learns: the sampled reward rises over the steps and greedy
accuracy on sums it never trained on goes up. (bench/learning.py measures the full demo job's gain.)"""

import os
from pathlib import Path

from gpu_jobs.addition import addition_rows
from gpu_jobs.config import GRPOJobConfig
from gpu_jobs.grpo import main
from gpu_jobs.sink import FolderCheckpointStore, ListSink

MODEL_STORE = Path(os.environ.get("ANNEAL_TEST_MODEL_STORE", "/tmp/anneal-test-models"))
STEPS = 50


def test_reward_rises_and_held_out_accuracy_goes_up(tmp_path):
    config = GRPOJobConfig(
        model_store=str(MODEL_STORE),
        output_dir=str(tmp_path / "job"),
        rows=addition_rows(n=1024, seed=1, split="train"),
        eval_rows=addition_rows(n=100, seed=2, split="test"),
        verifiers=[
            {"name": "exact", "spec": {"type": "exact_match", "reference_field": "answer"}, "weight": 1}
        ],
        max_steps=STEPS,
        prompts_per_step=32,
        num_generations=8,
        learning_rate=1e-4,
        eval_steps=STEPS,
        rollouts_per_step=0,
        seed=0,
    )
    sink = ListSink()
    main(config, sink=sink, checkpoints=FolderCheckpointStore(tmp_path / "kept"))

    metrics = sink.of_kind("metric")
    evals = {m["step"]: m["eval/mean"] for m in metrics if "eval/mean" in m}
    rewards = [m["reward"] for m in metrics if "reward" in m]
    assert sorted(evals) == [0, STEPS] and len(rewards) == STEPS
    first, last = sum(rewards[:10]) / 10, sum(rewards[-10:]) / 10
    assert last > first + 0.05, (evals, rewards)
    # Exact match only, so eval/mean is greedy accuracy on the 100 held-out sums.
    assert evals[STEPS] >= evals[0] + 0.08, evals
