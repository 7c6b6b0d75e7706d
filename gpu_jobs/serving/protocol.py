"""The OpenAI request shapes this server accepts, checked field by field before any work is queued.

Every mistake a caller can make becomes an ``ApiError``: an HTTP 4xx with OpenAI's error object
``{"error": {"message", "type", "param", "code"}}`` naming the field and the limit, never a 500.
Parameters the CPU engine does not implement (logprobs, penalties, tools, ...) are refused by name when set
to anything but their neutral value, rather than silently ignored.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

CHAT_ROLES = ("system", "developer", "user", "assistant", "tool")
MAX_STOP_SEQUENCES = 4
# Per request, prompts x n: every sequence costs a full generation on a CPU.
MAX_SEQUENCES = 16
# OpenAI's default for /v1/completions; chat completions default to the room left in the context window.
COMPLETIONS_DEFAULT_MAX_TOKENS = 16


class ApiError(Exception):
    """A request the server refuses, rendered as OpenAI's error object with ``status``."""

    def __init__(
        self,
        message: str,
        *,
        status: int = 400,
        type: str = "invalid_request_error",  # noqa: A002 - OpenAI's field name
        param: str | None = None,
        code: str | None = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.status = status
        self.type = type
        self.param = param
        self.code = code

    def body(self) -> dict[str, Any]:
        return {"error": {"message": self.message, "type": self.type, "param": self.param, "code": self.code}}


@dataclass(frozen=True)
class SamplingParams:
    max_tokens: int
    temperature: float = 1.0
    top_p: float = 1.0
    stop: tuple[str, ...] = ()
    seed: int | None = None
    ignore_eos: bool = False  # vLLM's extension: generate max_tokens tokens (benchmarks, load tests)

    @property
    def greedy(self) -> bool:
        return self.temperature == 0.0


@dataclass
class ParsedRequest:
    """A checked request: the prompts as text or token ids, how many choices each, how to sample."""

    kind: str  # "chat" or "completion"
    prompts: list[str | list[int]]
    n: int
    stream: bool
    max_tokens: int | None  # None: as many as the context window leaves
    temperature: float
    top_p: float
    stop: tuple[str, ...]
    seed: int | None
    ignore_eos: bool = False
    messages: list[dict[str, str]] = field(default_factory=list)


def _number(
    body: dict, name: str, default: float, low: float, high: float, *, low_open: bool = False
) -> float:
    value = body.get(name)
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ApiError(f"'{name}' must be a number, got {type(value).__name__}", param=name)
    if value > high or value < low or (low_open and value == low):
        bound = f"({low}, {high}]" if low_open else f"[{low}, {high}]"
        raise ApiError(f"'{name}' must be in {bound}, got {value}", param=name)
    return float(value)


def _integer(body: dict, name: str, *, low: int, high: int | None = None) -> int | None:
    value = body.get(name)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        raise ApiError(f"'{name}' must be an integer, got {type(value).__name__}", param=name)
    if value < low or (high is not None and value > high):
        limit = f">= {low}" if high is None else f"between {low} and {high}"
        raise ApiError(f"'{name}' must be {limit}, got {value}", param=name)
    return value


def _refuse_unsupported(body: dict, kind: str) -> None:
    neutral: dict[str, tuple[Any, ...]] = {
        "presence_penalty": (0,),
        "frequency_penalty": (0,),
        "logit_bias": ({},),
        "best_of": (1,),
        "suffix": ("",),
        "echo": (False,),
        "tools": ([],),
        "functions": ([],),
        "top_logprobs": (0,),
        "logprobs": (False,),  # also 0: False == 0
    }
    for name, allowed in neutral.items():
        value = body.get(name)
        if value is not None and value not in allowed:
            raise ApiError(
                f"'{name}' is not supported by this server; leave it out (got {value!r})",
                param=name,
                code="unsupported_parameter",
            )
    response_format = body.get("response_format")
    if response_format is not None and response_format != {"type": "text"}:
        raise ApiError(
            "'response_format' other than {'type': 'text'} is not supported by this server",
            param="response_format",
            code="unsupported_parameter",
        )


def _common(body: dict, kind: str) -> dict[str, Any]:
    _refuse_unsupported(body, kind)
    stream = body.get("stream", False)
    if stream is None:
        stream = False
    if not isinstance(stream, bool):
        raise ApiError("'stream' must be true or false", param="stream")
    stream_options = body.get("stream_options")
    if stream_options is not None and not isinstance(stream_options, dict):
        raise ApiError("'stream_options' must be an object", param="stream_options")
    stop = body.get("stop")
    if stop is None:
        stops: tuple[str, ...] = ()
    elif isinstance(stop, str):
        stops = (stop,) if stop else ()
    elif isinstance(stop, list) and all(isinstance(s, str) for s in stop):
        if len(stop) > MAX_STOP_SEQUENCES:
            raise ApiError(
                f"'stop' holds at most {MAX_STOP_SEQUENCES} sequences, got {len(stop)}", param="stop"
            )
        stops = tuple(s for s in stop if s)
    else:
        raise ApiError("'stop' must be a string or a list of strings", param="stop")
    ignore_eos = body.get("ignore_eos", False)
    if not isinstance(ignore_eos, bool):
        raise ApiError("'ignore_eos' must be true or false", param="ignore_eos")
    max_tokens = _integer(body, "max_tokens", low=1)
    if kind == "chat" and body.get("max_completion_tokens") is not None:
        max_tokens = _integer(body, "max_completion_tokens", low=1)
    return {
        "stream": stream,
        "max_tokens": max_tokens,
        "temperature": _number(body, "temperature", 1.0, 0.0, 2.0),
        "top_p": _number(body, "top_p", 1.0, 0.0, 1.0, low_open=True),
        "n": _integer(body, "n", low=1, high=MAX_SEQUENCES) or 1,
        "stop": stops,
        "seed": _integer(body, "seed", low=-(2**63)),
        "ignore_eos": ignore_eos,
    }


def _message_content(message: dict, where: str) -> str:
    content = message.get("content")
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        texts = []
        for j, part in enumerate(content):
            if (
                not isinstance(part, dict)
                or part.get("type") != "text"
                or not isinstance(part.get("text"), str)
            ):
                raise ApiError(
                    f"{where}.content[{j}] must be a text part {{'type': 'text', 'text': '...'}}; this model "
                    "reads text only",
                    param=f"{where}.content",
                )
            texts.append(part["text"])
        return "".join(texts)
    raise ApiError(
        f"{where}.content must be a string or a list of text parts, got "
        f"{'nothing' if content is None else type(content).__name__}",
        param=f"{where}.content",
    )


def parse_messages(raw: Any) -> list[dict[str, str]]:
    if raw is None:
        raise ApiError(
            "'messages' is required: a non-empty list of {role, content} objects", param="messages"
        )
    if not isinstance(raw, list) or not raw:
        raise ApiError("'messages' must be a non-empty list of {role, content} objects", param="messages")
    messages = []
    for i, message in enumerate(raw):
        where = f"messages[{i}]"
        if not isinstance(message, dict):
            raise ApiError(f"{where} must be an object with 'role' and 'content'", param=where)
        role = message.get("role")
        if role not in CHAT_ROLES:
            raise ApiError(
                f"{where}.role must be one of {', '.join(CHAT_ROLES)}, got {role!r}", param=f"{where}.role"
            )
        messages.append({"role": role, "content": _message_content(message, where)})
    return messages


def parse_chat(body: dict) -> ParsedRequest:
    messages = parse_messages(body.get("messages"))
    return ParsedRequest(kind="chat", prompts=[], messages=messages, **_common(body, "chat"))


def parse_completion(body: dict) -> ParsedRequest:
    prompt = body.get("prompt")
    prompts: list[str | list[int]]
    if isinstance(prompt, str):
        prompts = [prompt]
    elif isinstance(prompt, list) and prompt and all(isinstance(p, str) for p in prompt):
        prompts = list(prompt)
    elif (
        isinstance(prompt, list)
        and prompt
        and all(isinstance(t, int) and not isinstance(t, bool) for t in prompt)
    ):
        prompts = [list(prompt)]
    elif (
        isinstance(prompt, list)
        and prompt
        and all(isinstance(p, list) and p and all(isinstance(t, int) for t in p) for p in prompt)
    ):
        prompts = [list(p) for p in prompt]
    else:
        raise ApiError(
            "'prompt' must be a string, a non-empty list of strings, or token ids (a list of integers or a "
            "list of such lists)",
            param="prompt",
        )
    parsed = ParsedRequest(kind="completion", prompts=prompts, **_common(body, "completion"))
    if len(prompts) * parsed.n > MAX_SEQUENCES:
        raise ApiError(
            f"{len(prompts)} prompts x n={parsed.n} asks for {len(prompts) * parsed.n} completions; at most "
            f"{MAX_SEQUENCES} per request",
            param="n",
        )
    if parsed.max_tokens is None:
        parsed.max_tokens = COMPLETIONS_DEFAULT_MAX_TOKENS
    return parsed
