"""One error shape for the whole REST API: {"detail": ..., "errors": [{"field", "message", "row"?}]}."""

from django.core.exceptions import ValidationError as DjangoValidationError
from rest_framework import exceptions, status
from rest_framework.response import Response
from rest_framework.views import exception_handler as drf_exception_handler

from anneal.errors import InputError, LimitReached
from anneal.throttles import api_throttle_message


def _flatten(detail, prefix: str = "") -> list[dict]:
    if isinstance(detail, dict):
        out = []
        for key, value in detail.items():
            name = key if not prefix else f"{prefix}.{key}"
            out.extend(_flatten(value, "" if key == "non_field_errors" and not prefix else name))
        return out
    if isinstance(detail, list):
        if all(not isinstance(item, dict | list) for item in detail):
            return [{"field": prefix or "non_field_errors", "message": str(item)} for item in detail]
        out = []
        for index, item in enumerate(detail):
            out.extend(_flatten(item, f"{prefix}[{index}]"))
        return out
    return [{"field": prefix or "non_field_errors", "message": str(detail)}]


def exception_handler(exc, context):
    if isinstance(exc, LimitReached):
        response = Response(
            {"detail": str(exc), "errors": exc.errors}, status=status.HTTP_429_TOO_MANY_REQUESTS
        )
        response["Retry-After"] = str(exc.retry_after_s)
        return response
    if isinstance(exc, exceptions.Throttled):
        exc.detail = api_throttle_message(context["request"], wait=exc.wait)
    if isinstance(exc, InputError):
        return Response({"detail": str(exc), "errors": exc.errors}, status=status.HTTP_400_BAD_REQUEST)
    if isinstance(exc, DjangoValidationError):
        exc = exceptions.ValidationError(exc.message_dict if hasattr(exc, "error_dict") else exc.messages)
    response = drf_exception_handler(exc, context)
    if response is not None and isinstance(exc, exceptions.ValidationError):
        errors = _flatten(response.data)
        response.data = {
            "detail": "; ".join(f"{e['field']}: {e['message']}" for e in errors),
            "errors": errors,
        }
    return response
