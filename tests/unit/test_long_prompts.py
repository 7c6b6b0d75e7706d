"""Long prompts in the engine: the overflow policies (the same rows in training, evaluation and the deploy
gate), the window check, the length curriculum's stages and sampler, evaluation by length, the memory
formula and the vLLM options for long sequences."""

import json
import os
import random
from pathlib import Path

import pytest

from gpu_jobs.config import GRPOJobConfig
from gpu_jobs.curriculum import LengthCurriculum, parse_curriculum, stage_bands
from gpu_jobs.device import VLLM_ENGINE_OPTIONS, install_vllm_engine_options
from gpu_jobs.evaluation import by_length, length_buckets
from gpu_jobs.lengths import prepare_lengths
from gpu_jobs.memory import GIB, ModelShape, safetensors_parameters, training_memory
from gpu_jobs.prompt_length import (
    OVERFLOW_POLICIES,
    PromptTooLong,
    byte_codec,
    check_window,
    codec_from_folder,
    fit_rows,
)
from gpu_jobs.sampler import DomainSampler, DomainWeights
from gpu_jobs.sink import ListSink
from gpu_jobs.spec import TrainingSettings
from gpu_jobs.tiny_model import ensure_tiny_model

MODEL_STORE = Path(os.environ.get("ANNEAL_TEST_MODEL_STORE", "/tmp/anneal-test-models"))
VERIFIERS = [{"name": "exact", "spec": {"type": "exact_match"}, "weight": 1.0}]


def lettered(length: int, answer: str) -> dict:
    """A prompt of exactly ``length`` bytes (the tiny model's tokens): "start" ... "end?"."""
    body = "".join(random.Random(length).choice("abcdefgh ") for _ in range(length - 9))
    return {"prompt": "start" + body + "end?", "answer": answer}


ROWS = [lettered(n, str(i)) for i, n in enumerate([20, 30, 40, 60, 90, 120, 200, 300])]


@pytest.fixture(scope="module")
def tiny_dir() -> Path:
    return ensure_tiny_model(MODEL_STORE)


@pytest.fixture(scope="module")
def codec(tiny_dir):
    return codec_from_folder(tiny_dir)


def test_the_tiny_model_counts_one_token_a_byte_and_exactly(tiny_dir, codec):
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(tiny_dir)
    text = ROWS[3]["prompt"] + " é"
    assert codec.exact and codec.count(text) == len(tokenizer(text, add_special_tokens=False)["input_ids"])


@pytest.mark.parametrize("policy", OVERFLOW_POLICIES)
def test_each_policy_on_prompts_longer_than_the_limit(codec, policy):
    if policy == "refuse":
        with pytest.raises(PromptTooLong) as refused:
            fit_rows(ROWS, codec=codec, max_length=100, policy=policy, what="training rows")
        # The count, the limit and the longest prompt, naming the setting.
        assert str(refused.value).startswith("max_prompt_length: 3 of 8 training rows")
        assert "max_prompt_length=100" in str(refused.value) and "longest 300 tokens" in str(refused.value)
        return
    fitted = fit_rows(ROWS, codec=codec, max_length=100, policy=policy)
    assert max(fitted.lengths) <= 100
    if policy == "drop":
        assert fitted.dropped == [5, 6, 7] and len(fitted.rows) == 5
        assert fitted.rows == ROWS[:5]
        return
    assert fitted.truncated == 3 and len(fitted.rows) == 8 and fitted.lengths[5:] == [100, 100, 100]
    assert fitted.rows[:5] == ROWS[:5]  # short rows untouched
    for original, cut in zip(ROWS[5:], fitted.rows[5:], strict=True):
        assert cut["answer"] == original["answer"]
        text = original["prompt"]
        if policy == "truncate_left":
            assert cut["prompt"] == text[-100:] and cut["prompt"].endswith("end?")
        elif policy == "truncate_right":
            assert cut["prompt"] == text[:100] and cut["prompt"].startswith("start")
        else:
            assert cut["prompt"] == text[:50] + text[-50:]


