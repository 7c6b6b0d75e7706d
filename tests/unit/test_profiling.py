"""Difficulty profiling on the tiny model: pass@k per prompt, prompts without signal dropped, the rest
ordered easy to hard, and a profiled job training on that curriculum. Short and seeded."""

import os
from pathlib import Path

import pytest
import torch

from gpu_jobs.addition import addition_rows
from gpu_jobs.config import GRPOJobConfig
from gpu_jobs.domains import DomainScorer
from gpu_jobs.grpo import main
from gpu_jobs.profiling import profile_rows
from gpu_jobs.rewards import build_scorer
from gpu_jobs.sink import FolderCheckpointStore, ListSink
from gpu_jobs.tiny_model import ensure_tiny_model

MODEL_STORE = Path(os.environ.get("ANNEAL_TEST_MODEL_STORE", "/tmp/anneal-test-models"))
ROWS = addition_rows(n=24, seed=5)
EXACT = {"type": "exact_match"}


@pytest.fixture(scope="module")
def tiny():
    from transformers import AutoModelForCausalLM, AutoTokenizer

    folder = ensure_tiny_model(MODEL_STORE)
    return AutoModelForCausalLM.from_pretrained(folder), AutoTokenizer.from_pretrained(folder)


def profile(tiny, rows, scorers, **overrides):
    model, tokenizer = tiny
    values = dict(
        model=model,
        tokenizer=tokenizer,
        rows=rows,
        scorers=scorers,
        weights=dict.fromkeys(scorers, 1.0),
        k=8,
        max_new_tokens=4,
        temperature=1.0,
        seed=0,
    )
    values.update(overrides)
    return profile_rows(**values)


def test_prompts_without_signal_are_dropped_and_the_rest_ordered_easy_to_hard(tiny):
    torch.manual_seed(123)
    before = torch.random.get_rng_state()
    result = profile(tiny, ROWS, {"exact": DomainScorer(build_scorer(EXACT), None)})
    # The training run's sampling does not depend on whether the job was profiled.
    assert torch.equal(torch.random.get_rng_state(), before)
    assert result.profiled == list(range(len(ROWS))) and len(result.rates) == len(ROWS)
    assert all(rate * 8 == int(rate * 8) for rate in result.rates)
    rate_of = dict(zip(result.profiled, result.rates, strict=True))
    assert result.order and all(0 < rate_of[i] < 1 for i in result.order)
    assert [rate_of[i] for i in result.order] == sorted((rate_of[i] for i in result.order), reverse=True)
    summary = result.summary(ROWS)
    assert summary["kept"] == len(result.order)
    assert summary["kept"] + summary["dropped_always_solved"] + summary["dropped_never_solved"] == len(ROWS)
    assert summary["domains"]["all"]["profiled"] == len(ROWS)
    # The warmed-up tiny model solves some sums, not all: the profile sees both kinds.
    assert 0 < summary["mean_pass_rate"] < 1
    # Seeded: profiling again gives the same rates.
    assert profile(tiny, ROWS, {"exact": DomainScorer(build_scorer(EXACT), None)}).rates == result.rates


def test_a_prompt_every_sample_solves_is_dropped_and_max_prompts_samples_the_rows(tiny):
    always = {"type": "regex", "pattern": ".*"}
    result = profile(tiny, ROWS, {"any": DomainScorer(build_scorer(always), None)}, k=2, max_prompts=5)
    assert len(result.profiled) == 5 and result.rates == [1.0] * 5 and result.order == []
    assert result.summary(ROWS)["dropped_always_solved"] == 5


def test_a_profiled_job_trains_on_the_kept_prompts_and_reports_the_profile(tmp_path):
    rows = [dict(row, domain="even" if i % 2 == 0 else "odd") for i, row in enumerate(ROWS)]
    config = GRPOJobConfig(
        model_store=str(MODEL_STORE),
        output_dir=str(tmp_path),
        rows=rows,
        verifiers=[{"name": "exact", "spec": EXACT, "weight": 1.0}],
        max_steps=2,
        num_generations=4,
        prompts_per_step=4,
        max_completion_length=4,
        profile_k=8,
        seed=1,
        rollouts_per_step=8,
    )
    sink = ListSink()
    main(config, sink=sink, checkpoints=FolderCheckpointStore(tmp_path / "kept"))
    logs = [log for log in sink.of_kind("log") if "profile" in log]
    assert len(logs) == 1
    summary = logs[0]["profile"]
    assert summary["k"] == 8 and summary["profiled"] == len(rows)
    assert set(summary["domains"]) == {"even", "odd"}
    first = sink.of_kind("metric")[0]
    assert first["step"] == 0 and first["profile/kept"] == summary["kept"] > 0
    # Only kept prompts (pass rate strictly between 0 and 1 before training) are trained on.
    kept_prompts = _kept_prompts(rows, config)
    trained = {r["prompt"] for r in sink.of_kind("rollout")}
    assert trained and trained <= kept_prompts
    weights = [m for m in sink.of_kind("metric") if "domain_weight/even" in m]
    assert [m["step"] for m in weights] == [1, 2]


def _kept_prompts(rows, config) -> set[str]:
    from transformers import AutoModelForCausalLM, AutoTokenizer

    folder = ensure_tiny_model(MODEL_STORE)
    result = profile_rows(
        model=AutoModelForCausalLM.from_pretrained(folder),
        tokenizer=AutoTokenizer.from_pretrained(folder),
        rows=rows,
        scorers={"exact": DomainScorer(build_scorer(EXACT), None)},
        weights={"exact": 1.0},
        k=config.profile_k,
        max_new_tokens=config.max_completion_length,
        temperature=config.temperature,
        seed=config.seed,
        max_prompts=config.profile_max_prompts,
    )
    return {rows[i]["prompt"] for i in result.order}
