"""Guided tool calls (``environment.guided_calls``): while a turn writes its tool call and an argument its tool
requires is not written yet, the call cannot close, and its arguments object follows JSON's grammar: a quoted
name of a missing argument, ``:``, a quoted value, ``,``. So a turn can no longer end ``replace_text`` with
``old`` but no ``new``, nor write ``"old": "x" + y`` in its place. Everything else is the model's own choice: its
plan, the tool, the values, the order of the arguments; once every argument is named the call is free again.

``CallScan`` follows the turn's text character by character (the tool-call JSON after ``<tool>`` or
``<tool_call>``); ``CallGuard`` is a transformers LogitsProcessor that, for each episode of a batch, leaves the
score of every token that would break the rule at minus infinity (and of the end-of-turn token while a call is
open and short of an argument). Only tokens that can break it are tried against the scan: those holding ``}``
or ``<``, those holding a quote while in a string, and in the arguments object those whose first character
outside spaces is the one the grammar allows next.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from gpu_jobs.agent.tools import CALL_TAGS, TOOLS

OPEN_TAGS = tuple(f"<{tag}>" for tag in CALL_TAGS)
ARGUMENT_KEYS = ("arguments", "parameters")  # the names gpu_jobs.agent.tools.parse_turn reads
# In the arguments object, the character each phase takes (spaces aside): every argument's value is a string.
EXPECTED = {"key": '"', "colon": ":", "value": '"', "comma": ","}


@dataclass
class CallScan:
    """Where a turn's text stands in its first tool call: before the open tag, in the call's JSON, or past it."""

    tail: str = ""  # the last characters before the open tag (to find it across tokens)
    last: str = ""  # the last character read
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
    keys: set[str] = field(default_factory=set)  # arguments written, name and value
    # In the arguments object, what comes next: "key" (a quoted name), "colon", "value" (a quoted string), "comma".
    phase: str = "key"

    def missing(self) -> list[str]:
        """Required arguments of the named tool not written yet ([] while the tool is unknown)."""
        if self.name not in TOOLS or self.arguments_text:
            return []
        return [arg for arg in TOOLS[self.name][1] if arg not in self.keys]

    def guarding(self) -> bool:
        """Whether some next text could close too early: a call is open and its tool lacks an argument."""
        return self.in_call and not self.done and bool(self.missing())

    def feed(self, text: str) -> bool:
        """Reads `text`; False (the scan left part-way) at the first character that breaks the rule
        (``breaks``): one that closes the call too early or leaves the arguments' grammar."""
        for char in text:
            if self.done:
                return True
            if self.in_call and self.breaks(char):
                return False
            self.last = char
            if self.in_call:
                self._in_call(char)
            else:
                self._before_call(char)
        return True

    def next_characters(self) -> set[str] | None:
        """In the arguments object of a call short of an argument, the characters that may come next (spaces
        aside, outside strings); None elsewhere (in a value, outside the arguments), where only closing is
        kept from."""
        if not self.guarding() or not self.arguments_depth or len(self.open) != self.arguments_depth:
            return None
        if not self.in_string:
            return {EXPECTED[self.phase]}
        if self.phase != "key":
            return None
        written = self.string
        nexts = {
            name[len(written)] for name in self.missing() if name.startswith(written) and name != written
        }
        return nexts | ({'"'} if written in self.missing() else set())

    def breaks(self, text: str) -> bool:
        """Whether `text`, written next, breaks the rule while an argument is missing: closes the arguments or
        the call ("}" there, "<" outside a string), or leaves JSON's grammar in the arguments object.

        Called for many tokens at every step, so it follows only what decides that (the strings, the depth,
        the phase, the argument names) on the side, leaving the scan as it is."""
        missing = set(self.missing()) if self.in_call and not self.done else set()
        if not missing:
            return False
        in_string, escaped, depth, string = self.in_string, self.escaped, len(self.open), self.string
        phase, at = self.phase, self.arguments_depth
        named = self.open[-1][2] if at and depth == at else ""  # the argument whose value comes next
        for char in text:
            if not missing:
                return False
            in_arguments = at and depth == at
            if in_string:
                if escaped:
                    escaped, string = False, string + char
                elif char == "\\":
                    escaped = True
                elif char == '"':
                    in_string = False
                    if in_arguments and phase == "key":
                        if string not in missing:
                            return True
                        named, phase = string, "colon"
                    elif in_arguments:
                        missing.discard(named)
                        phase = "comma"
                else:
                    string += char
                    if in_arguments and phase == "key" and not any(m.startswith(string) for m in missing):
                        return True
                continue
            if in_arguments and not char.isspace():
                if char != EXPECTED[phase]:
                    return True
                phase = {"colon": "value", "comma": "key"}.get(phase, phase)
            if char == '"':
                in_string, string = True, ""
            elif char in "{[":
                depth += 1
            elif char in "}]":
                if char == "}" and depth in (1, at):
                    return True
                depth -= 1
            elif char == "<":
                return True
        return False

    def _before_call(self, char: str) -> None:
        self.tail = (self.tail + char)[-len(max(OPEN_TAGS, key=len)) :]
        if self.tail.endswith(OPEN_TAGS):
            self.in_call = True

    def _in_call(self, char: str) -> None:
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
            return
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
                self.arguments_depth, self.phase = len(self.open), "key"
        elif char in "}]":
            if len(self.open) == self.arguments_depth:
                self.arguments_depth = 0
            if self.open:
                self.open.pop()
            if self.arguments_depth and len(self.open) == self.arguments_depth:
                self.keys.add(self.open[-1][2])  # a nested value ended: its argument is written
                self.phase = "comma"
            self.done = not self.open
        elif top is not None and top[0] == "{" and char in ":,":
            top[1] = char == ","
            if len(self.open) == self.arguments_depth:
                self.phase = "value" if char == ":" else "key"

    def _string_done(self) -> None:
        top = self.open[-1] if self.open else None
        if top is None or top[0] != "{":
            return
        if len(self.open) == self.arguments_depth:
            if not top[1]:  # a value: its argument is written
                self.keys.add(top[2])
            self.phase = "colon" if top[1] else "comma"
        if top[1]:
            top[2] = self.string
        elif len(self.open) == 1 and top[2] == "name":
            self.name = self.string
        elif len(self.open) == 1 and top[2] in ARGUMENT_KEYS:
            self.arguments_text = True


