"""Idempotency keys for the REST API: a write sent again with the same ``Idempotency-Key`` header (a client
retrying after a timeout or a dropped connection) gets the first answer back instead of acting twice.

The key is scoped to the caller's credential (a hash of the Authorization header, else the session) and to the
method and path, so nobody can replay or block another caller's key. While the first request still runs, a
repeat gets 409 with Retry-After (the Python client retries 409); once it has answered, the answer is kept in
the cache for ``IDEMPOTENCY_TTL_S`` and replayed with ``Idempotent-Replayed: true``. Not kept, so that a retry
acts again: a 5xx (the services are atomic), a "not now" (408, 409, 423, 429), a streamed body, and an answer
sent with ``Cache-Control: no-store`` (a secret shown once, such as a new API key, never goes to the cache).
Stripe's and openai-python's design."""

from __future__ import annotations

import hashlib
import json
import logging

from django.conf import settings
from django.core.cache import cache
from django.http import HttpRequest, HttpResponse, JsonResponse

logger = logging.getLogger(__name__)
HEADER = "HTTP_IDEMPOTENCY_KEY"
WRITES = frozenset({"POST", "PUT", "PATCH", "DELETE"})
IDEMPOTENCY_TTL_S = 24 * 3600
# How long a key stays "in progress" if its request never answers (a killed process): longer than any write.
PENDING_TTL_S = 600
MAX_KEY_LENGTH = 255
MAX_KEPT_BYTES = 1_000_000
PENDING = "pending"
# Answers that say "not now" rather than what was done: a retry must be free to act, so they are not kept.
NOT_KEPT = frozenset({408, 409, 423, 429})


def caller_of(request: HttpRequest) -> str | None:
    """Whom a request's key belongs to: a hash of its credential, or None for an anonymous request."""
    credential = request.META.get("HTTP_AUTHORIZATION") or request.COOKIES.get(settings.SESSION_COOKIE_NAME)
    return hashlib.sha256(credential.encode()).hexdigest() if credential else None


def slot_of(*, caller: str, method: str, path: str, key: str) -> str:
    """The cache key of one caller's Idempotency-Key on one method and path."""
    return "idem:" + hashlib.sha256(f"{caller}\n{method}\n{path}\n{key}".encode()).hexdigest()


def _authenticated(request: HttpRequest) -> bool:
    """Whether the credential still signs in (checked before a replay: a revoked token gets no answer)."""
    from rest_framework.exceptions import AuthenticationFailed

    from anneal.accounts.authentication import BearerTokenAuthentication

    if request.META.get("HTTP_AUTHORIZATION"):
        try:
            return BearerTokenAuthentication().authenticate(request) is not None
        except AuthenticationFailed:
            return False
    user = getattr(request, "user", None)  # a session: AuthenticationMiddleware ran before this one
    return bool(user is not None and user.is_authenticated)


def _forget(slot: str) -> None:
    try:
        cache.delete(slot)
    except Exception:
        logger.warning("idempotency cache unreachable; key %s expires by itself", slot)


def _refused(status: int, detail: str, **headers: str) -> JsonResponse:
    response = JsonResponse({"detail": detail, "field": "Idempotency-Key"}, status=status)
    for name, value in headers.items():
        response[name] = value
    return response


def _replay(kept: dict) -> HttpResponse:
    response = HttpResponse(kept["body"].encode(), status=kept["status"], content_type=kept["content_type"])
    response["Idempotent-Replayed"] = "true"
    return response


class IdempotencyMiddleware:
    def __init__(self, get_response) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        key = request.META.get(HEADER)
        caller = caller_of(request)
        if not key or request.method not in WRITES or not request.path.startswith("/api/") or caller is None:
            return self.get_response(request)
        if len(key) > MAX_KEY_LENGTH or not key.isprintable():
            return _refused(400, f"Idempotency-Key: at most {MAX_KEY_LENGTH} printable characters")
        slot = slot_of(caller=caller, method=request.method, path=request.path, key=key)
        try:
            first = cache.add(slot, PENDING, timeout=PENDING_TTL_S)
        except Exception:  # the cache is down (a Redis restart): answer without the guarantee, not with a 500
            logger.warning(
                "idempotency cache unreachable; %s %s answered without it", request.method, request.path
            )
            return self.get_response(request)
        if not first:
            if not _authenticated(request):  # a token revoked, a session ended since: the view says 401
                return self.get_response(request)
            kept = cache.get(slot)
            if isinstance(kept, str) and kept != PENDING:
                return _replay(json.loads(kept))
            return _refused(
                409,
                "a request with this Idempotency-Key is still being answered; try again",
                **{"Retry-After": "1"},
            )
        try:
            response = self.get_response(request)
        except BaseException:
            _forget(slot)
            raise
        status = response.status_code
        if status >= 500 or status in NOT_KEPT or getattr(response, "streaming", False):
            _forget(slot)
            return response
        # A secret shown once (a new API key, sent with no-store) is never written to the cache: its retry acts
        # again (a second key) rather than the secret sitting in Redis for a day.
        if len(response.content) > MAX_KEPT_BYTES or "no-store" in response.get("Cache-Control", ""):
            _forget(slot)
            return response
        kept = {
            "status": response.status_code,
            "content_type": response.get("Content-Type", "application/json"),
            "body": response.content.decode("utf-8", errors="replace"),
        }
        try:
            cache.set(slot, json.dumps(kept), timeout=IDEMPOTENCY_TTL_S)
        except Exception:
            logger.warning(
                "idempotency cache unreachable; the answer to %s %s is not kept", request.method, request.path
            )
        return response
