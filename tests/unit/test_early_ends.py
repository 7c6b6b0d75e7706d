"""Completions that end early in a batched generation are seen as they end (gpu_jobs.early_ends), on the real
tiny model, and the verdicts scored for them early are the ones the step's reward call then uses."""

import os
from pathlib import Path

import pytest

from gpu_jobs.addition import addition_rows
from gpu_jobs.early_ends import EndWatch
from gpu_jobs.grpo import score_distinct
from gpu_jobs.rewards import ScoreResult

MODEL_STORE = Path(os.environ.get("ANNEAL_TEST_MODEL_STORE", "/tmp/anneal-test-models"))
ROWS = addition_rows(n=32, seed=5)


@pytest.fixture(scope="module")
def tiny():
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from gpu_jobs.model_store import resolve_model
    from gpu_jobs.tiny_model import ensure_tiny_model

    ensure_tiny_model(MODEL_STORE)
    model_dir = resolve_model("tiny", store=MODEL_STORE, allow_hub=False)
    return AutoModelForCausalLM.from_pretrained(model_dir), AutoTokenizer.from_pretrained(model_dir)


def generate(model, tokenizer, prompts, *, seed=0, max_new_tokens=8):
    import torch

    encoded = tokenizer(prompts, padding=True, padding_side="left", return_tensors="pt")
    torch.manual_seed(seed)
    out = model.generate(
        **encoded, do_sample=True, max_new_tokens=max_new_tokens, pad_token_id=tokenizer.pad_token_id
    )
    return out[:, encoded["input_ids"].size(1) :].tolist()


def test_completions_are_handed_over_in_waves_as_they_end_with_the_ids_the_batch_ends_with(tiny):
    model, tokenizer = tiny
    prompts = [row["prompt"] for row in ROWS]
    end = tokenizer.eos_token_id
    waves = []
    with EndWatch(
        model, rows=len(prompts), end_ids=[end], on_ended=lambda ended: waves.append((watch.calls, ended))
    ) as watch:
        completions = generate(model, tokenizer, prompts)
    assert waves, "no completion ended early"
    # The first wave is handed over while other rows are still being generated (it is not the whole batch).
    assert len(waves[0][1]) < len(prompts) and waves[0][0] <= watch.calls
    handed = [row for _, ended in waves for row in ended]
    assert len(handed) == len(set(handed))  # each row once
    for _, ended in waves:
        assert len(ended) >= len(prompts) // 4  # a wave is at least a quarter of the batch
        for row, ids in ended.items():
            # Up to and including its first end token: what TRL keeps of the row.
            assert ids == completions[row][: completions[row].index(end) + 1]


def test_the_watch_reads_nothing_outside_its_generation_and_stands_aside_for_another_batch(tiny):
    model, tokenizer = tiny
    prompts = [row["prompt"] for row in ROWS]
    waves = []
    with EndWatch(
        model, rows=len(prompts) + 1, end_ids=[tokenizer.eos_token_id], on_ended=waves.append
    ) as watch:
        generate(model, tokenizer, prompts)  # a batch of another size than the watch was made for
    assert watch.off and waves == []
    calls = watch.calls
    generate(model, tokenizer, prompts)  # after the watch: its hook is gone
    assert watch.calls == calls


def test_a_failure_while_handing_over_never_stops_the_generation(tiny):
    model, tokenizer = tiny
    prompts = [row["prompt"] for row in ROWS]

    def broken(ended):
        raise RuntimeError("the verifiers could not be reached")

    with EndWatch(model, rows=len(prompts), end_ids=[tokenizer.eos_token_id], on_ended=broken) as watch:
        completions = generate(model, tokenizer, prompts)
    assert watch.off and len(completions) == len(prompts)


class Counting:
    def __init__(self):
        self.scored = []

    def score_batch(self, rows, texts):
        self.scored.extend(texts)
        return [
            ScoreResult(score=float(text == row["answer"])) for row, text in zip(rows, texts, strict=True)
        ]


def test_pairs_scored_early_are_taken_as_they_are_and_only_the_rest_are_scored():
    rows = ROWS[:3]
    keys, texts = [0, 0, 1, 2], [rows[0]["answer"], rows[0]["answer"], "0", rows[2]["answer"]]
    early = ScoreResult(score=1.0, reason="scored while the rest were generated")
    scorer = Counting()
    results, distinct = score_distinct(
        scorer, [rows[k] for k in keys], keys, texts, known={(0, texts[0]): early}
    )
    assert results[0] is early and results[1] is early  # both copies take the early verdict
    assert scorer.scored == ["0", rows[2]["answer"]]
    assert [r.score for r in results[2:]] == [0.0, 1.0]
    assert distinct == 3  # distinct pairs of the step, scored early or now