def test_no_limit_keeps_every_row_and_dropping_every_row_is_refused(codec):
    assert fit_rows(ROWS, codec=codec, max_length=0, policy="refuse").rows == ROWS
    with pytest.raises(PromptTooLong, match="every one of the 8 rows"):
        fit_rows(ROWS, codec=codec, max_length=10, policy="drop")


def test_truncation_by_a_non_exact_codec_still_fits():
    # Multi-byte characters cut in half are dropped, and the result still fits.
    fitted = fit_rows([{"prompt": "é" * 50}], codec=byte_codec(), max_length=11, policy="truncate_middle")
    assert byte_codec().count(fitted.rows[0]["prompt"]) <= 11


def test_the_window_check_names_both_numbers():
    with pytest.raises(ValueError) as refused:
        check_window(longest_prompt=500, max_completion_length=16, window=512, model="tiny")
    message = str(refused.value)
    assert "longest prompt (500 tokens)" in message and "(16)" in message and "(512 tokens)" in message
    check_window(longest_prompt=496, max_completion_length=16, window=512, model="tiny")


def job_config(tmp_path: Path, **overrides) -> GRPOJobConfig:
    values = dict(
        model_store=str(MODEL_STORE),
        output_dir=str(tmp_path),
        rows=ROWS,
        eval_rows=ROWS[::-1],
        verifiers=VERIFIERS,
        num_generations=2,
        prompts_per_step=2,
        max_steps=4,
    )
    values.update(overrides)
    return GRPOJobConfig(**values)


@pytest.mark.parametrize("policy", ["drop", "truncate_left", "truncate_right", "truncate_middle"])
def test_training_evaluation_and_the_gate_fit_the_same_rows(tmp_path, tiny_dir, codec, policy):
    from transformers import AutoTokenizer

    from workers.deploy_gate import fitted_held_out

    config = job_config(tmp_path, max_prompt_length=100, overflow_policy=policy)
    sink = ListSink()
    run = prepare_lengths(config, codec=codec, model_dir=str(tiny_dir), sink=sink)
    expected = fit_rows(ROWS, codec=codec, max_length=100, policy=policy)
    assert run.config.rows == expected.rows and run.lengths == expected.lengths
    assert run.config.eval_rows == fit_rows(ROWS[::-1], codec=codec, max_length=100, policy=policy).rows
    # The gate, given the job's settings, feeds the base and the checkpoint the rows evaluation saw.
    gate = fitted_held_out(
        {"held_out": ROWS[::-1], "max_prompt_length": 100, "overflow_policy": policy},
        model_dir=str(tiny_dir),
        tokenizer=AutoTokenizer.from_pretrained(tiny_dir),
    )
    assert gate == run.config.eval_rows
    said = " ".join(event["message"] for event in sink.of_kind("log"))
    assert (
        "dropped 3 prompt(s)"
        if policy == "drop"
        else f"cut 3 prompt(s) to max_prompt_length=100 tokens ({policy}"
    ) in said


def test_refuse_stops_the_run_and_the_gate_the_same_way(tmp_path, tiny_dir, codec):
    from transformers import AutoTokenizer

    from workers.deploy_gate import fitted_held_out

    with pytest.raises(PromptTooLong, match="3 of 8 training rows"):
        prepare_lengths(
            job_config(tmp_path, max_prompt_length=100), codec=codec, model_dir=str(tiny_dir), sink=ListSink()
        )
    with pytest.raises(PromptTooLong, match="3 of 8 held-out rows"):
        fitted_held_out(
            {"held_out": ROWS, "max_prompt_length": 100, "overflow_policy": "refuse"},
            model_dir=str(tiny_dir),
            tokenizer=AutoTokenizer.from_pretrained(tiny_dir),
        )


