"""The column mapping an expert chooses, and the check of one record against it. Django-free.

A canonical row has ``prompt`` (text, or chat messages: a list of {"role", "content"}), and when mapped
``answer`` (text), ``tests`` (a list of test strings), ``domain`` (text) and ``difficulty`` (a number or a
short label); the other columns are kept as they are (all of them, or those listed in ``metadata``), so
verifiers can read them.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import cached_property

from anneal import jsontext
from anneal.datasets.readers import FileRefused, RowError
from anneal.errors import NUL_MESSAGE, holds_nul
from gpu_jobs.rewards.python_tests import as_tests

ROLES = ("prompt", "answer", "tests", "domain", "difficulty")
PROMPT_FORMATS = ("auto", "text", "chat")
CHAT_ROLES = ("system", "user", "assistant", "tool")
MAX_DOMAIN_CHARS = 100
OPTIONAL_PER_ROW = ("difficulty",)  # a row may leave it out (or null, or an empty CSV cell)
MAX_LABEL_CHARS = 50

# Arrow types (as pyarrow prints them) a Parquet column may have for each role.
_TEXT = ("string", "large_string")
_NUMBER = ("int", "uint", "float", "double", "decimal", "halffloat")
_PARQUET_TYPES = {
    "prompt": (*_TEXT, "list<", "large_list<"),
    "answer": (*_TEXT, *_NUMBER),
    "tests": (*_TEXT, "list<", "large_list<"),
    "domain": _TEXT,
    "difficulty": (*_TEXT, *_NUMBER),
}
_PARQUET_WANTED = {
    "prompt": "text or a list of chat messages",
    "answer": "text or a number",
    "tests": "text or a list of text",
    "domain": "text",
    "difficulty": "a number or text",
}


class MappingError(ValueError):
    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"{field}: {message}")
        self.field = field
        self.message = message


@dataclass(frozen=True)
class Mapping:
    """Which column holds each role. Empty = not mapped (only ``prompt`` is required)."""

    prompt: str = "prompt"
    answer: str = ""
    tests: str = ""
    domain: str = ""
    difficulty: str = ""
    prompt_format: str = "auto"
    metadata: tuple[str, ...] | None = None  # None keeps every other column

    @classmethod
    def from_dict(cls, data: dict) -> Mapping:
        """MappingError naming the key when ``data`` is not a valid mapping."""
        if not isinstance(data, dict):
            raise MappingError("mapping", "must be an object of role -> column")
        known = {*ROLES, "prompt_format", "metadata"}
        unknown = sorted(set(data) - known)
        if unknown:
            raise MappingError("mapping", f"unknown key(s) {unknown}; known: {sorted(known)}")
        values: dict = {}
        for role in ROLES:
            column = data.get(role) or ""
            if not isinstance(column, str):
                raise MappingError(f"mapping.{role}", "must be a column name")
            values[role] = column.strip()
        if not values["prompt"]:
            raise MappingError("mapping.prompt", "choose the column that holds the prompt")
        used = [c for c in values.values() if c]
        for column in used:
            if used.count(column) > 1:
                raise MappingError("mapping", f"column '{column}' is mapped to more than one role")
        fmt = data.get("prompt_format") or "auto"
        if fmt not in PROMPT_FORMATS:
            raise MappingError("mapping.prompt_format", f"must be one of {', '.join(PROMPT_FORMATS)}")
        metadata = data.get("metadata")
        if metadata is not None:
            if isinstance(metadata, str):
                metadata = [c.strip() for c in metadata.split(",") if c.strip()]
            if not isinstance(metadata, list) or not all(isinstance(c, str) for c in metadata):
                raise MappingError("mapping.metadata", "must be a list of column names")
            metadata = tuple(metadata)
        return cls(**values, prompt_format=fmt, metadata=metadata)

    def to_dict(self) -> dict:
        out: dict = {role: getattr(self, role) for role in ROLES}
        out["prompt_format"] = self.prompt_format
        out["metadata"] = list(self.metadata) if self.metadata is not None else None
        return out

    def mapped(self) -> dict[str, str]:
        return self._mapped

    @cached_property
    def _mapped(self) -> dict[str, str]:
        # Computed once: canonical_row asks for it on every row of a million-row file.
        return {role: getattr(self, role) for role in ROLES if getattr(self, role)}

    @cached_property
    def mapped_columns(self) -> frozenset[str]:
        return frozenset(self._mapped.values())

    def check_columns(self, *, columns: list[str] | None, column_types: dict[str, str]) -> None:
        """FileRefused when the file's header (CSV, Parquet) lacks a mapped column or has a wrong type."""
        if columns is None:
            return
        listed = ", ".join(columns[:30]) + (" …" if len(columns) > 30 else "")
        for role, column in self.mapped().items():
            if column not in columns:
                raise FileRefused(
                    f"the mapping names column '{column}' for {role}, but the file has no such column "
                    f"(its columns: {listed})",
                    field=f"mapping.{role}",
                )
            kind = column_types.get(column)
            if kind is not None and not kind.startswith(_PARQUET_TYPES[role]):
                raise FileRefused(
                    f"column '{column}' (mapped to {role}) has Parquet type {kind}; "
                    f"{role} must be {_PARQUET_WANTED[role]}",
                    field=column,
                )
        for column in self.metadata or ():
            if column not in columns:
                raise FileRefused(
                    f"metadata column '{column}' is not in the file (its columns: {listed})",
                    field="mapping.metadata",
                )


