"""Tracing and aggregation families, after RULER's variable tracking and common-words extraction, and the
"check the numbers in a long report" task: a sum or a count over the matching rows of a long table.

- ``variable_tracking``: a long program of assignments; one chain passes a value from variable to
  variable; every variable the value reaches is asked for. Other lines assign other values or copy
  other variables, so following the chain means reading it, not spotting one line;
- ``common_words``: a long list of words; a few occur many times, the rest once; the frequent ones are
  asked for;
- ``table_aggregate``: a long table of rows (id, region, item, units); the sum of the units, or the
  count of the rows, of one item is asked for.
"""

from __future__ import annotations

import random

from gpu_jobs.long_context.text import (
    CountTokens,
    Sample,
    distinct_words,
    fit,
    fresh_word,
    number,
    pseudo_word,
)

CHAIN_HOPS = 4
REGIONS = "north south east west central coastal".split()


def variable_tracking(rng: random.Random, length: int, count: CountTokens) -> Sample:
    value = number(rng, 5)
    chain = distinct_words(rng, CHAIN_HOPS + 1)
    taken = set(chain)
    others: list[str] = []

    def other_assignment(line_rng: random.Random) -> str:
        name = fresh_word(line_rng, taken)
        if others and line_rng.random() < 0.4:
            line = f"var {name} = var {line_rng.choice(others)}"
        else:
            other_value = number(line_rng, 5)
            while other_value == value:
                other_value = number(line_rng, 5)
            line = f"var {name} = {other_value}"
        others.append(name)
        return line

    needles = [f"var {chain[0]} = {value}"] + [
        f"var {chain[i + 1]} = var {chain[i]}" for i in range(CHAIN_HOPS)
    ]
    fitted = fit(
        head="track the chains of variable assignment in the program below.",
        tail=f"question: which variables are assigned the value {value}?\nanswer:",
        needles=needles,
        filler=other_assignment,
        target=length,
        count=count,
        rng=rng,
        trim=False,
        keep_order=True,
    )
    return Sample(
        prompt=fitted.prompt,
        answer=", ".join(chain),
        answers=chain,
        metadata={"value": value, "hops": CHAIN_HOPS},
    )


def _common_shape(length: int) -> tuple[int, int]:
    """(how many frequent words, how often each occurs): fewer and rarer in short prompts, where the list
    has room for few entries; RULER's ten words, thirty times each, from 16k tokens."""
    words = 3 if length < 1024 else 5 if length < 4096 else 10
    return words, min(30, max(3, length // 512))


def common_words(rng: random.Random, length: int, count: CountTokens) -> Sample:
    words, times = _common_shape(length)
    common = distinct_words(rng, words)
    taken = set(common)

    def rare(line_rng: random.Random) -> str:
        return fresh_word(line_rng, taken)

    fitted = fit(
        head="below is a list of words, one a line. memorize the ones that appear most often.",
        tail=f"question: what are the {words} most common words in the list above?\nanswer:",
        needles=[word for word in common for _ in range(times)],
        filler=rare,
        target=length,
        count=count,
        rng=rng,
        trim=False,
    )
    return Sample(
        prompt=fitted.prompt,
        answer=", ".join(common),
        answers=common,
        metadata={"common_words": words, "occurrences": times},
    )


def table_aggregate(rng: random.Random, length: int, count: CountTokens) -> Sample:
    item = pseudo_word(rng, 2)
    matches = rng.randint(2, 3 if length < 512 else 5)  # few rows fit in the shortest prompts
    units = [rng.randint(1, 99) for _ in range(matches)]
    ids: set[str] = set()

    def row(line_rng: random.Random, *, of: str | None = None, amount: int | None = None) -> str:
        row_id = number(line_rng, 6)
        while row_id in ids:
            row_id = number(line_rng, 6)
        ids.add(row_id)
        name = of
        while name is None or (of is None and name == item):
            name = pseudo_word(line_rng, 2)
        amount = amount if amount is not None else line_rng.randint(1, 99)
        return f"| {row_id} | {line_rng.choice(REGIONS)} | {name} | {amount} |"

    needles = [row(rng, of=item, amount=amount) for amount in units]
    kind = rng.choice(("sum", "count"))
    question = (
        f"what is the sum of the units of the rows whose item is {item}?"
        if kind == "sum"
        else f"how many rows have the item {item}?"
    )
    fitted = fit(
        head="a sales report, one row per order.\n| id | region | item | units |",
        tail=f"question: {question}\nanswer:",
        needles=needles,
        filler=row,
        target=length,
        count=count,
        rng=rng,
        trim=False,
    )
    answer = str(sum(units) if kind == "sum" else matches)
    return Sample(prompt=fitted.prompt, answer=answer, metadata={"item": item, "kind": kind, "rows": matches})
