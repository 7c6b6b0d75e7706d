"""Retrieval families, after RULER's needle-in-a-haystack tasks and key-value lookup.

- ``niah_single``: one needle ("one of the special magic numbers for quiet-river is: 4812093.") in prose;
- ``niah_multikey``: several needles with different keys; one is asked for, the others distract;
- ``niah_multivalue``: several values under one key; all are asked for;
- ``niah_multiquery``: several keys; the values of some of them are asked for;
- ``kv_lookup``: the whole context is key-value pairs of made-up words and numbers; one key is asked for.
"""

from __future__ import annotations

import random

from gpu_jobs.long_context.text import (
    CountTokens,
    Sample,
    distinct_words,
    fit,
    fresh_word,
    key_phrase,
    number,
    prose_line,
)

VALUE_DIGITS = 7
NEEDLE = "one of the magic numbers for {key} is: {value}."
HEAD_ONE = "a magic number is hidden in the text below. memorize it."
HEAD_MANY = "some magic numbers are hidden in the text below. memorize them."
TAIL_ONE = "what is the magic number for {key} in the text above?\nanswer:"
TAIL_MANY = "what are all the magic numbers for {keys} in the text above?\nanswer:"


def _needles(length: int) -> int:
    """RULER's four needles; two below 512 tokens, where four leave almost no haystack."""
    return 2 if length < 512 else 4


def _keys(rng: random.Random, count: int) -> list[str]:
    keys: list[str] = []
    while len(keys) < count:
        key = key_phrase(rng)
        if key not in keys:
            keys.append(key)
    return keys


def _values(rng: random.Random, count: int) -> list[str]:
    values: list[str] = []
    while len(values) < count:
        value = number(rng, VALUE_DIGITS)
        if value not in values:
            values.append(value)
    return values


def _listing(items: list[str]) -> str:
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " and " + items[-1]


def _haystack(
    rng: random.Random, *, length: int, count: CountTokens, pairs: list[tuple[str, str]], head: str, tail: str
) -> tuple[str, list[float]]:
    needles = [NEEDLE.format(key=key, value=value) for key, value in pairs]
    fitted = fit(
        head=head, tail=tail, needles=needles, filler=prose_line, target=length, count=count, rng=rng
    )
    return fitted.prompt, fitted.depths


def niah_single(rng: random.Random, length: int, count: CountTokens) -> Sample:
    (key,), (value,) = _keys(rng, 1), _values(rng, 1)
    prompt, depths = _haystack(
        rng, length=length, count=count, pairs=[(key, value)], head=HEAD_ONE, tail=TAIL_ONE.format(key=key)
    )
    return Sample(prompt=prompt, answer=value, metadata={"key": key, "depth": depths[0]})


def niah_multikey(rng: random.Random, length: int, count: CountTokens) -> Sample:
    many = _needles(length)
    keys, values = _keys(rng, many), _values(rng, many)
    asked = rng.randrange(many)
    prompt, depths = _haystack(
        rng,
        length=length,
        count=count,
        pairs=list(zip(keys, values, strict=True)),
        head=HEAD_MANY,
        tail=TAIL_ONE.format(key=keys[asked]),
    )
    return Sample(prompt=prompt, answer=values[asked], metadata={"key": keys[asked], "distractors": many - 1})


def niah_multivalue(rng: random.Random, length: int, count: CountTokens) -> Sample:
    (key,), values = _keys(rng, 1), _values(rng, _needles(length))
    prompt, depths = _haystack(
        rng,
        length=length,
        count=count,
        pairs=[(key, value) for value in values],
        head=HEAD_MANY,
        tail=TAIL_MANY.format(keys=key),
    )
    return Sample(
        prompt=prompt, answer=", ".join(values), answers=values, metadata={"key": key, "depths": depths}
    )


def niah_multiquery(rng: random.Random, length: int, count: CountTokens) -> Sample:
    many = _needles(length)
    keys, values = _keys(rng, many), _values(rng, many)
    asked = sorted(rng.sample(range(many), 2))
    wanted = [values[i] for i in asked]
    prompt, _ = _haystack(
        rng,
        length=length,
        count=count,
        pairs=list(zip(keys, values, strict=True)),
        head=HEAD_MANY,
        tail=TAIL_MANY.format(keys=_listing([keys[i] for i in asked])),
    )
    return Sample(
        prompt=prompt, answer=", ".join(wanted), answers=wanted, metadata={"keys": [keys[i] for i in asked]}
    )


def kv_lookup(rng: random.Random, length: int, count: CountTokens) -> Sample:
    """Every line a pair; keys are drawn without repeats, so the asked key occurs exactly once."""
    (key,) = distinct_words(rng, 1, syllables=4)
    value = number(rng, 6)
    taken = {key}

    def pair(line_rng: random.Random) -> str:
        return f"{fresh_word(line_rng, taken, syllables=4)}: {number(line_rng, 6)}"

    fitted = fit(
        head="below is a list of keys and their values, one pair a line.",
        tail=f"what is the value of the key {key}?\nanswer:",
        needles=[f"{key}: {value}"],
        filler=pair,
        target=length,
        count=count,
        rng=rng,
        trim=False,
    )
    return Sample(prompt=fitted.prompt, answer=value, metadata={"key": key, "depth": fitted.depths[0]})
