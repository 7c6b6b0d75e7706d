"""Getting the answer out of a completion before it is compared or run."""

from __future__ import annotations

import re

EXTRACT_MODES = ("none", "last_line", "last_number")

# Thousands separators only in well-formed groups, so "1,2,3" stays three numbers.
_NUMBER = re.compile(r"[-+]?(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?(?:[eE][-+]?\d+)?")
_FENCED_PYTHON = re.compile(r"```(?:python3?|py)[ \t]*\n(.*?)(?:```|\Z)", re.DOTALL | re.IGNORECASE)


def extract_answer(text: str, *, mode: str) -> str | None:
    """The part of `text` to compare, or None when there is none (no number, only blank lines)."""
    if mode == "none":
        return text
    if mode == "last_line":
        lines = [line for line in text.splitlines() if line.strip()]
        return lines[-1] if lines else None
    if mode == "last_number":
        numbers = _NUMBER.findall(text)
        return numbers[-1].replace(",", "") if numbers else None
    raise ValueError(f"unknown extract mode {mode!r}; known: {', '.join(EXTRACT_MODES)}")


def extract_python_code(text: str) -> str:
    """The first ```python block (an unclosed one runs to the end: completions get cut off), else all of it."""
    match = _FENCED_PYTHON.search(text)
    return match.group(1) if match else text
