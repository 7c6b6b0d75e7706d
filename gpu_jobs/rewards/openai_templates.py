"""Templates of OpenAI graders ({{item.X}}, {{sample.output_text}}, {{sample.output_json.a}}) read as what
Anneal specs name: a row field, the completion, a JSON field of the completion, or a fixed text."""

from __future__ import annotations

import re
from dataclasses import dataclass

TEMPLATE = re.compile(r"\{\{\s*(.*?)\s*\}\}")
_FIELD = re.compile(r"^[A-Za-z0-9_-]{1,200}$")


class GraderRefused(ValueError):
    """The grader cannot be carried over: ``field`` is the JSON path in the grader, ``message`` says why."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"{field}: {message}")
        self.field = field
        self.message = message


@dataclass(frozen=True)
class Ref:
    kind: str  # "completion", "json" (a field of the completion's JSON), "item" (a row field), "text"
    value: str = ""


def side_ref(text: str, where: str) -> Ref:
    """What a string_check or text_similarity side reads: one template alone, or plain text."""
    found = list(TEMPLATE.finditer(text))
    if not found:
        return Ref("text", text)
    if len(found) > 1 or found[0].group(0) != text.strip():
        raise GraderRefused(where, "mixes templates and text; Anneal compares one template or one fixed text")
    return variable(found[0].group(1), where)


def variable(name: str, where: str) -> Ref:
    parts = name.split(".")
    if parts[0] == "item":
        if len(parts) != 2 or not _FIELD.match(parts[1]):
            raise GraderRefused(
                where, f"{{{{{name}}}}}: only a top-level row field ({{{{item.field}}}}) maps to a column"
            )
        return Ref("item", parts[1])
    if parts[0] == "sample":
        if parts[1:] == ["output_text"]:
            return Ref("completion")
        if len(parts) >= 3 and parts[1] == "output_json" and all(parts[2:]):
            return Ref("json", ".".join(parts[2:]))
        raise GraderRefused(
            where,
            f"{{{{{name}}}}} is not carried over: use {{{{sample.output_text}}}} or {{{{sample.output_json.<field>}}}}",
        )
    raise GraderRefused(where, f"{{{{{name}}}}}: templates read only the item and sample namespaces")


def extract_fields_for(ref: Ref) -> dict:
    if ref.kind == "json":
        return {"extract": "json_field", "extract_json_field": ref.value}
    return {"extract": "none"}


def judge_text(text: str, where: str, fields: dict[str, str]) -> str:
    """``text`` with its templates as model_judge placeholders and its own braces doubled."""
    out, last = [], 0
    for found in TEMPLATE.finditer(text):
        out.append(text[last : found.start()].replace("{", "{{").replace("}", "}}"))
        ref = variable(found.group(1), where)
        if ref.kind == "completion":
            out.append("{completion}")
        elif ref.kind == "item":
            fields.setdefault(ref.value, where)
            if len(fields) > 1:
                first, second = list(fields)[:2]
                raise GraderRefused(
                    where, f"a judge fills in one row field; this grader reads item.{first} and item.{second}"
                )
            out.append("{reference}")
        else:
            raise GraderRefused(where, "the judge reads the completion as text: use {{sample.output_text}}")
        last = found.end()
    out.append(text[last:].replace("{", "{{").replace("}", "}}"))
    return "".join(out)


def content_text(content: object, where: str) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, dict):
        if content.get("type") in ("input_text", "output_text") and isinstance(content.get("text"), str):
            return content["text"]
        raise GraderRefused(where, f"only text reaches the judge, not {content.get('type')!r} content")
    if isinstance(content, list) and content:
        return "\n".join(content_text(part, f"{where}[{index}]") for index, part in enumerate(content))
    raise GraderRefused(where, "must be text or text content parts")