def test_the_run_refuses_prompts_past_the_window(tmp_path, tiny_dir, codec):
    rows = ROWS + [lettered(505, "x"), lettered(505, "y")]
    with pytest.raises(ValueError, match=r"longest prompt \(505 tokens\) plus max_completion_length \(8\)"):
        prepare_lengths(
            job_config(tmp_path, rows=rows), codec=codec, model_dir=str(tiny_dir), sink=ListSink()
        )


def test_curriculum_settings_are_checked_naming_the_stage():
    assert parse_curriculum("") == []
    for text, wanted in [
        ("64", "at least two stages"),
        ("64:steps=0.5, 32", "stage 2 (32 tokens) must be longer"),
        ("64, 128", "stage 1 (64 tokens) needs steps=SHARE or pass=RATE"),
        ("64:steps=0.5, 128:steps=0.5", "the last stage (128 tokens) trains until the end"),
        ("64:steps=0.7, 128:steps=0.6, 256", "add up to 1.3"),
        ("64:pass=1.5, 128", "pass must be in (0, 1]"),
        ("x:steps=0.5, 128", "stage 1 ('x:steps=0.5') must start"),
    ]:
        with pytest.raises(
            ValueError, match=r"^length_curriculum: .*" + wanted.replace("(", r"\(").replace(")", r"\)")
        ):
            TrainingSettings(length_curriculum=text)
    with pytest.raises(
        ValueError, match="^length_curriculum: stage 2 has no training row with a prompt of 65 to"
    ):
        stage_bands([10, 200], parse_curriculum("64:steps=0.5, 128:steps=0.2, 512"))


def test_a_stage_moves_on_after_its_step_share(tmp_path):
    curriculum = LengthCurriculum(parse_curriculum("64:steps=0.25, 128:steps=0.5, 512"), max_steps=8)
    moves = [curriculum.observe(step=step, pass_rate=0.0) for step in range(1, 9)]
    assert [m["stage"] if m else None for m in moves] == [None, 2, None, None, None, 3, None, None]
    assert moves[1]["reason"] == "its 2 steps (0.25 of 8) are done" and moves[1]["max_length"] == 128


def test_a_stage_moves_on_at_its_pass_rate_or_its_share_whichever_first(tmp_path):
    state = tmp_path / "curriculum.json"
    curriculum = LengthCurriculum(
        parse_curriculum("64:pass=0.5, 128:pass=0.9:steps=0.3, 512"), max_steps=10, state_file=state
    )
    rates = [0.2, 0.4, 0.6, 0.7]  # the mean of the last two steps reaches 0.5 at step 3
    moves = [curriculum.observe(step=step, pass_rate=rate) for step, rate in enumerate(rates, start=1)]
    assert [m and m["stage"] for m in moves] == [None, None, 2, None]
    assert "pass rate 0.50" in moves[2]["reason"]
    # A resumed job goes on in stage 2, whose 3 steps end at step 6 unless its pass rate comes first.
    resumed = LengthCurriculum(curriculum.stages, max_steps=10, state_file=state)
    assert resumed.current == 1
    assert resumed.observe(step=5, pass_rate=0.1) is None
    assert resumed.observe(step=6, pass_rate=0.1)["stage"] == 3
    assert resumed.observe(step=7, pass_rate=1.0) is None  # the last stage runs to the end


def test_the_sampler_draws_only_the_current_stages_rows():
    rows = [{"prompt": f"p{i}", "domain": "a" if i % 2 else "b"} for i in range(12)]
    stages = [0] * 4 + [1] * 4 + [2] * 4
    curriculum = LengthCurriculum(parse_curriculum("64:steps=0.5, 128:steps=0.25, 512"), max_steps=4)
    sampler = DomainSampler(
        rows=rows,
        weights=DomainWeights({"a": 1.0, "b": 1.0}),
        batch_size=2,
        mini_repeat_count=2,
        row_stages=stages,
        curriculum=curriculum,
    )
    drawn = iter(sampler)
    seen = []
    for step in range(1, 5):
        batch = [next(drawn) for _ in range(4)]  # 2 prompts x 2 completions
        seen.append({stages[index] for index in batch})
        curriculum.observe(step=step, pass_rate=0.0)
    assert seen == [{0}, {0}, {1}, {2}]


