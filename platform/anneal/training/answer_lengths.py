"""A launch warning, not an error: ``max_completion_length`` cannot hold the data's longest reference answer.

A completion is cut at ``max_completion_length`` tokens, so a reference answer longer than that can never be
written in full and an exact check never passes on that row. The answers are counted in the chosen model's
own tokens (its folder's tokenizer.json; the tiny model counts one token a byte, which is exact for its
character tokenizer). Where no exact count is possible here (a hub id, a built-in model not imported yet, a
version of more than ``COUNT_ROWS_UP_TO`` rows) nothing is claimed. The longest answer of a version is
cached per version and model: versions are immutable.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

from django.conf import settings
from django.core.cache import cache

from anneal.datasets.models import DatasetVersion
from anneal.datasets.storage import read_rows
from gpu_jobs.memory import model_folder
from gpu_jobs.model_store import TINY
from gpu_jobs.prompt_length import TokenCodec, byte_codec, codec_from_folder

FIELD = "params.max_completion_length"
COUNT_ROWS_UP_TO = 100_000
CACHE_SECONDS = 7 * 24 * 3600


@dataclass(frozen=True)
class LongestAnswer:
    tokens: int
    row: int  # 1-based, in its version's rows


def _codec(model: str) -> TokenCodec | None:
    """An exact counter of ``model``'s tokens on this machine, or None."""
    folder = model_folder(model, store=settings.MODEL_STORE)
    codec = codec_from_folder(folder) if folder is not None else None
    if codec is None and model == TINY:
        codec = TokenCodec(encode=byte_codec().encode, decode=byte_codec().decode, exact=True)
    return codec if codec is not None and codec.exact else None


def _cache_key(version: DatasetVersion, model: str) -> str:
    digest = hashlib.sha256(model.encode()).hexdigest()[:16]
    return f"anneal:longest-answer:v1:{version.pk}:{version.sha256[:16]}:{digest}"


def longest_answer(version: DatasetVersion, model: str) -> LongestAnswer | None:
    """The longest reference answer of ``version`` in ``model``'s tokens; None when it has none or cannot be
    counted exactly here."""
    if version.row_count > COUNT_ROWS_UP_TO:
        return None
    key = _cache_key(version, model)
    cached = cache.get(key)
    if cached is not None:
        return LongestAnswer(**cached) if cached else None
    codec = _codec(model)
    if codec is None:
        return None  # not cached: the model may be imported later
    found: LongestAnswer | None = None
    for number, row in enumerate(read_rows(version.rows_path), start=1):
        answer = row.get("answer")
        if isinstance(answer, str) and answer:
            tokens = codec.count(answer)
            if found is None or tokens > found.tokens:
                found = LongestAnswer(tokens=tokens, row=number)
    cache.set(key, found.__dict__ if found else {}, CACHE_SECONDS)
    return found


def answer_length_warnings(
    *, versions: list[DatasetVersion], model: str, max_completion_length: int
) -> list[dict]:
    """[{"field", "message"}]: one warning when the longest answer of ``versions`` is longer than
    ``max_completion_length`` tokens of ``model``; [] otherwise or when it cannot be told."""
    worst: tuple[LongestAnswer, DatasetVersion] | None = None
    for version in versions:
        found = longest_answer(version, model)
        if found is not None and (worst is None or found.tokens > worst[0].tokens):
            worst = (found, version)
    if worst is None or worst[0].tokens <= max_completion_length:
        return []
    found, version = worst
    where = f"row {found.row}" if len(versions) == 1 else f"row {found.row} of {version}"
    return [
        {
            "field": FIELD,
            "message": f"the longest reference answer ({where}) is {found.tokens} tokens for {model}; "
            f"max completion length is {max_completion_length}: completions are cut before they can hold "
            f"it. Raise max completion length to at least {found.tokens}.",
        }
    ]


def spec_warnings(spec: dict) -> list[dict]:
    """The warnings of a job spec frozen by ``job_launch`` (its versions were checked against its team)."""
    if spec.get("environment") is not None:
        return []  # agent episodes: the environment's tests reward, not a reference answer
    ids = spec.get("dataset_versions") or [spec.get("dataset_version")]
    by_id = {v.pk: v for v in DatasetVersion.objects.filter(pk__in=ids).select_related("dataset")}
    versions = [by_id[pk] for pk in ids if pk in by_id]
    return answer_length_warnings(
        versions=versions, model=spec["model"], max_completion_length=int(spec["max_completion_length"])
    )
