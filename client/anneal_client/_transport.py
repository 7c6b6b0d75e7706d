"""HTTP for the clients: the API's address and token, retries with backoff, errors mapped to exceptions,
and the runners that carry out plans (anneal_client._plan) with blocking calls or with awaits."""

from __future__ import annotations

import asyncio
import time
import uuid
from typing import Any, TypeVar, cast

import httpx

from anneal_client import __version__
from anneal_client._errors import (
    AnnealError,
    APIConnectionError,
    APIError,
    APITimeoutError,
    error_from_response,
)
from anneal_client._plan import Plan, Request, Sleep
from anneal_client._retry import retry_delay, should_retry

T = TypeVar("T")
API_PREFIX = "/api/v1"


class Transport:
    """What both clients share: where the API is, how to authenticate, how often to retry."""

    def __init__(
        self, *, base_url: str, api_key: str, max_retries: int, timeout: float | httpx.Timeout
    ) -> None:
        self.base_url = base_url
        self.max_retries = max_retries
        self.timeout = timeout
        self.headers = {
            "Authorization": f"Bearer {api_key}",
            "Accept": "application/json",
            "User-Agent": f"anneal-client/{__version__}",
        }

    def url(self, request: Request) -> str:
        if request.path.startswith(("http://", "https://")):
            return request.path
        return f"{self.base_url}{'' if request.root else API_PREFIX}{request.path}"

    def arguments(self, request: Request) -> dict[str, Any]:
        return {
            "method": request.method,
            "url": self.url(request),
            "params": request.params,
            "json": request.json,
            "data": request.data,
            "files": request.files,
        }

    def headers_for(self, request: Request) -> dict[str, str]:
        """The headers of every try of ``request``. A write carries one Idempotency-Key for all its tries, so
        a retry after a timeout gets the first answer back instead of creating a second job or upload."""
        if request.method.upper() in ("GET", "HEAD", "OPTIONS"):
            return self.headers
        return {**self.headers, "Idempotency-Key": f"anneal-client-{uuid.uuid4()}"}

    def decode(self, response: httpx.Response, request: Request) -> Any:
        if request.text:
            return response.text
        if response.status_code == 204 or not response.content:
            return None
        try:
            return response.json()
        except ValueError:
            raise APIError(
                f"{response.url} answered {response.status_code} with something that is not JSON: "
                f"is {self.base_url} an Anneal server?"
            ) from None

    def next_delay(self, attempt: int, response: httpx.Response | None) -> float | None:
        """Seconds to wait before trying again, or None to give up."""
        if attempt >= self.max_retries:
            return None
        if response is None:
            return retry_delay(attempt)
        if not should_retry(response.status_code, response.headers):
            return None
        return retry_delay(attempt, response.headers)

    def unreachable(self, exc: httpx.TransportError) -> APIConnectionError:
        if isinstance(exc, httpx.TimeoutException):
            return APITimeoutError(f"{self.base_url} did not answer in time ({type(exc).__name__})")
        return APIConnectionError(f"could not reach {self.base_url}: {exc or type(exc).__name__}")


class SyncTransport(Transport):
    def __init__(self, *, http_client: httpx.Client | None = None, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.http = http_client or httpx.Client(timeout=self.timeout, follow_redirects=True)

    def request(self, request: Request) -> Any:
        attempt = 0
        headers = self.headers_for(request)
        while True:
            try:
                response = self.http.request(**self.arguments(request), headers=headers)
            except httpx.TransportError as exc:
                delay = self.next_delay(attempt, None)
                if delay is None:
                    raise self.unreachable(exc) from None
            else:
                if response.is_success:
                    return self.decode(response, request)
                delay = self.next_delay(attempt, response)
                if delay is None:
                    raise error_from_response(response)
            time.sleep(delay)
            attempt += 1

    def run(self, plan: Plan[T]) -> T:
        value: Any = None
        error: AnnealError | None = None
        while True:
            try:
                step = plan.throw(error) if error is not None else plan.send(value)
            except StopIteration as done:
                return cast(T, done.value)
            value, error = None, None
            try:
                if isinstance(step, Sleep):
                    time.sleep(step.seconds)
                else:
                    value = self.request(step)
            except AnnealError as exc:
                error = exc

    def close(self) -> None:
        self.http.close()


class AsyncTransport(Transport):
    def __init__(self, *, http_client: httpx.AsyncClient | None = None, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.http = http_client or httpx.AsyncClient(timeout=self.timeout, follow_redirects=True)

    async def request(self, request: Request) -> Any:
        attempt = 0
        headers = self.headers_for(request)
        while True:
            try:
                response = await self.http.request(**self.arguments(request), headers=headers)
            except httpx.TransportError as exc:
                delay = self.next_delay(attempt, None)
                if delay is None:
                    raise self.unreachable(exc) from None
            else:
                if response.is_success:
                    return self.decode(response, request)
                delay = self.next_delay(attempt, response)
                if delay is None:
                    raise error_from_response(response)
            await asyncio.sleep(delay)
            attempt += 1

    async def run(self, plan: Plan[T]) -> T:
        value: Any = None
        error: AnnealError | None = None
        while True:
            try:
                step = plan.throw(error) if error is not None else plan.send(value)
            except StopIteration as done:
                return cast(T, done.value)
            value, error = None, None
            try:
                if isinstance(step, Sleep):
                    await asyncio.sleep(step.seconds)
                else:
                    value = await self.request(step)
            except AnnealError as exc:
                error = exc

    async def close(self) -> None:
        await self.http.aclose()
