"""The tiny long-context model: the tiny family (gpu_jobs.tiny_model) with an 8,192-token window.

``ensure_tiny_long_model(store)`` builds it once into ``store / "tiny-long"``, the name a job gives
(gpu_jobs.model_store), so code that finds a model folder by its name finds this one; the build's
version (``TINY_LONG_MODEL_NAME``) is in its ``anneal_recipe.json``, and a folder of another version is
rebuilt. Same character tokenizer as ``tiny`` (one token per byte, so the
long-context packs' prompts, lowercase ASCII, count exactly), same Qwen2 shape (hidden 128, 4 layers,
~0.9M parameters: a 4,096-token forward pass takes well under a second on a CPU core), but
``max_position_embeddings`` 8,192 and RoPE base 10,000 (head dimension 32: the slowest rotation's
period, about 35,000 positions, is well past the window, so far positions stay apart).

The warm-up is supervised, on ``niah_single`` rows (gpu_jobs.long_context) of the shortest length
only, 256 tokens, the loss on the whole sequence. It was meant to stop once greedy accuracy on a check
slice reached ``warmup_target_accuracy``, so that the model starts with a non-zero score at 256 tokens;
it does not get there on a CPU in minutes (see the recipe's comment: 1,000 steps still copy no digit),
so it is now 20 steps that start the model on the text, and a job starts from about 0% retrieval. What the build measured (steps, accuracy at
256 and 512 tokens, seconds) is written to ``anneal_recipe.json`` in the folder.
"""

from __future__ import annotations

import json
import os
import random
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from gpu_jobs.tiny_model import RECIPE_FILE, build_char_tokenizer, ensure_built

# Bump with any change to what gets built (recipe, tokenizer, the warm-up's rows): a store holding another
# version rebuilds.
TINY_LONG_MODEL_NAME = "tiny-long-v3"
FOLDER_NAME = "tiny-long"
WARMUP_FAMILY = "niah_single"
WARMUP_LENGTH = 256
_TRAIN_SEED, _CHECK_SEED, _EVAL_SEED = 1, 2, 3


@dataclass(frozen=True)
class TinyLongRecipe:
    hidden_size: int = 128
    intermediate_size: int = 384
    num_hidden_layers: int = 4
    num_attention_heads: int = 4
    max_position_embeddings: int = 8192
    rope_theta: float = 10_000.0
    warmup_batch_size: int = 16
    warmup_learning_rate: float = 2e-3
    # Short on purpose (one check, at the end): 600 steps (694 s on 2 busy cores) and 1,000 steps with the
    # loss on the whole sequence both left greedy retrieval at 0% at 256 tokens (the answer's format
    # learnt, " 7000000", not the copy), so a longer warm-up only slows every first build.
    warmup_target_accuracy: float = 0.3
    warmup_check_every: int = 20
    warmup_min_steps: int = 20
    warmup_max_steps: int = 20
    check_rows: int = 32
    eval_rows: int = 32


RECIPE = TinyLongRecipe()


def tiny_long_model_dir(store: Path) -> Path:
    return Path(store) / FOLDER_NAME


def built_version(folder: Path) -> str | None:
    try:
        return json.loads((folder / RECIPE_FILE).read_text()).get("name")
    except (OSError, ValueError):
        return None


def ensure_tiny_long_model(store: Path, *, recipe: TinyLongRecipe = RECIPE) -> Path:
    """The folder of the tiny long-context model in ``store``, built first if missing or of another
    version (locking and atomic rename as ``ensure_tiny_model``). A ``recipe`` other than the default is
    for experiments: it builds into the same folder, so pass a scratch store."""
    target = tiny_long_model_dir(store)
    if target.is_dir() and built_version(target) != TINY_LONG_MODEL_NAME:
        # Moved aside, not deleted in place: a process still reading the old weights keeps its files.
        stale = target.with_name(f".{target.name}.tmp-stale-{os.getpid()}")
        try:
            os.rename(target, stale)
        except OSError:
            pass  # another process moved it first
    return ensure_built(target, lambda folder: _build(folder, recipe=recipe))


def build_tiny_long_model(*, recipe: TinyLongRecipe = RECIPE, seed: int = 0) -> tuple[Any, Any]:
    """(model, tokenizer), randomly initialised: no warm-up. For tests of the architecture."""
    from transformers import Qwen2Config, Qwen2ForCausalLM, set_seed

    set_seed(seed)
    tokenizer = build_char_tokenizer()
    config = Qwen2Config(
        vocab_size=len(tokenizer),
        hidden_size=recipe.hidden_size,
        intermediate_size=recipe.intermediate_size,
        num_hidden_layers=recipe.num_hidden_layers,
        num_attention_heads=recipe.num_attention_heads,
        num_key_value_heads=recipe.num_attention_heads,
        max_position_embeddings=recipe.max_position_embeddings,
        rope_parameters={"rope_type": "default", "rope_theta": recipe.rope_theta},
        tie_word_embeddings=True,
        pad_token_id=tokenizer.pad_token_id,
        eos_token_id=tokenizer.eos_token_id,
        bos_token_id=tokenizer.eos_token_id,
    )
    model = Qwen2ForCausalLM(config)
    model.generation_config.pad_token_id = tokenizer.pad_token_id
    model.generation_config.eos_token_id = tokenizer.eos_token_id
    return model, tokenizer


