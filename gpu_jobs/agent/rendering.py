"""How an agent's conversation becomes text and tokens: plain ``<tool>`` tags, or the model's chat template.

Used by the rollouts (gpu_jobs.agent.training) and the supervised warm-up (gpu_jobs.agent.warmup), which must
tokenise a conversation exactly alike: the warm-up teaches the format the rollouts then sample.
"""

from __future__ import annotations

from typing import Any

from gpu_jobs.agent.spec import EnvironmentSpec
from gpu_jobs.agent.tools import tool_schemas


class PlainRenderer:
    """The plain-text conversation: the system and user messages, then the turns as written, observations
    in <observation> tags. Prefix-stable: rendering more messages only appends text."""

    instructions = True  # the system message carries the plain-text tool instructions (format_instructions)

    def __init__(self, tokenizer: Any) -> None:
        self.tokenizer = tokenizer

    @property
    def tag(self) -> str:
        """The tag the model writes its call in: ``<tool>`` as the instructions say, else the template's."""
        return "tool" if self.instructions else "tool_call"

    @property
    def format_name(self) -> str:
        return "plain"

    def text(self, messages: list[dict]) -> str:
        out = []
        for message in messages:
            role, content = message["role"], str(message.get("content", ""))
            if role == "system":
                out.append(content + "\n\n")
            elif role == "user":
                out.append(content + "\n")
            elif role == "assistant":
                out.append(content)
            else:
                out.append(self.observation_text(content))
        return "".join(out)

    def observation_text(self, content: str) -> str:
        return f"\n<observation>\n{content}\n</observation>\n"

    def ids(self, messages: list[dict]) -> list[int]:
        return self.encode(self.text(messages))

    def observation_ids(self, before: list[dict], message: dict) -> list[int]:
        return self.encode(self.observation_text(str(message["content"])))

    def encode(self, text: str) -> list[int]:
        return list(self.tokenizer(text, add_special_tokens=False)["input_ids"])


class ChatRenderer(PlainRenderer):
    """The model's chat template, with the tools passed to it (its own tool-call format, ``<tool_call>``).

    A template that renders the conversation but not the tools (SmolLM2's drops ``tools``) would leave the model
    without a word about them: with ``tools_in_template`` False the system message carries the plain-text
    instructions and the model writes ``<tool>`` as they say, inside its own chat turns.
    """

    def __init__(self, tokenizer: Any, *, tools_in_template: bool = True) -> None:
        super().__init__(tokenizer)
        self.instructions = not tools_in_template

    @property
    def format_name(self) -> str:
        return "chat_template+instructions" if self.instructions else "chat_template"

    def text(self, messages: list[dict]) -> str:
        return self._render(messages, generation_prompt=messages[-1]["role"] != "assistant")

    def observation_ids(self, before: list[dict], message: dict) -> list[int]:
        # What the template puts after the model's own text: its end-of-turn marker (unless the model's EOS
        # already is it), the tool message, and the next turn's opening. `before` ends with the model's turn.
        prefix = self._render(before[:-1], generation_prompt=True) + str(before[-1]["content"])
        with_tool = self._render([*before, message], generation_prompt=True)
        start = len(prefix) if with_tool.startswith(prefix) else _common_prefix(prefix, with_tool)
        text = with_tool[start:]
        eos = self.tokenizer.eos_token
        if eos and before[-1].get("ended_with_eos") and text.startswith(eos):
            text = text[len(eos) :]
        return self.encode(text)

    def _render(self, messages: list[dict], *, generation_prompt: bool) -> str:
        return self.tokenizer.apply_chat_template(
            messages, tools=tool_schemas(), tokenize=False, add_generation_prompt=generation_prompt
        )


def make_renderer(tokenizer: Any, spec: EnvironmentSpec) -> PlainRenderer:
    """The chat template when the tokenizer has one that renders tool messages (or when asked), else plain.
    When the template renders tool messages but not the tools themselves, the instructions go in the system
    message (ChatRenderer's ``tools_in_template``)."""
    if spec.tool_format == "plain" or not getattr(tokenizer, "chat_template", None):
        if spec.tool_format == "chat_template":
            raise ValueError("environment.tool_format: the model's tokenizer has no chat template")
        return PlainRenderer(tokenizer)
    renderer = ChatRenderer(tokenizer)
    probe = [
        {"role": "system", "content": "s"},
        {"role": "user", "content": "u"},
        {"role": "assistant", "content": "a"},
        {"role": "tool", "name": "run_tests", "content": "o"},
    ]
    try:
        renderer.text(probe)
    except Exception as exc:  # noqa: BLE001 - a template without tool support raises anything
        if spec.tool_format == "chat_template":
            raise ValueError(
                f"environment.tool_format: the chat template cannot render tools ({exc})"
            ) from None
        return PlainRenderer(tokenizer)
    shown = renderer.text(probe[:2])
    if not all(schema["function"]["name"] in shown for schema in tool_schemas()):
        return ChatRenderer(tokenizer, tools_in_template=False)
    return renderer


def _common_prefix(a: str, b: str) -> int:
    n = 0
    for x, y in zip(a, b, strict=False):
        if x != y:
            break
        n += 1
    return n
