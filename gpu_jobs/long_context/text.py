"""The building blocks every long-context family shares: words, filler prose, and fitting a prompt to a length.

All text is lowercase ASCII letters, digits, spaces and plain punctuation, so the tiny model's character
tokenizer (one token per byte) reads every prompt without an unknown symbol, and a length measured in
its tokens is simply the prompt's size in bytes.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass, field

CountTokens = Callable[[str], int]

ADJECTIVES = (
    "quiet brave calm dark eager fair gentle happy icy jolly kind lively mellow noble odd proud quick "
    "rapid silent tidy upper vivid warm young zesty amber bold clever dusty early fancy grand hollow "
    "lucky misty narrow olive plain rusty sandy tender violet wild"
).split()
NOUNS = (
    "river garden window lantern meadow harbor castle forest island valley mirror engine pencil ladder "
    "basket candle bridge cabinet desert falcon glacier hammer jacket kettle lemon marble needle orchard "
    "pillow quarry rocket saddle temple tunnel umbrella village wagon yacht anchor badge canyon dragon "
    "feather guitar helmet"
).split()
VERBS = (
    "carries follows finds keeps builds paints watches moves opens counts lifts sends holds visits shapes "
    "cleans guards mends"
).split()
PLACES = "market school station library kitchen workshop studio office farm harbor".split()
_SENTENCES = (
    "the {a} {n} {v} the {n2} near the {p}.",
    "every morning a {a} {n} {v} a {a2} {n2}.",
    "nobody knew why the {n} {v} the {a} {n2} at the {p}.",
    "in the {p} the {n} is {a} and the {n2} is {a2}.",
    "she said the {a} {n} always {v} the {n2} before noon.",
    "later that day the {p} was {a}, so the {n} {v} a {n2}.",
)
_CONSONANTS = "bcdfghjklmnprstvz"
_VOWELS = "aeiou"


class LengthError(ValueError):
    """The length setting is too short for the fixed parts of a prompt (instructions, needles, question)."""


def sentence(rng: random.Random) -> str:
    """One sentence of filler prose: plain words, no digits, no hyphens (so it never looks like a needle)."""
    return rng.choice(_SENTENCES).format(
        a=rng.choice(ADJECTIVES),
        a2=rng.choice(ADJECTIVES),
        n=rng.choice(NOUNS),
        n2=rng.choice(NOUNS),
        v=rng.choice(VERBS),
        p=rng.choice(PLACES),
    )


def prose_line(rng: random.Random) -> str:
    return " ".join(sentence(rng) for _ in range(rng.randint(2, 4)))


def pseudo_word(rng: random.Random, syllables: int = 3) -> str:
    """A pronounceable made-up word ("tovari"): 17 x 5 choices a syllable, so collisions are rare."""
    return "".join(rng.choice(_CONSONANTS) + rng.choice(_VOWELS) for _ in range(syllables))


def distinct_words(
    rng: random.Random, count: int, *, syllables: int = 3, avoid: set[str] | None = None
) -> list[str]:
    seen = set(avoid or ())
    words: list[str] = []
    while len(words) < count:
        word = pseudo_word(rng, syllables)
        if word not in seen:
            seen.add(word)
            words.append(word)
    return words


def fresh_word(rng: random.Random, taken: set[str], *, syllables: int = 3) -> str:
    """A made-up word not in ``taken``, which it joins (in place: long lists stay linear)."""
    word = pseudo_word(rng, syllables)
    while word in taken:
        word = pseudo_word(rng, syllables)
    taken.add(word)
    return word


def key_phrase(rng: random.Random) -> str:
    """A needle key as RULER draws them: adjective-noun."""
    return f"{rng.choice(ADJECTIVES)}-{rng.choice(NOUNS)}"


def number(rng: random.Random, digits: int) -> str:
    return str(rng.randint(10 ** (digits - 1), 10**digits - 1))


def byte_count(text: str) -> int:
    """Tokens of the tiny model's tokenizer: one per UTF-8 byte, exactly."""
    return len(text.encode("utf-8"))


@dataclass
class Fitted:
    prompt: str
    depths: list[float] = field(default_factory=list)  # where each needle landed, 0 = top, 1 = bottom


def fit(
    *,
    head: str,
    tail: str,
    needles: list[str],
    filler: Callable[[random.Random], str],
    target: int,
    count: CountTokens,
    rng: random.Random,
    trim: bool = True,
    keep_order: bool = False,
) -> Fitted:
    """``head``, then filler lines with the ``needles`` among them at random places, then ``tail``: as many
    filler lines as keep the prompt within ``target`` tokens. With ``trim`` the last filler line is cut at a
    word to close most of the remaining gap (prose only: a cut table row would be a wrong row).

    The count of the whole is the sum of its lines' counts, exact for the tiny tokenizer and close for
    merging ones (a line break is a boundary their pre-tokenizers keep); callers measure the result.
    Needles keep their order when ``keep_order`` (a chain of assignments must read top to bottom)."""
    fixed = count(head + "\n") + count(tail) + sum(count(needle + "\n") for needle in needles)
    room = target - fixed
    if room < 0:
        raise LengthError(f"the instructions, question and needles alone take {fixed} tokens, over {target}")
    lines: list[str] = []
    used = 0
    while True:
        line = filler(rng)
        size = count(line + "\n")
        if used + size > room:
            if trim:
                cut = _cut_to(line, room - used, count)
                if cut:
                    lines.append(cut)
            break
        lines.append(line)
        used += size
    slots = sorted(rng.randint(0, len(lines)) for _ in needles)
    placed = needles if keep_order else rng.sample(needles, len(needles))
    body: list[str] = []
    depths = []
    start = 0
    for slot, needle in zip(slots, placed, strict=True):
        body.extend(lines[start:slot])
        depths.append(round(slot / max(1, len(lines)), 3))
        body.append(needle)
        start = slot
    body.extend(lines[start:])
    prompt = head + "\n" + "".join(line + "\n" for line in body) + tail
    return Fitted(prompt=prompt, depths=depths)


def _cut_to(line: str, room: int, count: CountTokens) -> str:
    """The longest word prefix of ``line`` that, with its line break, fits ``room`` tokens ("" if none)."""
    words = line.split(" ")
    best = ""
    for end in range(1, len(words) + 1):
        candidate = " ".join(words[:end])
        if count(candidate + "\n") > room:
            break
        best = candidate
    return best


@dataclass
class Sample:
    """One generated task: the prompt, its reference answer (``answers`` lists every required item of a
    multi-item answer, which the ``keywords`` verifier checks), and what the generator chose."""

    prompt: str
    answer: str
    answers: list[str] | None = None
    metadata: dict = field(default_factory=dict)