class CallGuard:
    """A LogitsProcessor for ``model.generate`` over a batch of turns that start at column `start` of
    input_ids (the contexts left-padded to one length): while a row's call is short of an argument, every
    token that would break the rule (``CallScan.breaks``) gets a score of minus infinity."""

    def __init__(self, tokenizer: Any, *, start: int, rows: int) -> None:
        self.tokenizer = tokenizer
        self.start = start
        self.scans = [CallScan() for _ in range(rows)]
        self.read = 0  # generated tokens already fed to the scans
        self.vocabulary = Vocabulary.of(tokenizer)

    def __call__(self, input_ids: Any, scores: Any) -> Any:
        generated = input_ids.shape[1] - self.start
        for row, scan in enumerate(self.scans):
            for token in input_ids[row, self.start + self.read : self.start + generated].tolist():
                scan.feed(self.vocabulary.text(token, self.tokenizer))
            if not scan.guarding():
                continue
            words = self.vocabulary
            nexts = scan.next_characters()
            if nexts is not None:  # in the arguments object: only these characters can come next
                allowed = [t for c in nexts for t, text in words.starting.get(c, []) if not scan.breaks(text)]
                if not allowed:  # no token of this vocabulary writes what comes next
                    continue  # a row with every token masked would leave nothing to sample: it stays the model's
                if not scan.in_string and not scan.last.isspace():
                    allowed += words.spaces  # one run of spaces between two characters, not more
                keep = scores[row, allowed].clone()
                scores[row, :] = float("-inf")
                scores[row, allowed] = keep
                continue
            tried = words.quoted if scan.in_string else words.closers  # in a value only a quote leaves it
            banned = [token for token, text in tried if scan.breaks(text)]
            if self.tokenizer.eos_token_id is not None:
                banned.append(self.tokenizer.eos_token_id)  # ending the turn ends the call too
            scores[row, banned] = float("-inf")
        self.read = generated
        return scores


@dataclass
class Vocabulary:
    """A tokenizer's tokens as the guard tries them: (id, text) pairs, grouped once per tokenizer."""

    texts: list[str]  # by id
    closers: list[tuple[int, str]]  # holding "}" or "<"
    quoted: list[tuple[int, str]]  # holding a quote
    starting: dict[str, list[tuple[int, str]]]  # by the first character that is not a space
    spaces: list[int]  # spaces alone

    @classmethod
    def of(cls, tokenizer: Any) -> Vocabulary:
        key = (str(getattr(tokenizer, "name_or_path", "")), len(tokenizer))
        if key not in _VOCABULARIES:
            every = [
                (token, tokenizer.decode([token], skip_special_tokens=False))
                for token in range(len(tokenizer))
            ]
            starting: dict[str, list[tuple[int, str]]] = {}
            for token, text in every:
                if text.strip():
                    starting.setdefault(text.lstrip()[0], []).append((token, text))
            _VOCABULARIES[key] = cls(
                texts=[text for _, text in every],
                closers=[(t, text) for t, text in every if "}" in text or "<" in text],
                quoted=[(t, text) for t, text in every if '"' in text],
                starting=starting,
                spaces=[t for t, text in every if text and not text.strip()],
            )
        return _VOCABULARIES[key]

    def text(self, token: int, tokenizer: Any) -> str:
        """The token's text (decoded once with the vocabulary; a model's extra ids past it, now)."""
        if token < len(self.texts):
            return self.texts[token]
        return tokenizer.decode([token], skip_special_tokens=False)


_VOCABULARIES: dict[tuple[str, int], Vocabulary] = {}
