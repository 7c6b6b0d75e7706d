"""Two-digit addition: the task the tiny model is warmed up on, the demo dataset and the tests' workload.

Rows look like ``{"prompt": "12+45=", "answer": "57", "tests": ["assert result == 57"]}`` so that both
verifier types (``exact_match`` on ``answer``, ``python_tests`` on ``tests``) can score them.

The 10,000 sums ``a+b`` with ``0 <= a, b <= 99`` are split once, by a fixed seed, into 9,000 "train" sums
(warm-up and RL prompts) and 1,000 "test" sums that the model never sees before evaluation, so
``greedy_accuracy`` on test rows measures generalisation rather than recall.

Building rows is pure Python; only ``greedy_accuracy`` imports torch (through gpu_jobs.evaluation), lazily, so the
web side can build a demo dataset without loading it.
"""

from __future__ import annotations

import random
from functools import cache
from pathlib import Path
from typing import Any

from gpu_jobs.evaluation import greedy_completions

SPLITS = ("train", "test")
_TEST_SIZE = 1000
# Changing this seed changes which sums are held out, which silently invalidates every accuracy figure
# measured so far: bump the tiny model's name (tiny_model.TINY_MODEL_NAME) along with it.
_SPLIT_SEED = 20240601


@cache
def _split_pairs() -> dict[str, tuple[tuple[int, int], ...]]:
    pairs = [(a, b) for a in range(100) for b in range(100)]
    random.Random(_SPLIT_SEED).shuffle(pairs)
    return {"test": tuple(sorted(pairs[:_TEST_SIZE])), "train": tuple(sorted(pairs[_TEST_SIZE:]))}


def addition_row(*, a: int, b: int) -> dict:
    """The dataset row for ``a+b``."""
    total = a + b
    return {"prompt": f"{a}+{b}=", "answer": str(total), "tests": [f"assert result == {total}"]}


def addition_rows(*, n: int, seed: int, split: str = "train") -> list[dict]:
    """``n`` distinct sums drawn (seeded, reproducibly) from one split.

    Preconditions: ``split`` is "train" (9,000 sums) or "test" (1,000 sums) and ``1 <= n <= `` that size;
    otherwise ValueError.
    """
    if split not in SPLITS:
        raise ValueError(f"split: must be one of {', '.join(SPLITS)}, got {split!r}")
    pool = _split_pairs()[split]
    if not 1 <= n <= len(pool):
        raise ValueError(f"n: must be between 1 and {len(pool)} for the {split} split, got {n}")
    return [addition_row(a=a, b=b) for a, b in random.Random(seed).sample(pool, n)]


def greedy_accuracy(
    model_dir: Path | str, rows: list[dict], *, max_new_tokens: int = 8, batch_size: int = 256
) -> float:
    """Fraction of ``rows`` whose greedy completion, stripped, equals the row's ``answer`` exactly.

    Preconditions: ``model_dir`` holds a model and tokenizer that ``from_pretrained`` loads; ``rows`` is
    non-empty and every row has string "prompt" and "answer" values.
    """
    from transformers import AutoModelForCausalLM, AutoTokenizer

    model = AutoModelForCausalLM.from_pretrained(model_dir)
    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    return model_greedy_accuracy(model, tokenizer, rows, max_new_tokens=max_new_tokens, batch_size=batch_size)


def model_greedy_accuracy(
    model: Any, tokenizer: Any, rows: list[dict], *, max_new_tokens: int = 8, batch_size: int = 256
) -> float:
    """``greedy_accuracy`` for a model already loaded (it is left in eval mode)."""
    if not rows:
        raise ValueError("rows: must not be empty")
    completions = greedy_completions(
        model=model,
        tokenizer=tokenizer,
        prompts=[row["prompt"] for row in rows],
        max_new_tokens=max_new_tokens,
        batch_size=batch_size,
    )
    correct = sum(
        completion.strip() == row["answer"] for completion, row in zip(completions, rows, strict=True)
    )
    return correct / len(rows)


# The demo job (`make demo` seeds it; bench/learning.py runs the same spec in-process): what it trains on,
# what scores it, and its hyper-parameters. Kept here, free of Django, so that both use one definition.
DEMO_TRAIN_ROWS = {"n": 4096, "seed": 1, "split": "train"}
DEMO_EVAL_ROWS = {"n": 200, "seed": 2, "split": "test"}
DEMO_VERIFIERS = {
    "exact answer": ({"type": "exact_match", "reference_field": "answer"}, 1.0),
    "python tests": ({"type": "python_tests", "tests_field": "tests", "scoring": "all_or_nothing"}, 0.5),
}
# 32 prompts x 8 completions at lr 1e-4 (constant), 4,096 training sums: from the tiny model's 55% start,
# held-out accuracy passes +20 points within ~25 steps and ends near 80% (bench/learning.py; README). From
# other starts in the warm-up's band it gains as much: 33.5% -> 59% and 66.5% -> 87% in 50 steps. With 512
# training sums the policy memorises them (sampled reward 0.96) and held-out accuracy levels off lower.
DEMO_PARAMS = {
    "max_steps": 200,
    "prompts_per_step": 32,
    "num_generations": 8,
    "learning_rate": 1e-4,
    "eval_steps": 25,
}
