"""What a client operation does, written once for the sync and the async client.

An operation is a generator (a *plan*) that yields the requests it makes (``Request``) and the pauses it
takes (``Sleep``) and receives each response's decoded body; it returns the operation's result. The sync
client runs plans with blocking calls, the async client with awaits, so waiting for an ingest or paging
events is the same code in both. An error raised by a request is thrown into the plan, which may catch it.
"""

from __future__ import annotations

from collections.abc import Generator
from dataclasses import dataclass
from typing import Any, TypeVar

T = TypeVar("T")


@dataclass(frozen=True)
class Request:
    method: str
    path: str  # under /api/v1 ("/jobs/3"), or a full URL (a next-page link)
    params: dict[str, Any] | None = None
    json: Any = None
    data: dict[str, Any] | None = None
    files: dict[str, Any] | None = None
    text: bool = False  # the body as text (CSV downloads) instead of JSON
    root: bool = False  # ``path`` is under the site's root, not /api/v1 (the OpenAPI schema)


@dataclass(frozen=True)
class Sleep:
    seconds: float


Step = Request | Sleep
Plan = Generator[Step, Any, T]


def get(path: str, **params: Any) -> Plan[Any]:
    """One GET: the smallest plan."""
    return (yield Request("GET", path, params={k: v for k, v in params.items() if v is not None} or None))


def post(path: str, json: Any = None) -> Plan[Any]:
    return (yield Request("POST", path, json=json))


def list_all(path: str, **params: Any) -> Plan[list[Any]]:
    """Every item of a list endpoint: a plain JSON list, or pages of ``{"results", "next"}`` followed to
    the end (the API's default pagination, should an endpoint turn it on)."""
    body = yield from get(path, **params)
    items: list[Any] = []
    while True:
        if isinstance(body, list):
            return items + body
        items.extend(body.get("results") or [])
        if not body.get("next"):
            return items
        body = yield Request("GET", body["next"])
