"""A replica answers only the platform: every request must carry ``Authorization: Bearer <credential>``.

The serve worker makes a fresh random credential for each replica it starts and hands it over in the
environment (``ANNEAL_REPLICA_CREDENTIAL``), never in argv, which any local user reads in /proc/*/cmdline. A
request without it, or with another, gets a bare 401 before routing: no route list, no model name, no tier.
vLLM replicas get the same credential as ``VLLM_API_KEY``, which vLLM checks on its /v1 routes.
"""

from __future__ import annotations

import hmac
from typing import Any

CREDENTIAL_ENV = "ANNEAL_REPLICA_CREDENTIAL"
MIN_CREDENTIAL_CHARS = 32


class RequireCredential:
    """ASGI middleware: HTTP requests pass only with the replica's bearer credential (compared in constant
    time); lifespan events pass untouched."""

    def __init__(self, app: Any, *, credential: str) -> None:
        if len(credential) < MIN_CREDENTIAL_CHARS:
            raise ValueError(f"the replica credential must be at least {MIN_CREDENTIAL_CHARS} characters")
        self.app = app
        self.expected = f"Bearer {credential}".encode()

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        if scope["type"] == "http" and not self._allowed(scope):
            await send(
                {
                    "type": "http.response.start",
                    "status": 401,
                    "headers": [(b"content-length", b"0"), (b"www-authenticate", b"Bearer")],
                }
            )
            await send({"type": "http.response.body", "body": b""})
            return
        await self.app(scope, receive, send)

    def _allowed(self, scope: dict) -> bool:
        given = [value for name, value in scope.get("headers", ()) if name.lower() == b"authorization"]
        # Exactly one Authorization header: two could let a proxy and the replica read different ones.
        return len(given) == 1 and hmac.compare_digest(given[0], self.expected)
