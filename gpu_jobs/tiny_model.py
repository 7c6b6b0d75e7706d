"""The tiny model: a Qwen2-style causal LM small enough to train with RL on two CPU cores.

``ensure_tiny_model(store)`` builds it once into ``store / "tiny-v3"`` and returns that folder, which
``AutoModelForCausalLM.from_pretrained`` and ``AutoTokenizer.from_pretrained`` load like any Hugging Face
model folder. The build is seeded and needs no network:

1. a byte-level tokenizer without merges (one token per ASCII character; ``<pad>``, ``<eos>``, ``<unk>``),
   a ``PreTrainedTokenizerFast`` on a ``tokenizers`` BPE model;
2. a randomly initialised Qwen2 model (hidden 128, 4 layers, about 0.89M parameters);
3. a supervised warm-up on the train split of two-digit addition (``gpu_jobs.addition``) that stops as soon
   as greedy accuracy on a check slice of the train split reaches ``warmup_target_accuracy`` (seed 0: 300
   steps, 30 s on 2 idle cores; 53.5% on the check slice, 51% on 300 held-out sums).

Why stop on a measured accuracy rather than after a fixed number of steps: the warm-up crosses a sharp
transition (from ~10% to ~60% in under 100 steps), and where a fixed step count lands on it depends on
small differences between runs: a 400-step schedule decaying to 0 gave 59.5% on one run and 13.5% on
another. GRPO needs a start inside the band: from ~10% it has almost no signal and does not move, and a
model warmed up much further (2 layers, 46-71%, the earlier ``tiny-v2``) only pattern-matches, so RL
updates on some sums disturb the others and held-out accuracy falls. Four layers stopped on the target
learn under GRPO: the demo job takes held-out accuracy from 55% to 82% (bench/learning.py, README).

The folder also holds ``anneal_recipe.json``: the recipe, the seed, the steps the warm-up took and the
measured accuracies.
"""

from __future__ import annotations

import fcntl
import json
import os
import random
import shutil
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from gpu_jobs.addition import addition_rows, model_greedy_accuracy

# Bump the version whenever anything below changes what gets built (recipe, tokenizer, data split), so that
# stores holding an older build get a fresh folder instead of a stale model.
TINY_MODEL_NAME = "tiny-v3"
RECIPE_FILE = "anneal_recipe.json"

PAD_TOKEN, EOS_TOKEN, UNK_TOKEN = "<pad>", "<eos>", "<unk>"


@dataclass(frozen=True)
class TinyRecipe:
    """Architecture and warm-up settings; figures measured with them are in the module docstring."""

    hidden_size: int = 128
    intermediate_size: int = 384
    num_hidden_layers: int = 4
    num_attention_heads: int = 4
    max_position_embeddings: int = 512
    warmup_batch_size: int = 96
    # 20 steps of linear ramp, then constant: the warm-up stops on accuracy, not on a schedule's end.
    warmup_learning_rate: float = 2e-3
    warmup_target_accuracy: float = 0.5
    warmup_check_every: int = 10
    warmup_min_steps: int = 100
    warmup_max_steps: int = 1500
    check_rows: int = 200
    eval_rows: int = 300


RECIPE = TinyRecipe()


def tiny_model_dir(store: Path, *, seed: int = 0) -> Path:
    """Where ``ensure_tiny_model(store, seed=seed)`` keeps the model (it may not exist yet)."""
    name = TINY_MODEL_NAME if seed == 0 else f"{TINY_MODEL_NAME}-seed{seed}"
    return Path(store) / name


def ensure_tiny_model(store: Path, *, seed: int = 0) -> Path:
    """Return the folder of the tiny model in ``store``, building it first if it is not there.

    Idempotent and safe when several processes call it at once: builders serialise on an ``fcntl`` lock
    file in ``store`` and each build goes into a temporary folder that is renamed into place only when
    complete, so a folder at the returned path is always a whole model. A build killed half-way leaves a
    temporary folder that the next build removes.

    Preconditions: ``store`` is on a local file system (``flock`` is not reliable on every network one)
    and writable; it is created if missing.
    """
    return ensure_built(tiny_model_dir(store, seed=seed), lambda folder: _build(folder, seed=seed))


def ensure_built(target: Path, build: Callable[[Path], None]) -> Path:
    """``target`` once ``build(folder)`` has filled a temporary folder that is then renamed to it; the
    locking ``ensure_tiny_model`` describes, shared by every model of the tiny family."""
    if target.is_dir():
        return target
    store = target.parent
    store.mkdir(parents=True, exist_ok=True)
    with open(store / f".{target.name}.lock", "w") as lock_file:
        fcntl.flock(lock_file, fcntl.LOCK_EX)
        try:
            # Another process may have finished the build while this one waited for the lock.
            if target.is_dir():
                return target
            # Holding the lock means no build is running, so any temporary folder left is from a dead one.
            for stale in store.glob(f".{target.name}.tmp-*"):
                shutil.rmtree(stale, ignore_errors=True)
            building = store / f".{target.name}.tmp-{os.getpid()}"
            build(building)
            os.rename(building, target)
        finally:
            fcntl.flock(lock_file, fcntl.LOCK_UN)
    return target