def canonical_row(record: dict, *, mapping: Mapping, row: int) -> tuple[dict | None, list[RowError]]:
    """The canonical row for ``record``, or None with every problem found (one per field)."""
    errors: list[RowError] = []
    out: dict = {}
    for role, column in mapping.mapped().items():
        if role in OPTIONAL_PER_ROW and record.get(column) is None:
            continue
        if column not in record:
            errors.append(RowError(row, column, f"missing column '{column}' (mapped to {role})"))
            continue
        value, problem = _CHECKS[role](record[column], mapping)
        if problem:
            errors.append(RowError(row, column, problem))
        elif value is not None:
            out[role] = value
    # Judged only when neither the answer nor the tests already has an error of its own.
    answer_judged = mapping.answer and all(
        error.field not in (mapping.answer, mapping.tests) for error in errors
    )
    if answer_judged and not (out.get("answer") or "").strip() and not out.get("tests"):
        # An empty reference trains the model toward saying nothing (exact_match scores "" against it); a
        # row checked by its own tests (code in a mixed dataset) needs none.
        also = " (or tests)" if mapping.tests else ""
        errors.append(RowError(row, mapping.answer, f"answer is empty: give the reference answer{also}"))
    if errors:
        return None, errors
    mapped_columns = mapping.mapped_columns
    keep = record if mapping.metadata is None else {c: record.get(c) for c in mapping.metadata}
    for key, value in keep.items():
        if key not in mapped_columns and key not in out:
            out[key] = value
    return out, []


def nul_errors(out: dict, *, mapping: Mapping, row: int) -> list[RowError]:
    """One error per column of canonical row ``out`` that holds a NUL character: PostgreSQL cannot store it,
    and statistics, rollouts and test cases carry row values, so such a row is refused."""
    roles = mapping.mapped()
    return [RowError(row, roles.get(key, key), NUL_MESSAGE) for key, value in out.items() if holds_nul(value)]


def prompt_text(prompt: str | list) -> str:
    """The text a tokenizer counts for a prompt: chat messages' contents one per line."""
    if isinstance(prompt, str):
        return prompt
    return "\n".join(message["content"] for message in prompt)


def _number_as_text(value: object) -> object:
    if isinstance(value, int | float) and not isinstance(value, bool):
        return str(value)
    return value


def _check_prompt(value: object, mapping: Mapping) -> tuple[object, str]:
    fmt = mapping.prompt_format
    if isinstance(value, str) and fmt == "chat" and value.lstrip().startswith("["):
        try:
            value = jsontext.loads(value)  # CSV cells carry chat messages as JSON text
        except json.JSONDecodeError as exc:
            return None, f"prompt is not a valid JSON list of messages: {exc.msg}"
    value = _number_as_text(value)
    if isinstance(value, str):
        if fmt == "chat":
            return None, "prompt must be a list of chat messages ({role, content}), got text"
        if not value.strip():
            return None, "prompt is empty"
        return value, ""
    if isinstance(value, list):
        if fmt == "text":
            return None, "prompt must be text, got a list"
        return _check_messages(value)
    return None, f"prompt must be text or a list of chat messages, got {type(value).__name__}"


