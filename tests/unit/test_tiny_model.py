"""The tiny model: built once per store, loads like any Hugging Face folder, and has learned some addition."""

import json
import multiprocessing
import os
import time
from pathlib import Path

import pytest

from gpu_jobs import tiny_model
from gpu_jobs.addition import addition_rows, greedy_accuracy, greedy_completions
from gpu_jobs.tiny_model import RECIPE_FILE, ensure_tiny_model, tiny_model_dir

# Shared by every test run on this machine, so the ~20 s build happens once.
MODEL_STORE = Path(os.environ.get("ANNEAL_TEST_MODEL_STORE", "/tmp/anneal-test-models"))


@pytest.fixture(scope="module")
def model_dir() -> Path:
    return ensure_tiny_model(MODEL_STORE)


def test_loads_with_auto_classes_and_answers_some_held_out_sums(model_dir):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    assert model_dir == MODEL_STORE / "tiny-v3"
    model = AutoModelForCausalLM.from_pretrained(model_dir)
    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    assert model.config.model_type == "qwen2"
    assert 700_000 < sum(p.numel() for p in model.parameters()) < 1_100_000
    assert tokenizer.pad_token == "<pad>" and tokenizer.eos_token == "<eos>"

    # One token per character, and decoding gives the text back without inserted spaces.
    text = "12+45= def f(x):\n\treturn x  # ok"
    ids = tokenizer(text)["input_ids"]
    assert len(ids) == len(text)
    assert tokenizer.decode(ids) == text
    assert tokenizer.decode(tokenizer("naïve €")["input_ids"]) == "naïve €"

    rows = addition_rows(n=200, seed=7, split="test")
    completions = greedy_completions(model=model, tokenizer=tokenizer, prompts=[r["prompt"] for r in rows])
    assert all(c.strip().isdigit() for c in completions), completions[:10]
    # The warm-up stops once a check slice of the train split reaches the target (seed 0: 53.5% after 300
    # steps, 51% held out). Held-out sums track it; far below means the recipe or the data broke.
    assert greedy_accuracy(model_dir, rows) >= 0.3
    recipe = json.loads((model_dir / RECIPE_FILE).read_text())
    assert recipe["name"] == "tiny-v3" and recipe["test_greedy_accuracy"] >= 0.3
    assert recipe["warmup_check_accuracy"] >= recipe["recipe"]["warmup_target_accuracy"]
    assert recipe["warmup_steps"] < recipe["recipe"]["warmup_max_steps"]


def test_second_call_returns_the_same_folder_without_rebuilding(model_dir):
    weights = model_dir / "model.safetensors"
    before = weights.stat().st_mtime_ns
    assert ensure_tiny_model(MODEL_STORE) == model_dir
    assert weights.stat().st_mtime_ns == before
    assert not list(MODEL_STORE.glob(".tiny-v3.tmp-*"))


def test_addition_rows_are_seeded_distinct_and_splits_do_not_overlap():
    rows = addition_rows(n=50, seed=3)
    assert rows == addition_rows(n=50, seed=3)
    assert rows != addition_rows(n=50, seed=4)
    assert len({r["prompt"] for r in rows}) == 50
    a, b = map(int, rows[0]["prompt"].removesuffix("=").split("+"))
    assert rows[0] == {"prompt": f"{a}+{b}=", "answer": str(a + b), "tests": [f"assert result == {a + b}"]}
    train = {r["prompt"] for r in addition_rows(n=9000, seed=0, split="train")}
    test = {r["prompt"] for r in addition_rows(n=1000, seed=0, split="test")}
    assert not train & test and len(train | test) == 10_000
    with pytest.raises(ValueError, match="^n:"):
        addition_rows(n=1001, seed=0, split="test")


# Concurrency of the build protocol, with the real build replaced by a slow stand-in so that the race
# window is wide and the test cheap. Runs in forked processes: flock and rename behave as across workers.


def _slow_build(folder: Path, *, seed: int) -> None:
    folder.mkdir(parents=True)
    time.sleep(0.5)
    (folder / "config.json").write_text("{}")
    with open(folder.parent / "builds.log", "a") as log:
        log.write(f"{os.getpid()}\n")


def _ensure_with_slow_build(store: str, results: "multiprocessing.Queue") -> None:
    tiny_model._build = _slow_build
    results.put(str(ensure_tiny_model(Path(store), seed=5)))


def test_concurrent_callers_build_once_and_clear_leftovers_of_a_dead_build(tmp_path):
    leftover = tmp_path / ".tiny-v3-seed5.tmp-999999"
    leftover.mkdir()
    # Spawn, not fork: by now the test process has threads (channel layers, torch) whose locks a forked
    # child could inherit held, and hang.
    context = multiprocessing.get_context("spawn")
    results = context.Queue()
    workers = [
        context.Process(target=_ensure_with_slow_build, args=(str(tmp_path), results)) for _ in range(3)
    ]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(timeout=90)
        assert worker.exitcode == 0

    expected = str(tiny_model_dir(tmp_path, seed=5))
    assert [results.get(timeout=5) for _ in workers] == [expected] * 3
    assert len((tmp_path / "builds.log").read_text().split()) == 1
    assert (Path(expected) / "config.json").exists()
    assert not leftover.exists()