def build_char_tokenizer() -> Any:
    """A byte-level tokenizer without merges: every ASCII character is one token, other characters one token
    per UTF-8 byte, so any text encodes and decodes back unchanged (no ``<unk>`` in practice).

    It is a ``Qwen2Tokenizer`` (a ``PreTrainedTokenizerFast`` on a ``tokenizers`` BPE model) because
    ``AutoTokenizer`` loads every folder whose config says ``model_type: qwen2`` with that class, whatever
    ``tokenizer_config.json`` names: a tokenizer built any other way would split text differently once
    reloaded. Ids: ``<pad>`` 0, ``<eos>`` 1, ``<unk>`` 2, byte ``b`` at ``3 + b``.
    """
    from transformers.models.qwen2.tokenization_qwen2 import Qwen2Tokenizer

    symbols = _byte_symbols()
    vocab = {PAD_TOKEN: 0, EOS_TOKEN: 1, UNK_TOKEN: 2} | {symbols[byte]: 3 + byte for byte in range(256)}
    return Qwen2Tokenizer(
        vocab=vocab, merges=[], unk_token=UNK_TOKEN, eos_token=EOS_TOKEN, pad_token=PAD_TOKEN
    )


def _byte_symbols() -> dict[int, str]:
    """GPT-2's byte -> printable character table, which the byte-level pre-tokenizer maps text through."""
    printable = [
        *range(ord("!"), ord("~") + 1),
        *range(ord("¡"), ord("¬") + 1),
        *range(ord("®"), ord("ÿ") + 1),
    ]
    table = {byte: chr(byte) for byte in printable}
    for offset, byte in enumerate(b for b in range(256) if b not in table):
        table[byte] = chr(256 + offset)
    return table


def _build(folder: Path, *, seed: int) -> None:
    from transformers import Qwen2Config, Qwen2ForCausalLM, set_seed

    started = time.perf_counter()
    set_seed(seed)
    tokenizer = build_char_tokenizer()
    config = Qwen2Config(
        vocab_size=len(tokenizer),
        hidden_size=RECIPE.hidden_size,
        intermediate_size=RECIPE.intermediate_size,
        num_hidden_layers=RECIPE.num_hidden_layers,
        num_attention_heads=RECIPE.num_attention_heads,
        num_key_value_heads=RECIPE.num_attention_heads,
        max_position_embeddings=RECIPE.max_position_embeddings,
        tie_word_embeddings=True,
        pad_token_id=tokenizer.pad_token_id,
        eos_token_id=tokenizer.eos_token_id,
        bos_token_id=tokenizer.eos_token_id,
    )
    model = Qwen2ForCausalLM(config)
    warm_up = _warm_up(model, tokenizer, seed=seed)

    model.generation_config.pad_token_id = tokenizer.pad_token_id
    model.generation_config.eos_token_id = tokenizer.eos_token_id
    folder.mkdir(parents=True)
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    recipe = {
        "name": TINY_MODEL_NAME,
        "seed": seed,
        "recipe": asdict(RECIPE),
        "parameters": sum(p.numel() for p in model.parameters()),
        **warm_up,
        "test_greedy_accuracy": model_greedy_accuracy(
            model, tokenizer, addition_rows(n=RECIPE.eval_rows, seed=seed, split="test")
        ),
        "build_seconds": round(time.perf_counter() - started, 2),
    }
    (folder / RECIPE_FILE).write_text(json.dumps(recipe, indent=2) + "\n")


def _warm_up(model: Any, tokenizer: Any, *, seed: int) -> dict:
    """Supervised next-token training on "a+b=" -> "sum<eos>", with the loss on the answer tokens only, until
    greedy accuracy on a check slice of the train split reaches the target (or ``warmup_max_steps``).
    Returns the steps taken and the last check's accuracy."""
    import torch

    rows = addition_rows(n=9000, seed=seed, split="train")
    check_rows = addition_rows(n=RECIPE.check_rows, seed=seed + 1, split="train")
    examples = []
    for row in rows:
        prompt_ids = tokenizer(row["prompt"])["input_ids"]
        answer_ids = tokenizer(row["answer"])["input_ids"] + [tokenizer.eos_token_id]
        examples.append((prompt_ids + answer_ids, [-100] * len(prompt_ids) + answer_ids))

    optimizer = torch.optim.AdamW(model.parameters(), lr=RECIPE.warmup_learning_rate, weight_decay=0.0)
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda step: min(1.0, (step + 1) / 20))
    sampler = random.Random(seed)
    check_accuracy = 0.0
    for step in range(1, RECIPE.warmup_max_steps + 1):
        model.train()
        batch = sampler.sample(examples, RECIPE.warmup_batch_size)
        width = max(len(ids) for ids, _ in batch)
        input_ids = torch.tensor([ids + [tokenizer.pad_token_id] * (width - len(ids)) for ids, _ in batch])
        labels = torch.tensor([labels + [-100] * (width - len(labels)) for _, labels in batch])
        attention_mask = torch.tensor([[1] * len(ids) + [0] * (width - len(ids)) for ids, _ in batch])
        loss = model(input_ids=input_ids, attention_mask=attention_mask, labels=labels).loss
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        scheduler.step()
        optimizer.zero_grad(set_to_none=True)
        if step >= RECIPE.warmup_min_steps and step % RECIPE.warmup_check_every == 0:
            check_accuracy = model_greedy_accuracy(model, tokenizer, check_rows)
            if check_accuracy >= RECIPE.warmup_target_accuracy:
                break
    model.eval()
    return {"warmup_steps": step, "warmup_check_accuracy": check_accuracy}
