"""How large a request body may be, enforced before any view reads it and while the body streams in.

One rule (``limit_for``), two places that apply it:

- ``BodyLimitASGI`` wraps the ASGI application (anneal.asgi). A Content-Length over the limit is answered 413
  before a byte of the body is read; a body without one (chunked) is counted as it arrives and cut off as soon
  as it passes the limit, so Django never spools or parses the rest.
- ``BodyLimitMiddleware`` checks the Content-Length inside Django, for any other way a request reaches a view
  (the test client, a WSGI server, where the Content-Length bounds what is read), before the CSRF check or a
  parser touches the body.

Uploads (dataset files, /v1/files) may be ANNEAL_UPLOAD_MAX_MB plus room for the form's other fields; other
/v1 requests ANNEAL_V1_MAX_REQUEST_KB; everything else ANNEAL_REQUEST_MAX_MB. Each refusal names the limit
and the setting, in the shape the caller parses (OpenAI's error for /v1, the API's for /api, a form error
for the upload page).

Daphne (the web server in docker-compose) receives a whole request into a temporary file on disk before the
application starts, so there these checks stop the copy and the parse, not the bytes on the wire: put a proxy
limit in front (nginx ``client_max_body_size``) or run the web under an ASGI server that streams (Uvicorn).
"""

from __future__ import annotations

import html
import json
from dataclasses import dataclass

from django.conf import settings
from django.http import HttpResponse
from django.urls import Resolver404, resolve

MB = 1024 * 1024
FORM_ROOM = MB  # the multipart framing and the upload form's other fields, beside the file
UPLOAD_VIEWS = {"api:upload-create", "dataset-upload", "v1-files"}
PAGE_UPLOAD_VIEW = "dataset-upload"


@dataclass(frozen=True)
class BodyLimit:
    max_bytes: int  # the most a body may hold
    message: str  # why a larger one is refused, naming the limit
    field: str  # the field the API's error names
    view_name: str  # where the request goes ("" when it resolves nowhere)


def size_text(size: int) -> str:
    """``200 MB`` for whole mebibytes, else ``1000 bytes``: how a limit reads in a message."""
    return f"{size // MB} MB" if size >= MB and size % MB == 0 else f"{size} bytes"


def _view_name(path_info: str) -> str:
    try:
        return resolve(path_info).view_name or ""
    except Resolver404:
        return ""


def limit_for(path_info: str) -> BodyLimit:
    view_name = _view_name(path_info)
    if view_name in UPLOAD_VIEWS:
        limit = settings.UPLOAD_MAX_BYTES
        message = (
            f"the file is larger than the limit of {size_text(limit)} (ANNEAL_UPLOAD_MAX_MB): "
            "split it into smaller files, or compress it with gzip"
        )
        return BodyLimit(limit + FORM_ROOM, message, "file", view_name)
    if path_info.startswith("/v1/"):
        limit = settings.DEPLOY_MAX_REQUEST_KB * 1024
        message = (
            f"The request body is larger than the limit of {size_text(limit)} "
            f"(ANNEAL_V1_MAX_REQUEST_KB={settings.DEPLOY_MAX_REQUEST_KB})."
        )
        return BodyLimit(limit, message, "body", view_name)
    limit = settings.REQUEST_MAX_BYTES
    message = f"the request body is larger than the limit of {size_text(limit)} (ANNEAL_REQUEST_MAX_MB)"
    return BodyLimit(limit, message, "body", view_name)


def refusal(limit: BodyLimit, *, path_info: str, xhr: bool) -> tuple[str, bytes]:
    """(content type, body) of the 413 for a body over ``limit``, in the shape its caller reads."""
    if path_info.startswith("/v1/"):
        error = {
            "message": limit.message,
            "type": "invalid_request_error",
            "param": "file" if limit.field == "file" else None,
            "code": "request_too_large",
        }
        return "application/json", json.dumps({"error": error}).encode()
    if limit.view_name == PAGE_UPLOAD_VIEW and not xhr:
        # A plain form post from a browser without JavaScript: a page, not JSON.
        page = (
            "<!doctype html><meta charset=utf-8><title>Upload refused</title>"
            f"<h1>Upload refused</h1><p>{html.escape(limit.message)}.</p>"
            '<p><a href="">Back to the upload form</a></p>'
        )
        return "text/html; charset=utf-8", page.encode()
    if limit.view_name == PAGE_UPLOAD_VIEW:
        return "application/json", json.dumps({"errors": {limit.field: [limit.message]}}).encode()
    body = {
        "detail": f"{limit.field}: {limit.message}",
        "errors": [{"field": limit.field, "message": limit.message}],
    }
    return "application/json", json.dumps(body).encode()


def declared_length(value: str | bytes | None) -> int | None:
    """The Content-Length as a number; None when absent or not a plain number (Django then reads nothing)."""
    if value is None:
        return None
    text = value.decode("latin-1") if isinstance(value, bytes) else value
    text = text.strip()
    return int(text) if text.isdigit() else None


class BodyLimitMiddleware:
    """Django's half: refuse a declared Content-Length over the limit before the view, CSRF or a parser reads
    the body."""

    def __init__(self, get_response) -> None:
        self.get_response = get_response

    def __call__(self, request):
        length = declared_length(request.META.get("CONTENT_LENGTH"))
        if length:
            limit = limit_for(request.path_info)
            if length > limit.max_bytes:
                xhr = request.headers.get("X-Requested-With") == "XMLHttpRequest"
                content_type, body = refusal(limit, path_info=request.path_info, xhr=xhr)
                response = HttpResponse(body, status=413, content_type=content_type)
                response["Connection"] = "close"  # the unread body must not be taken for the next request
                return response
        return self.get_response(request)


class BodyLimitASGI:
    """The ASGI half: count the body as it arrives and stop reading it at the limit."""

    def __init__(self, app) -> None:
        self.app = app

    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        path_info = _path_info(scope)
        headers = dict(scope.get("headers") or [])
        limit = limit_for(path_info)
        xhr = headers.get(b"x-requested-with") == b"XMLHttpRequest"
        declared = declared_length(headers.get(b"content-length"))
        if declared is not None and declared > limit.max_bytes:
            await _send_refusal(send, limit, path_info=path_info, xhr=xhr)
            return
        received = 0
        over = False
        started = False

        async def counted_receive() -> dict:
            nonlocal received, over
            if over:
                return {"type": "http.disconnect"}
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > limit.max_bytes:
                    # Django stops reading on a disconnect and answers nothing: the 413 is sent below.
                    over = True
                    return {"type": "http.disconnect"}
            return message

        async def tracked_send(message: dict) -> None:
            nonlocal started
            if message["type"] == "http.response.start":
                started = True
            await send(message)

        await self.app(scope, counted_receive, tracked_send)
        if over and not started:
            await _send_refusal(send, limit, path_info=path_info, xhr=xhr)


def _path_info(scope) -> str:
    path, root = scope.get("path", "") or "/", scope.get("root_path", "") or ""
    if root and path.startswith(root):
        return path[len(root) :] or "/"
    return path


async def _send_refusal(send, limit: BodyLimit, *, path_info: str, xhr: bool) -> None:
    content_type, body = refusal(limit, path_info=path_info, xhr=xhr)
    headers = [
        (b"content-type", content_type.encode()),
        (b"content-length", str(len(body)).encode()),
        (b"connection", b"close"),
    ]
    await send({"type": "http.response.start", "status": 413, "headers": headers})
    await send({"type": "http.response.body", "body": body})
