"""The tools an agent may call, their JSON schemas, and the plain-text tool-call format with its parser.

Plain-text format (used when the model's tokenizer has no chat template that renders tools): the model
writes any text (its plan), then one call as JSON between tags::

    I will look at the module first.
    <tool>{"name": "read_file", "arguments": {"path": "calc.py"}}</tool>

``<tool_call>...</tool_call>`` (the tag chat templates such as Qwen's and SmolLM2's use) is accepted too, and
``arguments`` may also be a JSON string holding the object (the OpenAI style). One call per turn: text after
the first closing tag is ignored. Anything else (no tag, bad JSON, an unknown tool, a missing or mistyped
argument) is a malformed call: the episode goes on with an error observation saying what was wrong.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field

# name -> (description, {argument: (json type, description)}); every listed argument is required.
TOOLS: dict[str, tuple[str, dict[str, tuple[str, str]]]] = {
    "run_shell": ("Run a shell command in the repository folder.", {"command": ("string", "sh command")}),
    "run_python": ("Run a Python program in the repository folder.", {"code": ("string", "Python source")}),
    "read_file": ("Read a file of the repository.", {"path": ("string", "relative path")}),
    "write_file": (
        "Create or overwrite a file of the repository.",
        {"path": ("string", "relative path"), "content": ("string", "the whole new text")},
    ),
    "replace_text": (
        "Replace the one place where a file holds the old text with the new text.",
        {
            "path": ("string", "relative path"),
            "old": ("string", "the lines to replace, copied from the file"),
            "new": ("string", "the lines to put there"),
        },
    ),
    "apply_patch": (
        "Apply a unified diff (as git diff or diff -u write it) to the repository.",
        {"diff": ("string", "the unified diff")},
    ),
    "run_tests": ("Run the task's tests and show the result.", {}),
    "finish": ("End the episode: the repository is final.", {}),
}
TOOL_NAMES = tuple(TOOLS)
CALL_TAGS = ("tool", "tool_call")  # a call is written between <tag> and </tag>
_TAG = re.compile(rf"<({'|'.join(CALL_TAGS)})>(.*?)</\1>", re.DOTALL)
_OPEN = re.compile(rf"<({'|'.join(CALL_TAGS)})>")


@dataclass
class ToolCall:
    name: str
    arguments: dict[str, str] = field(default_factory=dict)

    def to_dict(self) -> dict:
        return {"name": self.name, "arguments": dict(self.arguments)}

    def plain_text(self) -> str:
        """This call in the plain-text format (what a scripted policy writes)."""
        return f"<tool>{json.dumps(self.to_dict())}</tool>"


@dataclass
class Parsed:
    """What the model's turn said: its plan (the text before the call) and the call, or why there is none."""

    plan: str
    call: ToolCall | None
    error: str = ""
    raw_call: str = ""  # the text between the tags, as written


def tool_schemas() -> list[dict]:
    """The tools as JSON schemas, the form `tokenizer.apply_chat_template(tools=...)` accepts."""
    schemas = []
    for name, (description, arguments) in TOOLS.items():
        properties = {arg: {"type": kind, "description": text} for arg, (kind, text) in arguments.items()}
        schemas.append(
            {
                "type": "function",
                "function": {
                    "name": name,
                    "description": description,
                    "parameters": {"type": "object", "properties": properties, "required": list(arguments)},
                },
            }
        )
    return schemas


def format_instructions() -> str:
    """How to call tools in the plain-text format, for the system prompt."""
    lines = [
        "Call exactly one tool per turn: write your plan, then "
        '<tool>{"name": TOOL, "arguments": {...}}</tool>. Tools:'
    ]
    for name, (description, arguments) in TOOLS.items():
        args = ", ".join(arguments) or "no arguments"
        lines.append(f"- {name}({args}): {description}")
    return "\n".join(lines)


def parse_turn(text: str) -> Parsed:
    """The plan and the first tool call of a model turn; never raises."""
    match = _TAG.search(text)
    if match is None:
        opened = _OPEN.search(text)
        plan = text[: opened.start()] if opened else text
        why = "the tool call has no closing tag" if opened else "no tool call found"
        return Parsed(plan.strip(), None, f'{why}; write <tool>{{"name": ..., "arguments": {{...}}}}</tool>')
    plan, raw = text[: match.start()].strip(), match.group(2).strip()
    call, error = _call_from_json(raw)
    return Parsed(plan, call, error, raw)


def _call_from_json(raw: str) -> tuple[ToolCall | None, str]:
    try:
        data = json.loads(raw)
    except json.JSONDecodeError as exc:
        return None, f"the tool call is not valid JSON ({exc.msg} at character {exc.pos})"
    except ValueError as exc:  # valid JSON the parser still refuses: an integer past Python's digit limit
        return None, f"the tool call is not valid JSON ({exc})"
    if not isinstance(data, dict):
        return None, 'the tool call must be a JSON object {"name": ..., "arguments": {...}}'
    name = data.get("name")
    if name not in TOOLS:
        return None, f"unknown tool {name!r}; tools: {', '.join(TOOL_NAMES)}"
    arguments = data.get("arguments", data.get("parameters", {}))
    if isinstance(arguments, str):
        try:
            arguments = json.loads(arguments) if arguments.strip() else {}
        except ValueError:
            return None, f"{name}: arguments must be a JSON object"
    if arguments is None:
        arguments = {}
    if not isinstance(arguments, dict):
        return None, f"{name}: arguments must be a JSON object"
    wanted = TOOLS[name][1]
    missing = [arg for arg in wanted if arg not in arguments]
    if missing:
        return None, f"{name}: missing argument {missing[0]!r}"
    unknown = sorted(set(arguments) - set(wanted))
    if unknown:
        return None, f"{name}: unknown argument {unknown[0]!r}; it takes {', '.join(wanted) or 'none'}"
    for arg in wanted:
        if not isinstance(arguments[arg], str):
            return None, f"{name}: argument {arg!r} must be a string"
    return ToolCall(name, {arg: arguments[arg] for arg in wanted}), ""
