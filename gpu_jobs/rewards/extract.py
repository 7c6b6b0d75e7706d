"""Getting the answer out of a completion before it is compared or run; shared by every verifier type."""

from __future__ import annotations

import json
import re

from gpu_jobs.rewards.base import SpecError, SpecField

EXTRACT_MODES = ("none", "last_line", "last_number", "boxed", "tag", "json_field", "first_line")
EXTRACT_HELP = {
    "none": "the whole completion",
    "last_line": "the last non-empty line",
    "last_number": "the last number (1,234 and 57.0 count as numbers)",
    "boxed": "the content of the last \\boxed{...}",
    "tag": "the content of the last <tag>...</tag> (the tag named in extract_tag)",
    "json_field": "a field of the last JSON object in the completion (named in extract_json_field)",
    "first_line": "the first non-empty line, stripped (a short answer a model goes on talking after)",
}

# Thousands separators only in well-formed groups, so "1,2,3" stays three numbers.
_NUMBER = re.compile(r"[-+]?(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?(?:[eE][-+]?\d+)?")
_FENCED_PYTHON = re.compile(r"```(?:python3?|py)[ \t]*\n(.*?)(?:```|\Z)", re.DOTALL | re.IGNORECASE)
_FENCED_JSON = re.compile(r"```(?:json)?[ \t]*\n(.*?)```", re.DOTALL | re.IGNORECASE)
_TAG_NAME = re.compile(r"^[A-Za-z][A-Za-z0-9_-]{0,40}$")


def extract_fields(*, default: str = "none") -> tuple[SpecField, ...]:
    """The spec fields every comparing type takes to choose what part of the completion is its answer."""
    return (
        SpecField(
            "extract",
            (str,),
            default=default,
            choices=EXTRACT_MODES,
            help="Which part of the completion is the answer: "
            + "; ".join(f"{mode}: {text}" for mode, text in EXTRACT_HELP.items()),
        ),
        SpecField("extract_tag", (str,), default="answer", help="The tag for extract=tag, e.g. answer."),
        SpecField(
            "extract_json_field",
            (str,),
            default="answer",
            help="The field for extract=json_field; a dotted path such as result.value reaches inside.",
        ),
    )


def check_extract_fields(spec: dict) -> None:
    """SpecError for a tag name that could not appear in a completion."""
    if spec.get("extract") == "tag" and not _TAG_NAME.match(spec.get("extract_tag", "")):
        raise SpecError("extract_tag", "must be a tag name of letters, digits, _ or - (e.g. answer)")
    if spec.get("extract") == "json_field" and not spec.get("extract_json_field", "").strip():
        raise SpecError("extract_json_field", "name the JSON field that holds the answer")


def extract_answer(text: str, *, mode: str, tag: str = "answer", json_field: str = "answer") -> str | None:
    """The part of `text` to compare, or None when there is none (no number, no tag, only blank lines)."""
    if mode == "none":
        return text
    if mode == "last_line":
        lines = [line for line in text.splitlines() if line.strip()]
        return lines[-1] if lines else None
    if mode == "first_line":
        lines = [line.strip() for line in text.splitlines() if line.strip()]
        return lines[0] if lines else None
    if mode == "last_number":
        numbers = _NUMBER.findall(text)
        return numbers[-1].replace(",", "") if numbers else None
    if mode == "boxed":
        return last_boxed(text)
    if mode == "tag":
        return last_tag(text, tag)
    if mode == "json_field":
        value = json_path(last_json_object(text), json_field)
        if value is None:
            return None
        return value if isinstance(value, str) else json.dumps(value)
    raise ValueError(f"unknown extract mode {mode!r}; known: {', '.join(EXTRACT_MODES)}")


def extract_from_spec(text: str, spec: dict) -> str | None:
    """extract_answer with the modes and names a normalised spec holds."""
    return extract_answer(
        text,
        mode=spec.get("extract", "none"),
        tag=spec.get("extract_tag", "answer"),
        json_field=spec.get("extract_json_field", "answer"),
    )


def last_boxed(text: str) -> str | None:
    """The content of the last \\boxed{...} (or \\fbox{...}), braces balanced; None when there is none."""
    start = max(text.rfind("\\boxed{"), text.rfind("\\fbox{"))
    if start < 0:
        return None
    index = text.index("{", start) + 1
    depth = 1
    for pos in range(index, len(text)):
        if text[pos] == "{":
            depth += 1
        elif text[pos] == "}":
            depth -= 1
            if depth == 0:
                return text[index:pos]
    return None  # unbalanced: the completion was cut off inside the box


def last_tag(text: str, tag: str) -> str | None:
    """The content of the last <tag>...</tag>; an unclosed last tag runs to the end (cut-off completions)."""
    open_tag, close_tag = f"<{tag}>", f"</{tag}>"
    start = text.rfind(open_tag)
    if start < 0:
        return None
    body = text[start + len(open_tag) :]
    end = body.find(close_tag)
    return body if end < 0 else body[:end]


def last_json_object(text: str) -> object | None:
    """The last JSON value in a fenced block, or the last {...} that parses; None when nothing parses."""
    for block in reversed(_FENCED_JSON.findall(text)):
        try:
            return json.loads(block)
        except ValueError:
            continue
    decoder = json.JSONDecoder()
    found = None
    pos = text.find("{")
    # Bounded: each step moves past at least one "{", so at most len(text) tries.
    while pos >= 0:
        try:
            value, end = decoder.raw_decode(text, pos)
        except ValueError:
            pos = text.find("{", pos + 1)
            continue
        found = value
        pos = text.find("{", end)
    return found


def json_path(value: object, path: str) -> object | None:
    """value["a"]["b"] for path "a.b" (list indices as numbers); None when a step is missing."""
    for step in path.split("."):
        if isinstance(value, dict) and step in value:
            value = value[step]
        elif isinstance(value, list) and step.lstrip("-").isdigit() and -len(value) <= int(step) < len(value):
            value = value[int(step)]
        else:
            return None
    return value


def extract_python_code(text: str) -> str:
    """The first ```python block (an unclosed one runs to the end: completions get cut off), else all of it."""
    match = _FENCED_PYTHON.search(text)
    return match.group(1) if match else text
