"""How chat messages become the prompt text a model continues.

A tokenizer that carries a chat template (``tokenizer.chat_template``, e.g. SmolLM2-Instruct's) renders the
messages itself, with the generation prompt of the assistant appended. A model without one (the tiny model,
a base checkpoint) gets this documented plain-text template: one line per message, ``role: content``, and
the line ``assistant:`` for the model to continue::

    system: You add numbers.
    user: 12+30=
    assistant:

so a request ``[{"role": "user", "content": "12+30="}]`` becomes ``"user: 12+30=\\nassistant:"``. Roles are
written as given (system, developer, user, assistant, tool).
"""

from __future__ import annotations

from typing import Any

PLAIN_TEMPLATE_NAME = "plain-text"


def render_plain(messages: list[dict[str, str]]) -> str:
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
