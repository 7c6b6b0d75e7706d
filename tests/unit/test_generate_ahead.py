"""generate_ahead (gpu_jobs.ahead): each batch's rewards are scored while the next step generates and updates,
the run stays seeded, and every step is reported once with the rewards of the batch it trained on."""

import time
from pathlib import Path

import pytest

from gpu_jobs.ahead import AHEAD, RewardsAhead, ahead
from gpu_jobs.overlap import REWARD_TIME, REWARD_WAIT
from gpu_jobs.rewards import slow_to_score
from gpu_jobs.spec import TrainingSettings
from gpu_jobs.trainers import generates_ahead
from tests.unit.test_reward_overlap import digit_count, run, trl_trainer, without_timings


def test_a_batch_is_scored_while_the_step_before_it_updates_the_model(tmp_path):
    """A reward function that returns only once an optimiser step has finished since it was called: with
    generate_ahead every batch but the first is scored while the step before it updates; TRL's own order
    scores a batch before any update can happen, so there it waits in vain."""
    from trl import GRPOTrainer

    def train(trainer_class: type, patience: float) -> list[bool]:
        seen: list[bool] = []

        def reward(prompts, completions, trainer_state, **kwargs):
            called_at = trainer_state.global_step
            deadline = time.monotonic() + patience
            while trainer_state.global_step == called_at and time.monotonic() < deadline:
                time.sleep(0.01)
            seen.append(trainer_state.global_step > called_at)
            return digit_count(prompts, completions)

        trl_trainer(trainer_class, reward, tmp_path / trainer_class.__name__, steps=3).train()
        return seen

    # The first step scores its batch before it updates, as TRL does; the same prompts are generated again
    # ahead for step 2; step 2 generates step 3's batch; the last step generates nothing.
    assert train(ahead(GRPOTrainer), patience=2) == [False, True, True]
    assert train(GRPOTrainer, patience=0.5) == [False, False, False]


def test_a_job_generated_ahead_reports_each_step_once_and_is_seeded(tmp_path):
    first, summary = run(tmp_path / "one", overlap=True, generate_ahead=True, max_steps=4)
    again, _ = run(tmp_path / "two", overlap=True, generate_ahead=True, max_steps=4)

    metrics = [m for m in first.of_kind("metric") if "loss" in m]
    assert [m["step"] for m in metrics] == [1, 2, 3, 4]
    # Step 1 trains on its own batch; each later step on the batch generated a step before.
    assert [m[AHEAD] for m in metrics] == [0.0, 1.0, 1.0, 1.0]
    for metric in metrics:
        # The rewards of the batch a step trained on are reported with that step, sandboxes included.
        assert metric["verify_distinct/python tests"] > 0, metric
        assert metric[REWARD_TIME] > 0 and metric[REWARD_WAIT] >= 0
        assert metric["reward"] == metric["reward"]  # not NaN
    rollout_steps = [r["step"] for r in first.of_kind("rollout")]
    assert set(rollout_steps) == {1, 2, 3, 4} and rollout_steps == sorted(rollout_steps)
    assert summary["steps"] == 4 and Path(summary["checkpoint"]).is_dir()

    # Seeded: the same config gives the same run (rewards, losses, rollouts), whatever the timing.
    assert [without_timings(m) for m in again.of_kind("metric")] == [
        without_timings(m) for m in first.of_kind("metric")
    ]
    assert again.of_kind("rollout") == first.of_kind("rollout")


@pytest.mark.parametrize(
    "settings, message",
    [
        ({"algorithm": "rloo"}, "generate_ahead: works with algorithm grpo only"),
        ({"environment": {"name": "repo_tests"}}, "generate_ahead: agent jobs run their episodes"),
    ],
)
def test_generate_ahead_is_refused_where_it_cannot_apply_naming_why(settings, message):
    with pytest.raises(ValueError, match=message):
        TrainingSettings(generate_ahead=True, **settings)


def test_generate_ahead_is_auto_by_default_and_takes_the_old_true_and_false():
    assert TrainingSettings().generate_ahead == "auto"
    # Jobs stored and clients written while the setting was a boolean keep working.
    assert TrainingSettings(generate_ahead=True).generate_ahead == "on"
    assert TrainingSettings(generate_ahead=False).generate_ahead == "off"
    with pytest.raises(ValueError, match="generate_ahead: must be one of auto, on, off, got 'always'"):
        TrainingSettings(generate_ahead="always")
    # auto only asks for it where it applies: rloo and agent jobs are taken as they are.
    assert TrainingSettings(algorithm="rloo").generate_ahead == "auto"
    assert TrainingSettings(environment={"name": "repo_tests"}).generate_ahead == "auto"


@pytest.mark.parametrize(
    "settings, device, slow_rewards, expected",
    [
        # auto on a GPU with sandboxed checks: generation and the update leave the cores to the sandboxes.
        ({}, "cuda", True, True),
        ({}, "cpu", True, False),  # auto on the CPU: the model and the sandboxes share the cores
        ({}, "cuda", False, False),  # cheap verifiers: nothing to hide, only an extra forward pass to pay
        ({"algorithm": "rloo"}, "cuda", True, False),
        ({"environment": {"name": "repo_tests"}}, "cuda", True, False),
        ({"generate_ahead": "on"}, "cpu", False, True),
        ({"generate_ahead": "off"}, "cuda", True, False),
    ],
)
def test_auto_generates_ahead_on_a_gpu_for_grpo_jobs_with_slow_verifiers(
    settings, device, slow_rewards, expected
):
    decided = generates_ahead(TrainingSettings(**settings), device=device, slow_rewards=slow_rewards)
    assert decided is expected


@pytest.mark.parametrize(
    "spec, slow",
    [
        ({"type": "python_tests", "tests_field": "tests"}, True),
        ({"type": "code_tests", "language": "c"}, True),  # a python_tests kind, sandboxed too
        ({"type": "model_judge"}, True),
        ({"type": "exact_match", "reference_field": "answer"}, False),
        ({"type": "regex", "pattern": "x"}, False),
        (
            {
                "type": "composite",
                "parts": [
                    {"name": "a", "spec": {"type": "exact_match"}},
                    {
                        "name": "b",
                        "spec": {
                            "type": "composite",
                            "parts": [{"name": "c", "spec": {"type": "sql_result"}}],
                        },
                    },
                ],
            },
            True,
        ),
        ({"type": "composite", "parts": [{"name": "a", "spec": {"type": "numeric"}}]}, False),
    ],
)
def test_a_verifier_is_slow_when_it_or_a_part_runs_code_calls_out_or_runs_a_model(spec, slow):
    assert slow_to_score(spec) is slow


def test_the_trainer_class_generates_ahead_only_when_asked():
    from trl import GRPOTrainer

    from gpu_jobs.overlap import RewardOverlap
    from gpu_jobs.trainers import algorithm_classes

    _, ahead_class, _ = algorithm_classes(TrainingSettings(), generate_ahead=True)
    _, plain_class, _ = algorithm_classes(TrainingSettings())
    assert issubclass(ahead_class, RewardsAhead) and issubclass(ahead_class, GRPOTrainer)
    assert not issubclass(plain_class, RewardsAhead) and issubclass(plain_class, RewardOverlap)
