"""JSON text from users, parsed with a bound on nesting.

``json.loads`` raises RecursionError, not a ValueError, for nesting near the interpreter's recursion limit,
and code that walks a parsed value recursively (the NUL check, spec validation, row statistics) fails well
before that: a few kilobytes of brackets would end as a server error. ``loads`` refuses nesting deeper than
``MAX_DEPTH`` with ``TooDeep``, a ``json.JSONDecodeError``, so every caller's existing handling of bad JSON
answers it.
"""

import json

MAX_DEPTH = 100  # chat messages nest 3 deep, a composite verifier spec about 6
TOO_DEEP = f"nested more than {MAX_DEPTH} levels deep (the limit)"


class TooDeep(json.JSONDecodeError):
    def __init__(self) -> None:
        super().__init__(TOO_DEEP, "", 0)
        self.args = (TOO_DEEP,)  # str() is the message alone, without JSONDecodeError's position


def loads(text: str | bytes | bytearray) -> object:
    """``json.loads(text)``; raises TooDeep when arrays and objects nest more than MAX_DEPTH levels."""
    try:
        value = json.loads(text)
    except RecursionError:
        raise TooDeep() from None
    brackets = (
        text.count("[") + text.count("{") if isinstance(text, str) else text.count(b"[") + text.count(b"{")
    )
    if brackets > MAX_DEPTH:  # cheap first: fewer brackets than the limit cannot nest past it
        check_depth(value)
    return value


def check_depth(value: object) -> None:
    """Raise TooDeep when ``value``'s lists and dicts nest more than MAX_DEPTH levels (walked without
    recursion)."""
    stack = [(value, 1)]
    while stack:
        item, level = stack.pop()
        if isinstance(item, dict):
            children = item.values()
        elif isinstance(item, list):
            children = item
        else:
            continue
        if level > MAX_DEPTH:
            raise TooDeep()
        stack.extend((child, level + 1) for child in children)
