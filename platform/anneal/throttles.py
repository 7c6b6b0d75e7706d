"""Rate limits kept in the cache (Redis, shared by every web process): the REST API's throttles, and the
counting windows behind the verifier preview limit and the sign-in lockout.

Each limit's message names the limit, the setting that sets it, and when to retry.
"""

import math
import time

from django.conf import settings
from django.core.cache import cache
from rest_framework.throttling import AnonRateThrottle, UserRateThrottle


class ApiUserThrottle(UserRateThrottle):
    """REST calls per minute per signed-in user; a token counts as its user."""

    def get_rate(self) -> str:
        # Read per request (DRF reads its rates once at import), so a changed setting applies at once.
        return f"{settings.API_RATE_PER_MIN}/min"


class ApiAnonThrottle(AnonRateThrottle):
    """REST calls per minute per address without a sign-in (they are answered 401, but still cost a request)."""

    def get_rate(self) -> str:
        return f"{settings.API_ANON_RATE_PER_MIN}/min"


def api_throttle_message(request, *, wait: float | None) -> str:
    if request is not None and request.user.is_authenticated:
        limit = f"{settings.API_RATE_PER_MIN} requests per minute per user (ANNEAL_API_RATE_PER_MIN)"
    else:
        limit = (
            f"{settings.API_ANON_RATE_PER_MIN} requests per minute per address (ANNEAL_API_ANON_RATE_PER_MIN)"
        )
    return f"Too many API requests: the limit is {limit}; retry in {math.ceil(wait or 1)} s."


def window_hit(key: str, *, window_s: int) -> tuple[int, int]:
    """Count one more event under `key`, in a window that opens at its first event and lasts `window_s`.

    Returns (events in the window so far, this one included; seconds until the window closes)."""
    now = time.time()
    cache.add(f"{key}:start", now, timeout=window_s)
    cache.add(key, 0, timeout=window_s)
    try:
        count = cache.incr(key)
    except ValueError:  # the window closed between add and incr: this event opens the next one
        cache.set(f"{key}:start", now, timeout=window_s)
        cache.set(key, 1, timeout=window_s)
        count = 1
    return count, _left(key, now=now, window_s=window_s)


def window_count(key: str, *, window_s: int) -> tuple[int, int]:
    """(events counted under `key` in its open window, seconds until it closes); (0, 0) when none is open."""
    count = cache.get(key)
    if not count:
        return 0, 0
    return int(count), _left(key, now=time.time(), window_s=window_s)


def window_clear(key: str) -> None:
    cache.delete_many([key, f"{key}:start"])


def _left(key: str, *, now: float, window_s: int) -> int:
    start = cache.get(f"{key}:start") or now
    return max(1, math.ceil(start + window_s - now))
