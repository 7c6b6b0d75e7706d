"""reward_model: a sequence-classification model of the model store scores each (prompt, answer) pair.

For open-ended answers no rule checks: a reward model (any local Hugging Face folder whose architecture is a
`…ForSequenceClassification` with one label, trained on preferences) reads the row's prompt and the answer
and gives a logit; the score is its sigmoid (or, with `normalise: none`, the logit itself, for composites
that weigh it). Loaded through sentence-transformers' CrossEncoder (torch, which the rest of
gpu_jobs.rewards must not import: loaded on the first score, once per process and model), batched.

The model is named like a job's base model: a folder in the model store (ANNEAL_MODEL_STORE, which the
platform's settings set for every process) by its name, or by its absolute path inside the store. Where it
runs: wherever the verifier scores, the gpu-worker during training; the web process scores previews and
probes only with a model up to ANNEAL_PREVIEW_MODEL_MAX_MB (anneal.verifiers.services), so a large one
never loads next to the web pages.
"""

from __future__ import annotations

import json
import math
import os
import threading
from pathlib import Path

from gpu_jobs.rewards.base import Scorer, ScoreResult, SpecError, SpecField
from gpu_jobs.rewards.extract import check_extract_fields, extract_fields, extract_from_spec

NORMALISE = ("sigmoid", "none")
WEIGHT_SUFFIXES = (".safetensors", ".bin", ".pt", ".pth")
_models: dict[str, object] = {}
_models_lock = threading.Lock()


def model_store() -> Path:
    store = os.environ.get("ANNEAL_MODEL_STORE", "").strip()
    if not store:
        raise SpecError("model", "no model store is configured here (ANNEAL_MODEL_STORE)")
    return Path(store)


