"""The tiny long-context model: an 8,192-token window on the tiny family's shape and tokenizer, small enough
for a 4,096-token forward pass on a CPU, and a built-in model of the store."""

import torch

from gpu_jobs.long_context import FAMILIES, family_row
from gpu_jobs.memory import model_shape
from gpu_jobs.model_store import TINY_LONG, check_model, list_models
from gpu_jobs.tiny_long_model import RECIPE, build_tiny_long_model, tiny_long_model_dir


def test_a_4096_token_pack_prompt_runs_through_the_model_on_the_cpu():
    model, tokenizer = build_tiny_long_model()
    assert model.config.max_position_embeddings >= 4096
    assert sum(p.numel() for p in model.parameters()) < 1_100_000
    # Every family's prompt is one token a byte, none unknown: the packs' text fits the character tokenizer.
    for family in FAMILIES:
        prompt = family_row(family=family, length=4096, seed=3, index=0)["prompt"]
        ids = tokenizer(prompt)["input_ids"]
        assert len(ids) == len(prompt.encode()) and tokenizer.unk_token_id not in ids
    row = family_row(family="niah_single", length=4096, seed=3, index=0)
    ids = tokenizer(row["prompt"] + " " + row["answer"], return_tensors="pt")["input_ids"]
    assert 4000 <= ids.shape[1] <= 4096 + 8
    with torch.no_grad():
        logits = model(input_ids=ids).logits
    assert logits.shape == (1, ids.shape[1], len(tokenizer)) and torch.isfinite(logits).all()


def test_the_store_offers_it_by_name_with_its_window_before_it_is_built(tmp_path):
    assert check_model(TINY_LONG, store=tmp_path, allow_hub=False) == "built-in"
    listed = {m.name: m for m in list_models(tmp_path)}
    assert not listed[TINY_LONG].ready and not tiny_long_model_dir(tmp_path).exists()
    assert model_shape(TINY_LONG, store=tmp_path).window == RECIPE.max_position_embeddings == 8192
