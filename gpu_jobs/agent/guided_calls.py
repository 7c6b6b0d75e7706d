"""Guided tool calls (``environment.guided_calls``): while a turn writes its tool call, no token may close the
call's arguments (or the call) before every argument its tool requires is named, so a turn cannot end
``replace_text`` with ``old`` but no ``new``. Everything else is the model's own choice: its plan, the tool, the
argument values, an unknown tool or argument (those still come back as malformed calls).

``CallScan`` follows the turn's text character by character (the tool-call JSON after ``<tool>`` or
``<tool_call>``); ``CallGuard`` is a transformers LogitsProcessor that, for each episode of a batch, sets the
score of every token that would close too early to minus infinity, and of the end-of-turn token. Only tokens
holding a ``}`` or a ``<`` can close, so those are the only ones tried against the scan, and only while a call
is open and short of an argument.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from gpu_jobs.agent.tools import TOOLS

OPEN_TAGS = ("<tool>", "<tool_call>")
ARGUMENT_KEYS = ("arguments", "parameters")  # the names gpu_jobs.agent.tools.parse_turn reads


@dataclass
class CallScan:
    """Where a turn's text stands in its first tool call: before the open tag, in the call's JSON, or past it."""

    tail: str = ""  # the last characters before the open tag (to find it across tokens)
    in_call: bool = False
    done: bool = False
    in_string: bool = False
    escaped: bool = False
    string: str = ""
    # One entry per open object or array: ("{", is the next string a key?, the last key) or ("[", False, "").
    open: list[list] = field(default_factory=list)
    name: str | None = None  # the tool named, once its string is closed
    arguments_depth: int = 0  # len(open) while the arguments object is open; 0: not open
    arguments_text: bool = False  # "arguments" came as a JSON string (the OpenAI style): not followed
    keys: set[str] = field(default_factory=set)  # argument names written

    def missing(self) -> list[str]:
        """Required arguments of the named tool not written yet ([] while the tool is unknown)."""
        if self.name not in TOOLS or self.arguments_text:
            return []
        return [arg for arg in TOOLS[self.name][1] if arg not in self.keys]

    def guarding(self) -> bool:
        """Whether some next text could close too early: a call is open and its tool lacks an argument."""
        return self.in_call and not self.done and bool(self.missing())

    def feed(self, text: str) -> bool:
        """Reads `text`; False (the scan left part-way) at a character that would close the call too early:
        a "}" closing the arguments or the call, or a "<" (the closing tag) outside a string."""
        for char in text:
            if self.done:
                return True
            if not self.in_call:
                self._before_call(char)
            elif not self._in_call(char):
                return False
        return True

    def would_close_early(self, text: str) -> bool:
        """Whether `text`, written next, closes the arguments or the call before every required argument.

        Called for each closing token at every step, so it follows only what decides that (the strings, the
        depth, the argument names written) on the side, leaving the scan as it is."""
        missing = set(self.missing()) if self.in_call and not self.done else set()
        if not missing:
            return False
        in_string, escaped, depth, string = self.in_string, self.escaped, len(self.open), self.string
        key_next = bool(self.open) and self.open[-1][1]
        for char in text:
            if in_string:
                if escaped:
                    escaped, string = False, string + char
                elif char == "\\":
                    escaped = True
                elif char == '"':
                    in_string = False
                    if depth == self.arguments_depth and key_next:
                        missing.discard(string)
                else:
                    string += char
            elif char == '"':
                in_string, string = True, ""
            elif char in "{[":
                depth += 1
            elif char in "}]":
                if char == "}" and missing and depth in (1, self.arguments_depth):
                    return True
                depth, key_next = depth - 1, False
            elif char == "<":
                return bool(missing)
            elif char in ":," and depth == self.arguments_depth:
                key_next = char == ","
        return False

    def _before_call(self, char: str) -> None:
        self.tail = (self.tail + char)[-len(max(OPEN_TAGS, key=len)) :]
        if self.tail.endswith(OPEN_TAGS):
            self.in_call = True

    def _in_call(self, char: str) -> bool:
        if self.in_string:
            if self.escaped:
                self.escaped, self.string = False, self.string + char
            elif char == "\\":
                self.escaped = True
            elif char == '"':
                self.in_string = False
                self._string_done()
            else:
                self.string += char
            return True
        top = self.open[-1] if self.open else None
        if char == '"':
            self.in_string, self.string = True, ""
        elif char in "{[":
            opens_arguments = (
                char == "{"
                and len(self.open) == 1
                and top is not None
                and not top[1]
                and top[2] in ARGUMENT_KEYS
            )
            self.open.append(["{", True, ""] if char == "{" else ["[", False, ""])
            if opens_arguments:
                self.arguments_depth = len(self.open)
        elif char in "}]":
            if char == "}" and self.missing() and len(self.open) in (1, self.arguments_depth):
                return False
            if len(self.open) == self.arguments_depth:
                self.arguments_depth = 0
            if self.open:
                self.open.pop()
            self.done = not self.open
        elif char == "<":
            return not self.missing()
        elif top is not None and top[0] == "{" and char in ":,":
            top[1] = char == ","
        return True

    def _string_done(self) -> None:
        top = self.open[-1] if self.open else None
        if top is None or top[0] != "{":
            return
        if top[1]:
            top[2] = self.string
            if len(self.open) == self.arguments_depth:
                self.keys.add(self.string)
        elif len(self.open) == 1 and top[2] == "name":
            self.name = self.string
        elif len(self.open) == 1 and top[2] in ARGUMENT_KEYS:
            self.arguments_text = True


class CallGuard:
    """A LogitsProcessor for ``model.generate`` over a batch of turns that start at column `start` of
    input_ids (the contexts left-padded to one length): a token that would close a tool call's arguments, or
    the call, before its tool's required arguments are written gets a score of minus infinity."""

    def __init__(self, tokenizer: Any, *, start: int, rows: int) -> None:
        self.tokenizer = tokenizer
        self.start = start
        self.scans = [CallScan() for _ in range(rows)]
        self.read = 0  # generated tokens already fed to the scans
        self.closers = closing_tokens(tokenizer)
        self.quoted = [(token, text) for token, text in self.closers if '"' in text]

    def __call__(self, input_ids: Any, scores: Any) -> Any:
        generated = input_ids.shape[1] - self.start
        for row, scan in enumerate(self.scans):
            for token in input_ids[row, self.start + self.read : self.start + generated].tolist():
                scan.feed(self.tokenizer.decode([token], skip_special_tokens=False))
            if not scan.guarding():
                continue
            closers = self.quoted if scan.in_string else self.closers  # in a string, only a quote leaves it
            banned = [token for token, text in closers if scan.would_close_early(text)]
            if self.tokenizer.eos_token_id is not None:
                banned.append(self.tokenizer.eos_token_id)  # ending the turn ends the call too
            scores[row, banned] = float("-inf")
        self.read = generated
        return scores


_CLOSERS: dict[tuple[str, int], list[tuple[int, str]]] = {}


def closing_tokens(tokenizer: Any) -> list[tuple[int, str]]:
    """(id, text) of the vocabulary's tokens whose text holds a "}" or a "<": the only ones that can close a
    call (found once per tokenizer)."""
    key = (str(getattr(tokenizer, "name_or_path", "")), len(tokenizer))
    if key not in _CLOSERS:
        found = []
        for token, piece in enumerate(tokenizer.convert_ids_to_tokens(list(range(len(tokenizer))))):
            if piece is not None and ("}" in piece or "<" in piece):
                text = tokenizer.decode([token], skip_special_tokens=False)
                if "}" in text or "<" in text:
                    found.append((token, text))
        _CLOSERS[key] = found
    return _CLOSERS[key]
