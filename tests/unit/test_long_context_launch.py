"""Launching a job with long prompts: the overflow policy at launch (refused with the count, dropped and
counted), the model's window and the device's memory (refused with the numbers), and the cost estimate."""

from decimal import Decimal

import pytest
from django.conf import settings

from anneal.datasets.services import dataset_version_create_from_rows
from anneal.errors import InputError
from anneal.training.costs import job_estimate
from gpu_jobs.memory import model_shape
from tests.unit.test_long_prompts import ROWS, lettered


@pytest.fixture
def long_rows(world):
    def make(rows, name="long"):
        return dataset_version_create_from_rows(team=world["core"], user=world["owner"], name=name, rows=rows)

    return make


def refused(call) -> tuple[str, str]:
    with pytest.raises(InputError) as error:
        call()
    return error.value.errors[0]["field"], error.value.errors[0]["message"]


def test_refuse_names_how_many_rows_are_over_the_limit(launch, long_rows):
    version = long_rows(ROWS)
    field, message = refused(lambda: launch(version=version, max_prompt_length=100, prompts_per_step=2))
    assert field == "params.max_prompt_length"
    assert message.startswith("3 of 8 training rows have prompts longer than max_prompt_length=100 tokens")
    assert "longest 300 tokens" in message and "overflow_policy" in message


def test_held_out_rows_over_the_limit_are_refused_too(launch, long_rows):
    train, held_out = long_rows(ROWS[:5]), long_rows(ROWS, name="held-out")
    field, message = refused(
        lambda: launch(version=train, eval_version=held_out, max_prompt_length=100, prompts_per_step=2)
    )
    assert (field, message[:37]) == ("params.max_prompt_length", "3 of 8 held-out rows have prompts lon")


def test_drop_and_truncate_launch_and_the_spec_says_what_they_did(launch, long_rows):
    version = long_rows(ROWS)
    dropped = launch(version=version, max_prompt_length=100, overflow_policy="drop", prompts_per_step=2)
    measured = dropped.spec["prompt_tokens"]
    assert (measured["rows"], measured["kept"], measured["dropped"], measured["longest"]) == (8, 5, 3, 90)
    assert measured["exact"] and measured["window"] == 512 and measured["longest_before"] == 300
    cut = launch(
        version=version, max_prompt_length=100, overflow_policy="truncate_middle", prompts_per_step=2
    )
    assert (cut.spec["prompt_tokens"]["truncated"], cut.spec["prompt_tokens"]["longest"]) == (3, 100)
    assert cut.spec["overflow_policy"] == "truncate_middle" and cut.spec["max_prompt_length"] == 100


def test_too_few_rows_left_after_dropping_is_refused(launch, long_rows):
    field, message = refused(
        lambda: launch(
            version=long_rows(ROWS), max_prompt_length=50, overflow_policy="drop", prompts_per_step=8
        )
    )
    assert (
        field == "params.max_prompt_length"
        and message.startswith("3 training rows are left after dropping 5 longer than max_prompt_length=50")
        and "prompts_per_step is 8" in message
    )


def test_a_prompt_past_the_models_window_is_refused_with_both_numbers(launch, long_rows):
    version = long_rows(ROWS + [lettered(505, "x")])
    field, message = refused(lambda: launch(version=version, prompts_per_step=2, max_completion_length=8))
    assert field == "params.max_prompt_length"
    assert "longest prompt (505 tokens) plus max_completion_length (8)" in message
    assert "context window of model 'tiny' (512 tokens)" in message
    # A limit that would let such a prompt through is refused before any row is read.
    field, message = refused(lambda: launch(max_prompt_length=600, overflow_policy="truncate_left"))
    assert "longest prompt (600 tokens)" in message and "(512 tokens)" in message
    # Truncated to fit, the same data launches.
    assert launch(version=version, prompts_per_step=2, max_prompt_length=400, overflow_policy="truncate_left")


def test_a_step_that_would_not_fit_the_devices_memory_is_refused_with_the_estimate(
    launch, long_rows, settings
):
    settings.JOB_DEVICE_MEMORY_GIB = {"cpu": Decimal("0.05"), "h100": Decimal("80")}
    version = long_rows(ROWS)
    field, message = refused(lambda: launch(version=version, prompts_per_step=8, num_generations=8))
    assert field == "params.device_type"
    assert (
        message.startswith("a training step needs about ")
        and "more than the 0.05 GiB of a cpu device" in message
    )
    assert "activations" in message and "kv_cache" in message and "64 sequences of 308 tokens" in message
    # Shorter prompts fit.
    assert launch(
        version=version, prompts_per_step=2, num_generations=2, max_prompt_length=40, overflow_policy="drop"
    )


def test_the_cost_estimate_grows_with_the_prompts(launch, long_rows, world):
    short = launch(version=long_rows([lettered(20, str(i)) for i in range(8)], name="short"))
    long = launch(
        version=long_rows([lettered(500, str(i)) for i in range(8)], name="long"), max_completion_length=8
    )
    assert short.spec["prompt_tokens"]["mean"] == 20 and long.spec["prompt_tokens"]["mean"] == 500
    cheap, dear = (
        job_estimate(spec=short.spec, team=world["core"]),
        job_estimate(spec=long.spec, team=world["core"]),
    )
    # Reading a context token's keys and values, per generated token: 2 x layers x hidden / parameters.
    shape = model_shape("tiny", store=settings.MODEL_STORE)
    k = long.spec["prompt_tokens"]["kv_read_weight"]
    assert k == pytest.approx(2 * shape.layers * shape.hidden / shape.parameters) and k > 0
    # 64 completions x (8 generated + 0.05 x prompt x (1 + k x prompt / 2) + k x 8 x (prompt + 8 / 2)) at the
    # tiny model's default rate, plus 30 s.
    for estimate, prompt in ((cheap, 20), (dear, 500)):
        work = 64 * (8 + 0.05 * prompt * (1 + k * prompt / 2) + k * 8 * (prompt + 4))
        assert estimate["seconds"] == pytest.approx(30 + 20 * 0.0006 * work, abs=0.1)


def test_a_curriculum_stage_without_rows_is_refused_naming_it(launch, long_rows):
    field, message = refused(
        lambda: launch(
            version=long_rows(ROWS), prompts_per_step=2, length_curriculum="25:steps=0.5, 28:steps=0.2, 400"
        )
    )
    assert field == "params.length_curriculum"
    assert message.startswith("stage 2 has no training row with a prompt of 26 to 28 tokens")
