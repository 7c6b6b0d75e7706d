"""The long-context families by name, each with its verifier spec, and the rows a pack request makes.

A row: ``prompt``, ``answer`` (the reference as text), ``answers`` (every required item, for families
whose answer is several items), ``domain`` (the family), ``length_bucket`` (the length setting it was
made for, in tokens), ``prompt_tokens`` (its measured length in the counting tokenizer) and ``metadata``
(what the generator chose: needle depth, key, question kind). A prompt never exceeds its length setting
and falls short of it by less than one filler line (at most ~100 tokens; a few hundred for repo_qa,
whose whole files are placed before the changelog closes the gap).

Rows are deterministic: row ``i`` of a family at a length depends only on (family, length, seed, i), so
asking for more rows keeps the first ones, and two packs made with one seed hold the same rows.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass

from gpu_jobs.long_context.aggregation import common_words, table_aggregate, variable_tracking
from gpu_jobs.long_context.needles import (
    kv_lookup,
    niah_multikey,
    niah_multiquery,
    niah_multivalue,
    niah_single,
)
from gpu_jobs.long_context.repo_qa import repo_qa
from gpu_jobs.long_context.text import CountTokens, LengthError, Sample, byte_count

MIN_LENGTH = 256
MAX_LENGTH = 131_072
# Bounds what one request stores: rows x length setting, in tokens (8M tiny tokens are 8 MB of prompts).
MAX_PACK_TOKENS = 8_000_000
MAX_FAMILY_ROWS = 5_000
STANDARD_LENGTHS = (256, 512, 1024, 2048, 4096, 8192, 16384, 32768, 65536, 131072)

_ONE_ANSWER = {
    "type": "exact_match",
    "reference_field": "answer",
    "extract": "last_line",
    "ignore_punctuation": True,
}
_ALL_ANSWERS = {"type": "keywords", "required_field": "answers", "scoring": "fraction", "whole_words": True}
_NUMBER = {"type": "numeric", "reference_field": "answer", "abs_tol": 0}
_PATH_OR_COUNT = {"type": "exact_match", "reference_field": "answer", "extract": "last_line"}


@dataclass(frozen=True)
class Family:
    name: str  # also the rows' domain
    summary: str
    make: Callable[[random.Random, int, CountTokens], Sample]
    spec: dict  # the verifier that scores a completion against the row's reference
    min_length: int = MIN_LENGTH


FAMILIES: dict[str, Family] = {
    family.name: family
    for family in (
        Family(
            "niah_single", "one needle (a magic number for a key) hidden in prose", niah_single, _ONE_ANSWER
        ),
        Family(
            "niah_multikey",
            "several needles with different keys; one is asked for",
            niah_multikey,
            _ONE_ANSWER,
        ),
        Family(
            "niah_multivalue",
            "several values under one key; all are asked for",
            niah_multivalue,
            _ALL_ANSWERS,
        ),
        Family(
            "niah_multiquery",
            "several needles; the values of two keys are asked for",
            niah_multiquery,
            _ALL_ANSWERS,
            min_length=512,
        ),
        Family("kv_lookup", "a long list of key-value pairs; one key is asked for", kv_lookup, _ONE_ANSWER),
        Family(
            "variable_tracking",
            "a long program of assignments; every variable one value reaches is asked for",
            variable_tracking,
            _ALL_ANSWERS,
        ),
        Family(
            "common_words",
            "a long word list; its most frequent words are asked for",
            common_words,
            _ALL_ANSWERS,
        ),
        Family(
            "table_aggregate",
            "a long table of orders; the sum of one item's units, or its row count, is asked for",
            table_aggregate,
            _NUMBER,
        ),
        Family(
            "repo_qa",
            "a python repository (the repo-fix pack's) given whole; a question about one of its files",
            repo_qa,
            _PATH_OR_COUNT,
            min_length=1024,
        ),
    )
}


class RequestError(ValueError):
    """A pack request that cannot be made; ``field`` names the setting at fault."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"{field}: {message}")
        self.field = field
        self.message = message


def check_request(*, families: list[str], lengths: list[int], size: int, seed: int) -> None:
    """RequestError naming the field when the request cannot make a pack."""
    if not families:
        raise RequestError("families", "choose at least one family")
    for name in families:
        if name not in FAMILIES:
            raise RequestError("families", f"unknown family '{name}'; the families: {', '.join(FAMILIES)}")
    if len(set(families)) != len(families):
        raise RequestError("families", "a family is listed twice")
    if not lengths:
        raise RequestError("lengths", "choose at least one length")
    for length in lengths:
        if not isinstance(length, int) or not MIN_LENGTH <= length <= MAX_LENGTH:
            raise RequestError(
                "lengths", f"{length!r} is not a whole number from {MIN_LENGTH} to {MAX_LENGTH:,}"
            )
    if len(set(lengths)) != len(lengths):
        raise RequestError("lengths", "a length is listed twice")
    for name in families:
        short = [length for length in lengths if length < FAMILIES[name].min_length]
        if short:
            raise RequestError(
                "lengths", f"{name} needs at least {FAMILIES[name].min_length} tokens (asked {short[0]})"
            )
    if not 1 <= size <= MAX_FAMILY_ROWS:
        raise RequestError("size", f"rows per family and length must be from 1 to {MAX_FAMILY_ROWS}")
    total = size * len(families) * sum(lengths)
    if total > MAX_PACK_TOKENS:
        raise RequestError(
            "size",
            f"{size} rows x {len(families)} families x {sum(lengths):,} tokens of lengths is {total:,} tokens; "
            f"a pack holds at most {MAX_PACK_TOKENS:,}: ask for fewer rows or shorter lengths",
        )
    if seed < 0:
        raise RequestError("seed", "must be 0 or more")


def family_row(*, family: str, length: int, seed: int, index: int, count: CountTokens = byte_count) -> dict:
    """Row ``index`` of ``family`` at ``length`` tokens (as ``count`` measures them)."""
    chosen = FAMILIES[family]
    rng = random.Random(f"{family}|{length}|{seed}|{index}")
    sample = chosen.make(rng, length, count)
    row: dict[str, object] = {"prompt": sample.prompt, "answer": sample.answer}
    if sample.answers is not None:
        row["answers"] = sample.answers
    row.update(
        domain=family,
        length_bucket=length,
        prompt_tokens=count(sample.prompt),
        metadata=sample.metadata,
    )
    return row


def generate_rows(
    *, families: list[str], lengths: list[int], size: int, seed: int, count: CountTokens = byte_count
) -> list[dict]:
    """``size`` rows of every family at every length, family by family, shortest length first.

    Preconditions: the request passes ``check_request`` (else KeyError or LengthError)."""
    return [
        family_row(family=family, length=length, seed=seed, index=index, count=count)
        for family in families
        for length in sorted(lengths)
        for index in range(size)
    ]


__all__ = [
    "FAMILIES",
    "MAX_LENGTH",
    "MIN_LENGTH",
    "STANDARD_LENGTHS",
    "Family",
    "LengthError",
    "RequestError",
    "check_request",
    "family_row",
    "generate_rows",
]
