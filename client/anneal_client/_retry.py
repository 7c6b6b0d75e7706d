"""When to try a request again, and how long to wait first: exponential backoff with jitter, or what the
server asked for in Retry-After (seconds or an HTTP date), as openai-python does."""

from __future__ import annotations

import email.utils
import random
import time
from collections.abc import Mapping

# 409: the API's conflicts are mostly "in use", but a lock timeout is one too, and openai-python retries it.
RETRY_STATUSES = frozenset({408, 409, 429})
INITIAL_DELAY_S = 0.5
MAX_DELAY_S = 8.0
# A Retry-After longer than this is not waited for blindly: the backoff applies instead.
MAX_RETRY_AFTER_S = 60.0


def should_retry(status: int, headers: Mapping[str, str]) -> bool:
    """A status worth another try. The server may say otherwise (the /v1 budget cap sends x-should-retry)."""
    hint = headers.get("x-should-retry")
    if hint == "true":
        return True
    if hint == "false":
        return False
    return status in RETRY_STATUSES or status >= 500


def retry_after(headers: Mapping[str, str]) -> float | None:
    """Seconds the server asked the client to wait, when it asked and the value makes sense."""
    value = (headers.get("retry-after-ms") or "").strip()
    if value:
        try:
            return float(value) / 1000
        except ValueError:
            pass
    value = (headers.get("retry-after") or "").strip()
    if not value:
        return None
    try:
        seconds = float(value)
    except ValueError:
        parsed = email.utils.parsedate_to_datetime(value) if value else None
        if parsed is None:
            return None
        seconds = parsed.timestamp() - time.time()
    return seconds if 0 <= seconds <= MAX_RETRY_AFTER_S else None


def retry_delay(attempt: int, headers: Mapping[str, str] | None = None) -> float:
    """Seconds to wait before retry number ``attempt`` (0 for the first)."""
    asked = retry_after(headers or {})
    if asked is not None:
        return asked
    delay: float = min(INITIAL_DELAY_S * 2.0**attempt, MAX_DELAY_S)
    return delay * (1 - 0.25 * random.random())  # jitter: clients that failed together do not return together
