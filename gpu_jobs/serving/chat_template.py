"""How chat messages become the prompt text a model continues.

A tokenizer that carries a chat template (``tokenizer.chat_template``, e.g. SmolLM2-Instruct's) renders the
messages itself, with the generation prompt of the assistant appended. A model without one (the tiny model,
a base checkpoint) was trained on the prompt text alone, so a conversation of a single user message is sent
as that text, unchanged: ``[{"role": "user", "content": "12+45="}]`` becomes ``"12+45="``, and the model
answers as it learned to (a role-prefixed prompt is a text it never saw, and it answered "1" instead of
"57"). Any longer conversation gets this documented plain-text template: one line per message,
``role: content``, and the line ``assistant:`` for the model to continue::

    system: You add numbers.
    user: 12+30=
    assistant:

Roles are written as given (system, developer, user, assistant, tool). vLLM gets the same rule as a Jinja
template (``PLAIN_JINJA``, passed with ``--chat-template`` when the model folder has none).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

PLAIN_TEMPLATE_NAME = "plain-text"

PLAIN_JINJA = (
    "{%- if messages|length == 1 and messages[0]['role'] == 'user' -%}{{ messages[0]['content'] }}"
    "{%- else -%}{%- for m in messages -%}{{ m['role'] }}: {{ m['content'] }}\n{% endfor -%}assistant:"
    "{%- endif -%}"
)


def render_plain(messages: list[dict[str, str]]) -> str:
    if len(messages) == 1 and messages[0]["role"] == "user":
        return messages[0]["content"]
    lines = [f"{m['role']}: {m['content']}" for m in messages]
    lines.append("assistant:")
    return "\n".join(lines)


def has_chat_template(tokenizer: Any) -> bool:
    return bool(getattr(tokenizer, "chat_template", None))


def render_chat(tokenizer: Any, messages: list[dict[str, str]]) -> str:
    """The prompt text for ``messages``: the tokenizer's own template if it has one, else ``render_plain``."""
    if has_chat_template(tokenizer):
        return tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
    return render_plain(messages)


def folder_has_chat_template(folder: Path | str) -> bool | None:
    """Whether the model folder's tokenizer carries a chat template, read from its files without loading it
    (transformers keeps it in tokenizer_config.json, or beside it in chat_template.jinja/.json). None: the
    folder is not here to read."""
    path = Path(folder)
    if not path.is_dir():
        return None
    if (path / "chat_template.jinja").is_file() or (path / "chat_template.json").is_file():
        return True
    try:
        config = json.loads((path / "tokenizer_config.json").read_text())
    except (OSError, ValueError):
        return False
    return bool(isinstance(config, dict) and config.get("chat_template"))
