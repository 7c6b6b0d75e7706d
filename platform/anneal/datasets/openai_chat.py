"""OpenAI's chat-format JSONL (reinforcement fine-tuning's dataset format) taken as it is, with no mapping step.

A line is ``{"messages": [{"role", "content"}, ...], "reference_answer": ..., <any other fields>}``. When the
file's first record has ``messages`` and no column for the chosen prompt, the messages become the chat prompt,
every other field stays a row field (so a grader's ``{{item.reference_answer}}`` reads it), and a text or number
``reference_answer`` is also the row's ``answer`` for Anneal's own verifiers. Django-free, like the ingest.
"""

from __future__ import annotations

from anneal.datasets.mapping import Mapping, canonical_row
from anneal.datasets.readers import RowError

ROLES = {"system": "system", "developer": "system", "user": "user", "assistant": "assistant"}
TEXT_PARTS = ("text", "input_text")
MESSAGE_KEYS = ("role", "content", "name")


def chat_mapping(record: object, mapping: Mapping) -> Mapping | None:
    """The mapping for a file whose first record is ``record`` when it is in OpenAI's chat format and
    ``mapping`` names no prompt column it has; None otherwise (the file keeps ``mapping``).

    Roles mapped to columns the record lacks are dropped: the API's default answer column is "answer"."""
    if (
        not isinstance(record, dict)
        or mapping.prompt in record
        or not isinstance(record.get("messages"), list)
    ):
        return None
    kept = {
        role: column
        for role in ("answer", "tests", "domain", "difficulty")
        if (column := getattr(mapping, role)) and column in record and column != "messages"
    }
    return Mapping(prompt="messages", prompt_format="chat", metadata=mapping.metadata, **kept)


def chat_row(record: dict, *, mapping: Mapping, row: int) -> tuple[dict | None, list[RowError]]:
    """The canonical row for one chat-format record, or None with the problem naming row and message field."""
    messages, field, problem = _messages(record.get("messages"), "messages" in record)
    if problem:
        return None, [RowError(row, field, problem)]
    out, errors = canonical_row({**record, "messages": messages}, mapping=mapping, row=row)
    if out is not None and "answer" not in out:
        reference = record.get("reference_answer")
        if isinstance(reference, str) and reference.strip():
            out["answer"] = reference
        elif isinstance(reference, int | float) and not isinstance(reference, bool):
            out["answer"] = str(reference)
    return out, errors


def _messages(value: object, present: bool) -> tuple[list, str, str]:
    """(the messages as Anneal's chat prompt, "", "") or ([], the field at fault, what is wrong)."""
    if not present:
        return (
            [],
            "messages",
            "has no messages: the file's first row is OpenAI chat format, so every row must be",
        )
    if not isinstance(value, list):
        return [], "messages", f"must be a list of {{role, content}} messages, got {type(value).__name__}"
    if not value:
        return [], "messages", "has no messages"
    clean = []
    for index, message in enumerate(value):
        where = f"messages[{index}]"
        if not isinstance(message, dict):
            return [], where, "must be an object with role and content"
        for key in message:
            if key not in MESSAGE_KEYS:
                return [], f"{where}.{key}", "is not carried over (a message keeps role, content and name)"
        role = message.get("role")
        if role not in ROLES:
            return [], f"{where}.role", f"has role {role!r}; roles: {', '.join(ROLES)}"
        content, field, problem = _content(message.get("content"), f"{where}.content")
        if problem:
            return [], field, problem
        clean.append(
            {
                "role": ROLES[role],
                "content": content,
                **({"name": message["name"]} if "name" in message else {}),
            }
        )
    if clean[-1]["role"] == "assistant":
        return (
            [],
            f"messages[{len(clean) - 1}].role",
            (
                "the last message is the assistant's: in fine-tuning data the model writes that turn, so end with "
                "the user's message"
            ),
        )
    return clean, "", ""


def _content(content: object, where: str) -> tuple[str, str, str]:
    if content is None:
        return "", where, "has no content"
    if isinstance(content, str):
        return (content, "", "") if content.strip() else ("", where, "has no content (empty text)")
    if not isinstance(content, list) or not content:
        return "", where, f"must be text or a list of text parts, got {type(content).__name__}"
    texts = []
    for index, part in enumerate(content):
        kind = part.get("type") if isinstance(part, dict) else None
        if kind not in TEXT_PARTS or not isinstance(part.get("text"), str):
            return (
                "",
                f"{where}[{index}]",
                f"is {kind or type(part).__name__} content; only text parts are taken",
            )
        texts.append(part["text"])
    text = "".join(texts)
    return (text, "", "") if text.strip() else ("", where, "has no content (empty text)")
