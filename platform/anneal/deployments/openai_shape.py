"""The OpenAI request and error shape of /v1, shared by the proxy, the batch tier and the playground page:
the error every failure answers with ({"error": {"message", "type", "param", "code"}} and a 4xx/5xx status,
never a stack trace), and the checks a request passes before it costs a replica any time."""

import json
import logging

from django.conf import settings
from django.http import JsonResponse

from anneal import jsontext

log = logging.getLogger(__name__)
CHAT, COMPLETIONS = "chat.completions", "completions"
ROLES = ("system", "developer", "user", "assistant", "tool")


class OpenAIError(Exception):
    def __init__(
        self,
        status: int,
        message: str,
        *,
        type: str = "invalid_request_error",  # noqa: A002 - the field's name in OpenAI's shape
        param: str | None = None,
        code: str | None = None,
        headers: dict | None = None,
    ) -> None:
        super().__init__(message)
        self.status, self.message, self.type, self.param, self.code = status, message, type, param, code
        self.headers = headers or {}

    def response(self) -> JsonResponse:
        body = {"error": {"message": self.message, "type": self.type, "param": self.param, "code": self.code}}
        response = JsonResponse(body, status=self.status)
        for name, value in self.headers.items():
            response[name] = value
        return response


def error_response(status: int, message: str, **kwargs) -> JsonResponse:
    return OpenAIError(status, message, **kwargs).response()


def internal_error(exc: Exception) -> JsonResponse:
    """A bug of ours still answers in the shape clients parse, and is logged with its traceback."""
    log.exception("/v1 request failed", exc_info=exc)
    return error_response(500, "The server had an error while processing your request.", type="server_error")


# --- input checks ---------------------------------------------------------------------------------------


def parse_body(request) -> dict:
    limit = settings.DEPLOY_MAX_REQUEST_KB * 1024
    if len(request.body) > limit:
        raise OpenAIError(
            413,
            f"The request body is {len(request.body)} bytes; the limit is {limit} bytes "
            f"(ANNEAL_V1_MAX_REQUEST_KB={settings.DEPLOY_MAX_REQUEST_KB}).",
            code="request_too_large",
        )
    try:
        body = jsontext.loads(request.body or b"null")
    except (json.JSONDecodeError, UnicodeDecodeError):
        raise OpenAIError(
            400,
            "We could not parse the JSON body of your request: send a JSON object "
            "(Content-Type: application/json).",
            code="invalid_json",
        ) from None
    if not isinstance(body, dict):
        raise OpenAIError(400, "The request body must be a JSON object.", code="invalid_json")
    return body


def check_request(body: dict, kind: str) -> None:
    """The checks the platform makes before spending a replica's time; the replica checks the rest."""
    model = body.get("model")
    if not isinstance(model, str) or not model.strip():
        raise OpenAIError(400, "You must provide a model parameter (a deployment's name).", param="model")
    if kind == CHAT:
        _check_messages(body.get("messages"))
    else:
        prompt = body.get("prompt")
        is_texts = isinstance(prompt, list) and prompt and all(isinstance(p, str) for p in prompt)
        if not (isinstance(prompt, str) or is_texts):
            raise OpenAIError(
                400,
                "'prompt' must be a string or a non-empty list of strings.",
                param="prompt",
                code="invalid_type",
            )
    for name in ("max_tokens", "max_completion_tokens"):
        value = body.get(name)
        if value is None:
            continue
        if not isinstance(value, int) or isinstance(value, bool) or value < 1:
            raise OpenAIError(
                400, f"'{name}' must be a whole number of at least 1.", param=name, code="invalid_value"
            )
        if value > settings.DEPLOY_MAX_TOKENS:
            raise OpenAIError(
                400,
                f"'{name}' is {value}; this endpoint generates at most {settings.DEPLOY_MAX_TOKENS} tokens "
                "per request (ANNEAL_V1_MAX_TOKENS).",
                param=name,
                code="invalid_value",
            )
    if "stream" in body and not isinstance(body["stream"], bool):
        raise OpenAIError(400, "'stream' must be true or false.", param="stream", code="invalid_type")


def _check_messages(messages) -> None:
    if not isinstance(messages, list) or not messages:
        raise OpenAIError(
            400,
            "'messages' must be a non-empty list of {role, content} objects.",
            param="messages",
            code="invalid_type",
        )
    for index, message in enumerate(messages):
        where = f"messages[{index}]"
        if not isinstance(message, dict):
            raise OpenAIError(400, f"'{where}' must be an object with role and content.", param=where)
        if message.get("role") not in ROLES:
            raise OpenAIError(
                400,
                f"'{where}.role' is {message.get('role')!r}: expected one of {', '.join(ROLES)}.",
                param=f"{where}.role",
                code="invalid_value",
            )
        content = message.get("content")
        parts_ok = isinstance(content, list) and all(
            isinstance(p, dict) and p.get("type") == "text" and isinstance(p.get("text"), str)
            for p in content
        )
        if not (isinstance(content, str) or parts_ok or (content is None and message["role"] == "assistant")):
            raise OpenAIError(
                400,
                f"'{where}.content' must be a string or a list of text parts.",
                param=f"{where}.content",
                code="invalid_type",
            )