def warmup_rows(*, n: int, seed: int, length: int = WARMUP_LENGTH) -> list[dict]:
    from gpu_jobs.long_context import family_row

    return [family_row(family=WARMUP_FAMILY, length=length, seed=seed, index=i) for i in range(n)]


def _build(folder: Path, *, recipe: TinyLongRecipe) -> None:
    started = time.perf_counter()
    model, tokenizer = build_tiny_long_model(recipe=recipe)
    warm_up = warm_up_on_retrieval(model, tokenizer, recipe=recipe)
    folder.mkdir(parents=True)
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    accuracy = {
        str(length): retrieval_accuracy(
            model, tokenizer, warmup_rows(n=recipe.eval_rows, seed=_EVAL_SEED, length=length)
        )
        for length in (WARMUP_LENGTH, 2 * WARMUP_LENGTH)
    }
    body = {
        "name": TINY_LONG_MODEL_NAME,
        "recipe": asdict(recipe),
        "parameters": sum(p.numel() for p in model.parameters()),
        **warm_up,
        "held_out_accuracy_by_length": accuracy,
        "build_seconds": round(time.perf_counter() - started, 2),
    }
    (folder / RECIPE_FILE).write_text(json.dumps(body, indent=2) + "\n")


def retrieval_accuracy(model: Any, tokenizer: Any, rows: list[dict]) -> float:
    """Share of rows whose greedy completion, stripped, is the row's answer."""
    from gpu_jobs.evaluation import greedy_completions

    completions = greedy_completions(
        model=model,
        tokenizer=tokenizer,
        prompts=[r["prompt"] for r in rows],
        max_new_tokens=10,
        batch_size=32,
    )
    return sum(c.strip() == r["answer"] for c, r in zip(completions, rows, strict=True)) / len(rows)


def warm_up_on_retrieval(
    model: Any, tokenizer: Any, *, recipe: TinyLongRecipe = RECIPE, log: Any = None
) -> dict:
    """Supervised next-token training on the shortest retrieval rows, "prompt" -> " answer<eos>", loss on
    the answer only, until greedy accuracy on a check slice reaches the target (or the step limit)."""
    import torch

    check = warmup_rows(n=recipe.check_rows, seed=_CHECK_SEED)
    sampler = random.Random(0)
    optimizer = torch.optim.AdamW(model.parameters(), lr=recipe.warmup_learning_rate, weight_decay=0.0)
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda step: min(1.0, (step + 1) / 20))
    accuracy, next_row = 0.0, 0
    for step in range(1, recipe.warmup_max_steps + 1):
        model.train()
        rows = warmup_rows(n=recipe.warmup_batch_size, seed=_TRAIN_SEED + 1000 * next_row)
        next_row += 1
        examples = []
        for row in rows:
            prompt_ids = tokenizer(row["prompt"])["input_ids"]
            answer_ids = tokenizer(" " + row["answer"])["input_ids"] + [tokenizer.eos_token_id]
            # The loss covers the prompt too: predicting the question's key, which the needle wrote
            # before, is what grows the copying (induction) heads retrieval needs, far sooner than the
            # few answer tokens alone would.
            examples.append((prompt_ids + answer_ids, prompt_ids + answer_ids))
        sampler.shuffle(examples)
        width = max(len(ids) for ids, _ in examples)
        pad = tokenizer.pad_token_id
        input_ids = torch.tensor([ids + [pad] * (width - len(ids)) for ids, _ in examples])
        labels = torch.tensor([lab + [-100] * (width - len(lab)) for _, lab in examples])
        attention_mask = torch.tensor([[1] * len(ids) + [0] * (width - len(ids)) for ids, _ in examples])
        loss = model(input_ids=input_ids, attention_mask=attention_mask, labels=labels).loss
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        scheduler.step()
        optimizer.zero_grad(set_to_none=True)
        if log is not None and step % 10 == 0:
            log(f"step {step} loss {loss.item():.3f}")
        if step >= recipe.warmup_min_steps and step % recipe.warmup_check_every == 0:
            accuracy = retrieval_accuracy(model, tokenizer, check)
            if log is not None:
                log(f"step {step} check accuracy {accuracy:.3f}")
            if accuracy >= recipe.warmup_target_accuracy:
                break
    model.eval()
    return {"warmup_steps": step, "warmup_check_accuracy": accuracy}