def test_held_out_buckets_per_domain_and_length():
    assert length_buckets([100, 300, 900]) == [128, 256, 512, 1024]
    assert length_buckets([100, 300, 900], stage_bounds=[256, 512]) == [256, 900]
    rows = [{"domain": "needle"}, {"domain": "needle"}, {"domain": "kv"}, {}]
    scores = by_length(
        rows=rows, totals=[1.0, 0.0, 1.0, 0.5], lengths=[100, 200, 900, 1000], bounds=[256, 1024]
    )
    assert scores == {
        "eval_length/256/needle": 0.5,
        "eval_length/256/mean": 0.5,
        "eval_length_rows/256": 2.0,
        "eval_length/1024/all": 0.5,
        "eval_length/1024/kv": 1.0,
        "eval_length/1024/mean": 0.75,
        "eval_length_rows/1024": 2.0,
    }


def test_the_model_shape_is_read_without_loading_the_model(tiny_dir):
    shape = ModelShape.from_folder(tiny_dir)
    recipe = json.loads((tiny_dir / "anneal_recipe.json").read_text())
    assert shape.parameters == safetensors_parameters(tiny_dir) == recipe["parameters"]
    assert (shape.window, shape.layers, shape.hidden, shape.kv_heads) == (512, 4, 128, 4)


def test_memory_grows_with_the_prompt_and_each_term_follows_the_formula():
    shape = ModelShape(parameters=1000, layers=2, hidden=8, heads=2, kv_heads=1, vocab=50, window=None)
    short = training_memory(shape, prompt_tokens=10, completion_tokens=6, sequences=4, gpu=False)
    long = training_memory(shape, prompt_tokens=1000, completion_tokens=6, sequences=4, gpu=False)
    assert (short.weights, short.gradients, short.optimizer, short.reference) == (4000, 4000, 8000, 0)
    assert short.kv_cache == 4 * 16 * 2 * 2 * 1 * 4 * 4  # tokens x layers x (k, v) x kv heads x head dim x 4
    assert short.activations == 4 * 16 * 8 * 34 * 4 // 2 * 2
    assert short.logits == 4 * 6 * 50 * 4 * 4  # logits, scaled by the temperature, and both gradients
    assert long.kv_cache > 60 * short.kv_cache and long.total > short.total
    gpu = training_memory(shape, prompt_tokens=1000, completion_tokens=6, sequences=4, gpu=True, lora_rank=2)
    assert (
        gpu.weights == 2000 and gpu.gradients == 2 * 7 * 2 * 2 * 8 * 2 and gpu.activations < long.activations
    )
    assert "GiB" in long.describe() and long.total / GIB < 1


def test_the_colocated_vllm_engine_gets_prefix_caching_and_chunked_prefill():
    class FakeModule:  # trl.generation.vllm_generation where vLLM is installed (no GPU here)
        calls: list = []

        @staticmethod
        def LLM(**kwargs):  # noqa: N802 (vLLM's name)
            FakeModule.calls.append(kwargs)

    assert install_vllm_engine_options(FakeModule)
    assert install_vllm_engine_options(FakeModule)  # a second call wraps nothing more
    FakeModule.LLM(model="m", max_num_batched_tokens=4096, enable_chunked_prefill=False)
    assert FakeModule.calls == [
        {
            "model": "m",
            "max_num_batched_tokens": 4096,
            "enable_chunked_prefill": False,
            "enable_prefix_caching": True,
        }
    ]
    assert VLLM_ENGINE_OPTIONS == {"enable_prefix_caching": True, "enable_chunked_prefill": True}

    class NoVllm:
        pass

    assert not install_vllm_engine_options(NoVllm)
