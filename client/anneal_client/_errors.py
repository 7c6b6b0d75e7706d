"""Errors as exceptions, named as openai-python names them, carrying what the API said.

The API answers every refusal with ``{"detail": ..., "errors": [{"field", "message", "row"?}]}``; an
``APIStatusError`` keeps the status, that message, the first field named and the whole list.
"""

from __future__ import annotations

from typing import Any

import httpx


class AnnealError(Exception):
    """Every error this package raises."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class SpecFileError(AnnealError):
    """A spec file that cannot be read: missing, not YAML/JSON, or lacking a field (named in the message)."""


class APIError(AnnealError):
    """Talking to the API failed."""


class APIConnectionError(APIError):
    """The server could not be reached (refused, reset, DNS) after the retries."""


class APITimeoutError(APIConnectionError):
    """The server did not answer within the timeout, after the retries."""


class APIStatusError(APIError):
    """The API answered 4xx or 5xx. ``field`` is the first field the API named ("spec.type",
    "params.max_steps", "non_field_errors"...), ``errors`` every ``{field, message, row?}`` it listed."""

    status_code: int

    def __init__(self, message: str, *, response: httpx.Response, body: Any) -> None:
        super().__init__(message)
        self.response = response
        self.status_code = response.status_code
        self.body = body
        errors = body.get("errors") if isinstance(body, dict) else None
        self.errors: list[dict[str, Any]] = [e for e in errors or [] if isinstance(e, dict)]
        self.field: str | None = self.errors[0].get("field") if self.errors else None


class BadRequestError(APIStatusError):
    pass


class AuthenticationError(APIStatusError):
    pass


class PermissionDeniedError(APIStatusError):
    pass


class NotFoundError(APIStatusError):
    pass


class ConflictError(APIStatusError):
    pass


class RequestTooLargeError(APIStatusError):
    pass


class UnprocessableEntityError(APIStatusError):
    pass


class RateLimitError(APIStatusError):
    pass


class InternalServerError(APIStatusError):
    pass


_BY_STATUS: dict[int, type[APIStatusError]] = {
    400: BadRequestError,
    401: AuthenticationError,
    403: PermissionDeniedError,
    404: NotFoundError,
    409: ConflictError,
    413: RequestTooLargeError,
    422: UnprocessableEntityError,
    429: RateLimitError,
}


def error_from_response(response: httpx.Response) -> APIStatusError:
    """The exception for a refused request, with the API's own message."""
    try:
        body: Any = response.json()
    except ValueError:
        body = response.text
    message = None
    if isinstance(body, dict):
        error = body.get("error")  # the /v1 endpoint's OpenAI-shaped {"error": {"message", ...}}
        message = body.get("detail") or (error.get("message") if isinstance(error, dict) else error)
    if not message:
        text = body if isinstance(body, str) else ""
        message = text.strip()[:300] or response.reason_phrase or f"HTTP {response.status_code}"
    if response.status_code >= 500:
        cls: type[APIStatusError] = InternalServerError
    else:
        cls = _BY_STATUS.get(response.status_code, APIStatusError)
    return cls(message, response=response, body=body)
