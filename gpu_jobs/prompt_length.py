"""Prompt length: counting a row's prompt in the model's tokens and fitting rows to ``max_prompt_length``.

One function, ``fit_rows``, applies a job's ``overflow_policy`` to rows whose prompt is longer than
``max_prompt_length`` tokens, and it is the only place that does: training (gpu_jobs.grpo), the held-out
evaluation (the same call, on the job's eval rows) and the deployment regression gate (workers.deploy_gate)
all go through it, so a prompt reads the same to the model in all three.

- ``refuse``: the rows are not used at all; ``PromptTooLong`` names how many prompts are over and the longest
  (the launch refuses the job with that message);
- ``drop``: those rows are left out and counted;
- ``truncate_left`` / ``truncate_right``: the prompt's first / last tokens are cut so it fits (left keeps the
  end, where a question usually is; right keeps the start);
- ``truncate_middle``: tokens are cut from the middle, keeping the first and the last halves of the budget
  (the start holds the instructions, the end the question).

Tokens are counted the way TRL feeds prompts to the model: the tokenizer's encoding without added special
tokens. Truncation decodes the kept token ids back to text (byte-level tokenizers may then re-encode a cut
character differently; the result is re-checked and cut again until it fits).

Torch-free: a ``TokenCodec`` wraps either a transformers tokenizer (the training child) or a ``tokenizers``
file (the web process, at launch, without loading transformers).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

OVERFLOW_POLICIES = ("refuse", "drop", "truncate_left", "truncate_right", "truncate_middle")
TRUNCATIONS = ("truncate_left", "truncate_right", "truncate_middle")


class PromptTooLong(ValueError):
    """Rows whose prompts exceed the limit under the ``refuse`` policy (or every row dropped); the message
    starts with the field (``max_prompt_length: ...``) and names the count, the limit and the longest."""


@dataclass(frozen=True)
class TokenCodec:
    """Counts, encodes and decodes text in one model's tokens; ``exact`` is False when the count is the
    UTF-8 size in bytes standing in for a tokenizer that is not on this machine (an upper bound for
    byte-level tokenizers, exact for the tiny model's one-token-a-byte tokenizer)."""

    encode: Callable[[str], list[int]]
    decode: Callable[[list[int]], str]
    exact: bool = True

    def count(self, text: str) -> int:
        return len(self.encode(text))


def codec_from_tokenizer(tokenizer: Any) -> TokenCodec:
    """A transformers tokenizer as TRL uses it for prompts: no special tokens added."""
    return TokenCodec(
        encode=lambda text: list(tokenizer(text, add_special_tokens=False)["input_ids"]),
        decode=lambda ids: tokenizer.decode(ids, skip_special_tokens=False),
    )


def byte_codec() -> TokenCodec:
    """The UTF-8 bytes as tokens: exact for the tiny model family, an upper bound for byte-level BPE."""
    return TokenCodec(
        encode=lambda text: list(text.encode("utf-8")),
        decode=lambda ids: bytes(ids).decode("utf-8", errors="ignore"),
        exact=False,
    )


def codec_from_folder(folder: Path) -> TokenCodec | None:
    """The codec of a model folder's ``tokenizer.json`` through the ``tokenizers`` library (no torch, no
    transformers); None when the folder has none."""
    path = Path(folder) / "tokenizer.json"
    if not path.is_file():
        return None
    from tokenizers import Tokenizer

    tokenizer = Tokenizer.from_file(str(path))
    if _is_byte_tokenizer(path):
        # The tiny model family: one token per byte. Counting bytes gives the same numbers without the
        # tokenizer's per-character work on prompts of 100k characters.
        return TokenCodec(encode=byte_codec().encode, decode=byte_codec().decode, exact=True)
    return TokenCodec(
        encode=lambda text: tokenizer.encode(text, add_special_tokens=False).ids,
        decode=lambda ids: tokenizer.decode(ids, skip_special_tokens=False),
    )


def _is_byte_tokenizer(path: Path) -> bool:
    """A BPE without merges over the 256 bytes (gpu_jobs.tiny_model.build_char_tokenizer)."""
    try:
        model = json.loads(path.read_text()).get("model") or {}
    except (OSError, ValueError):
        return False
    return model.get("type") == "BPE" and not model.get("merges") and len(model.get("vocab") or {}) <= 260


@dataclass
class FittedRows:
    """Rows after the policy: ``rows`` (the kept ones, truncated where the policy says), ``lengths`` (each
    kept prompt's length in tokens), ``dropped`` (indices into the input of the rows left out),
    ``truncated`` (how many were cut), ``longest_before`` (the longest prompt before fitting)."""

    rows: list[dict]
    lengths: list[int]
    dropped: list[int] = field(default_factory=list)
    truncated: int = 0
    longest_before: int = 0

    def summary(self) -> dict:
        return {
            "rows": len(self.rows),
            "dropped": len(self.dropped),
            "truncated": self.truncated,
            "longest_before": self.longest_before,
            "longest": max(self.lengths, default=0),
        }


def truncate_ids(ids: Sequence[int], keep: int, side: str) -> list[int]:
    """``keep`` of ``ids`` as ``side`` (one of TRUNCATIONS) says: left cuts the start, right the end, middle
    keeps ceil(keep/2) from the start and the rest from the end."""
    ids = list(ids)
    if len(ids) <= keep:
        return ids
    if side == "truncate_left":
        return ids[len(ids) - keep :] if keep else []
    if side == "truncate_right":
        return ids[:keep]
    if side == "truncate_middle":
        head = (keep + 1) // 2
        tail = keep - head
        return ids[:head] + (ids[len(ids) - tail :] if tail else [])
    raise ValueError(f"overflow_policy: {side!r} is not a truncation")


def truncate_text(text: str, *, codec: TokenCodec, max_length: int, side: str) -> str:
    """``text`` cut to at most ``max_length`` tokens of ``codec``; decoding may join or split a cut
    character, so the result is re-encoded and cut again (a few tokens shorter) until it fits."""
    ids = codec.encode(text)
    keep = max_length
    while True:
        out = codec.decode(truncate_ids(ids, keep, side))
        if codec.count(out) <= max_length or keep == 0:
            return out
        keep -= 1


def fit_rows(
    rows: Sequence[dict],
    *,
    codec: TokenCodec,
    max_length: int,
    policy: str,
    what: str = "rows",
) -> FittedRows:
    """Apply ``policy`` (one of OVERFLOW_POLICIES) to the rows whose prompt is longer than ``max_length``
    tokens; ``max_length`` 0: no limit (every row kept as it is). ``what`` names the rows in messages
    ("training rows", "held-out rows").

    Raises PromptTooLong under ``refuse`` when any prompt is over, and under ``drop`` when every row is.
    Rows are copied only when truncated; the others are the same dicts.
    """
    if policy not in OVERFLOW_POLICIES:
        raise ValueError(f"overflow_policy: must be one of {', '.join(OVERFLOW_POLICIES)}, got {policy!r}")
    lengths = [codec.count(str(row.get("prompt", ""))) for row in rows]
    longest = max(lengths, default=0)
    if not max_length:
        return FittedRows(rows=list(rows), lengths=lengths, longest_before=longest)
    over = [index for index, length in enumerate(lengths) if length > max_length]
    if not over:
        return FittedRows(rows=list(rows), lengths=lengths, longest_before=longest)
    if policy == "refuse":
        raise PromptTooLong(
            f"max_prompt_length: {len(over)} of {len(rows)} {what} have prompts longer than "
            f"max_prompt_length={max_length} tokens (longest {longest} tokens, first at row {over[0]}): raise "
            "max_prompt_length, or set overflow_policy to drop or truncate_left/right/middle"
        )
    if policy == "drop":
        if len(over) == len(rows):
            raise PromptTooLong(
                f"max_prompt_length: every one of the {len(rows)} {what} has a prompt longer than "
                f"max_prompt_length={max_length} tokens (shortest {min(lengths)}): nothing would be left"
            )
        dropped = set(over)
        return FittedRows(
            rows=[row for index, row in enumerate(rows) if index not in dropped],
            lengths=[length for index, length in enumerate(lengths) if index not in dropped],
            dropped=over,
            longest_before=longest,
        )
    fitted = list(rows)
    fitted_lengths = list(lengths)
    for index in over:
        prompt = truncate_text(str(rows[index]["prompt"]), codec=codec, max_length=max_length, side=policy)
        fitted[index] = {**rows[index], "prompt": prompt}
        fitted_lengths[index] = codec.count(prompt)
    return FittedRows(rows=fitted, lengths=fitted_lengths, truncated=len(over), longest_before=longest)


def fit_message(fitted: FittedRows, *, what: str, max_length: int, policy: str) -> str | None:
    """The log line a job writes about what the policy did, or None when it did nothing."""
    if fitted.dropped:
        return (
            f"{what}: dropped {len(fitted.dropped)} prompt(s) longer than max_prompt_length={max_length} "
            f"tokens (longest was {fitted.longest_before}); {len(fitted.rows)} left"
        )
    if fitted.truncated:
        return (
            f"{what}: cut {fitted.truncated} prompt(s) to max_prompt_length={max_length} tokens ({policy}; "
            f"longest was {fitted.longest_before})"
        )
    return None


def check_window(*, longest_prompt: int, max_completion_length: int, window: int | None, model: str) -> None:
    """ValueError naming both numbers when the longest prompt plus the completion exceeds the model's
    context window (None: unknown, not checked)."""
    if window is None or longest_prompt + max_completion_length <= window:
        return
    raise ValueError(
        f"max_prompt_length: the longest prompt ({longest_prompt} tokens) plus max_completion_length "
        f"({max_completion_length}) is {longest_prompt + max_completion_length} tokens, more than the "
        f"context window of model {model!r} ({window} tokens): set max_prompt_length to at most "
        f"{max(0, window - max_completion_length)} with a drop or truncate overflow_policy, or choose a model "
        "with a longer window"
    )