def _check_messages(messages: list) -> tuple[object, str]:
    if not messages:
        return None, "prompt has no messages"
    clean = []
    for index, message in enumerate(messages):
        if not isinstance(message, dict) or set(message) - {"role", "content", "name"}:
            return None, f"message {index + 1} must be an object with 'role' and 'content'"
        role, content = message.get("role"), message.get("content")
        if role not in CHAT_ROLES:
            return None, f"message {index + 1} has role {role!r}; roles: {', '.join(CHAT_ROLES)}"
        if not isinstance(content, str):
            return None, f"message {index + 1} content must be text, got {type(content).__name__}"
        clean.append({"role": role, "content": content})
    if not any(message["content"].strip() for message in clean):
        return None, "prompt is empty: every message's content is empty"
    return clean, ""


def _check_answer(value: object, mapping: Mapping) -> tuple[object, str]:
    value = _number_as_text(value)
    if value is None:
        return None, ""  # empty (null): judged with the row's tests in canonical_row
    if not isinstance(value, str):
        return None, f"answer must be text or a number, got {type(value).__name__}"
    return value, ""  # an empty one is judged with the row's tests in canonical_row


def _check_tests(value: object, mapping: Mapping) -> tuple[object, str]:
    """Assert scripts (text, or a list of them) or the JSON test forms python_tests runs ({stdin, stdout},
    {call, args, expected}, APPS {inputs, outputs}), as values or as JSON text (a CSV cell). Each must parse
    here: a test that cannot parse would score every completion 0 during training, with no hint why."""
    if isinstance(value, str) and value.lstrip().startswith(("[", "{")):
        try:
            value = jsontext.loads(value)
        except json.JSONDecodeError as exc:
            if _python_problem(value):  # not JSON, and not a script either
                return None, f"tests look like JSON but are not valid JSON: {exc.msg} (line {exc.lineno})"
    if isinstance(value, str):
        if not value.strip():
            return [], ""  # no tests for this row (a mixed dataset's rows without code)
        value = [value]
    if isinstance(value, list) and not value:
        return [], ""
    if not isinstance(value, list | dict):
        return None, f"tests must be text, a list of tests or an object, got {type(value).__name__}"
    tests, problem = as_tests(value)
    if problem:
        return None, f"tests: {problem}"
    for number, test in enumerate(tests, start=1):
        if test["kind"] == "assert" and (problem := _python_problem(test["source"])):
            where = f"test {number}" if len(tests) > 1 else "the test"
            return None, f"tests: {where} is not valid Python: {problem}"
    return value, ""


def _python_problem(source: str) -> str:
    """Why ``source`` does not compile ("" when it does). Compiling runs nothing."""
    try:
        compile(source, "<test>", "exec", dont_inherit=True)
    except SyntaxError as exc:
        return f"{exc.msg} (line {exc.lineno})"
    except (ValueError, MemoryError, RecursionError) as exc:  # NUL bytes, absurd nesting
        return str(exc) or type(exc).__name__
    return ""


def _check_domain(value: object, mapping: Mapping) -> tuple[object, str]:
    if not isinstance(value, str) or not value.strip():
        return None, "domain must be non-empty text"
    if len(value) > MAX_DOMAIN_CHARS:
        return None, f"domain is longer than {MAX_DOMAIN_CHARS} characters"
    return value.strip(), ""


def _check_difficulty(value: object, mapping: Mapping) -> tuple[object, str]:
    if isinstance(value, bool):
        return None, "difficulty must be a number or a short label, got a boolean"
    if isinstance(value, int | float):
        return value, ""
    if isinstance(value, str):
        text = value.strip()
        if not text:
            return None, ""  # an empty CSV cell: no difficulty for this row
        try:
            return (int(text) if text.lstrip("-").isdigit() else float(text)), ""
        except ValueError:
            pass
        if len(text) > MAX_LABEL_CHARS:
            return None, f"difficulty label is longer than {MAX_LABEL_CHARS} characters"
        return text, ""
    return None, f"difficulty must be a number or a short label, got {type(value).__name__}"


_CHECKS = {
    "prompt": _check_prompt,
    "answer": _check_answer,
    "tests": _check_tests,
    "domain": _check_domain,
    "difficulty": _check_difficulty,
}