def model_folder(name: str) -> Path:
    """The folder of reward model `name` (a store folder's name or an absolute path in the store); SpecError
    naming the field when it is not a one-label sequence-classification model there."""
    store = model_store()
    if not name.strip():
        raise SpecError("model", "must name a reward model folder of the model store")
    # As a job's base model is found (gpu_jobs.model_store, which loads torch to build its built-in models):
    # a folder of the store by name, or by an absolute path that stays inside the store.
    folder = Path(name).resolve() if name.startswith("/") else store / name
    if name.startswith("/") and store.resolve() not in folder.parents:
        raise SpecError(
            "model",
            f"{name!r} is outside the model store {store}: copy the model folder into the store and name it",
        )
    if "/" in name.strip("/") and not name.startswith("/") or not (folder / "config.json").is_file():
        known = (
            sorted(p.name for p in store.iterdir() if (p / "config.json").is_file()) if store.is_dir() else []
        )
        raise SpecError(
            "model",
            f"no model folder {name!r} in the model store {store}; its folders: {', '.join(known) or 'none'}",
        )
    try:
        config = json.loads((folder / "config.json").read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise SpecError("model", f"cannot read {name}'s config.json: {exc}") from None
    architectures = [str(a) for a in config.get("architectures") or []]
    if not any(a.endswith("ForSequenceClassification") for a in architectures):
        found = ", ".join(architectures) or "none named"
        raise SpecError("model", f"{name!r} is not a sequence-classification model (architectures: {found})")
    labels = len(config.get("id2label") or {}) or int(config.get("num_labels") or 2)
    if labels != 1:
        raise SpecError(
            "model", f"{name!r} has {labels} labels; a reward model gives one score (num_labels 1)"
        )
    return folder


def weights_mb(folder: Path) -> float:
    """The size of a model folder's weight files, in MB (what loading it costs in memory, about)."""
    files = [path for path in folder.iterdir() if path.is_file() and path.suffix in WEIGHT_SUFFIXES]
    return sum(path.stat().st_size for path in files) / 2**20


def _cross_encoder(folder: Path, max_length: int):
    key = f"{folder}|{max_length}"
    with _models_lock:
        if key not in _models:
            os.environ.setdefault("HF_HUB_OFFLINE", "1")
            from sentence_transformers import CrossEncoder

            _models[key] = CrossEncoder(str(folder), num_labels=1, max_length=max_length, device="cpu")
        return _models[key]


class RewardModel(Scorer):
    type_name = "reward_model"
    summary = "Reward model: a sequence-classification model from the model store scores prompt and answer"
    example = {"type": "reward_model", "model": "my-reward-model"}
    fields = (
        SpecField(
            "model",
            (str,),
            help="A folder of the model store (its name, or its absolute path there) holding a Hugging Face "
            "sequence-classification model with one label.",
        ),
        SpecField("prompt_field", (str,), default="prompt", help="The column the model reads as the prompt."),
        SpecField(
            "normalise",
            (str,),
            default="sigmoid",
            choices=NORMALISE,
            help="sigmoid: the logit squashed into 0..1 (a score); none: the raw logit (for a composite).",
        ),
        SpecField("batch_size", (int,), default=16, help="Pairs scored per forward pass (1 to 256)."),
        SpecField(
            "max_length",
            (int,),
            default=512,
            help="Tokens of prompt and answer read together (at most 8192).",
        ),
        *extract_fields(default="none"),
    )

    @classmethod
    def normalise_spec(cls, spec: dict) -> dict:
        clean = super().normalise_spec(spec)
        check_extract_fields(clean)
        model_folder(clean["model"])
        if not 1 <= clean["batch_size"] <= 256:
            raise SpecError("batch_size", "must be between 1 and 256")
        if not 16 <= clean["max_length"] <= 8192:
            raise SpecError("max_length", "must be between 16 and 8192 tokens")
        return clean

    def score(self, row: dict, completion: str) -> ScoreResult:
        return self.score_batch([row], [completion])[0]

    def score_batch(self, rows: list[dict], completions: list[str]) -> list[ScoreResult]:
        if len(rows) != len(completions):
            raise ValueError(f"{len(rows)} rows but {len(completions)} completions")
        results: list[ScoreResult | None] = [None] * len(rows)
        pairs: list[tuple[int, str, str]] = []
        field = self.spec["prompt_field"]
        for index, (row, completion) in enumerate(zip(rows, completions, strict=True)):
            prompt = row.get(field) if isinstance(row, dict) else None
            answer = extract_from_spec(completion, self.spec) if isinstance(completion, str) else None
            if not isinstance(prompt, str):
                results[index] = ScoreResult(0.0, {"logit": 0.0}, f"row has no {field!r} text for the model")
            elif answer is None or not answer.strip():
                results[index] = ScoreResult(0.0, {"logit": 0.0}, "empty answer")
            else:
                pairs.append((index, prompt, answer))
        if pairs:
            try:
                model = _cross_encoder(model_folder(self.spec["model"]), self.spec["max_length"])
                logits = model.predict(
                    [(prompt, answer) for _, prompt, answer in pairs],
                    batch_size=self.spec["batch_size"],
                    activation_fn=_identity,
                    show_progress_bar=False,
                )
                values: list[float | None] = [float(value) for value in list(logits)]
                error = ""
            except Exception as exc:  # a missing or broken model must not stop training: 0 with the reason
                values = [None] * len(pairs)
                error = f"reward model error: {type(exc).__name__}: {exc}"[:300]
            for (index, _, _), logit in zip(pairs, values, strict=True):
                results[index] = self._result(logit, error)
        return [result for result in results if result is not None]  # every index is filled above

    def _result(self, logit: float | None, error: str) -> ScoreResult:
        if logit is None or not math.isfinite(logit):
            return ScoreResult(0.0, {"logit": 0.0}, error or "the reward model gave no finite score")
        score = (
            logit
            if self.spec["normalise"] == "none"
            else 1.0 / (1.0 + math.exp(-max(-60.0, min(60.0, logit))))
        )
        return ScoreResult(score, {"logit": logit}, f"reward model {self.spec['model']}: logit {logit:.3f}")


def _identity(values):
    return values
