"""The two clients, ``Anneal`` (blocking) and ``AsyncAnneal``, as openai-python shapes its own."""

from __future__ import annotations

from types import TracebackType
from typing import Any

import httpx

from anneal_client import _config, _plan
from anneal_client._errors import AnnealError
from anneal_client._transport import AsyncTransport, SyncTransport
from anneal_client.resources.checkpoints import AsyncCheckpoints, Checkpoints
from anneal_client.resources.datasets import AsyncDatasets, Datasets
from anneal_client.resources.deployments import AsyncDeployments, Deployments
from anneal_client.resources.jobs import AsyncJobs, Jobs
from anneal_client.resources.models import AsyncModels, Models
from anneal_client.resources.verifiers import AsyncVerifiers, Verifiers

DEFAULT_MAX_RETRIES = 2
# Reading an answer may take a while (a preview runs sandboxes); connecting should not.
DEFAULT_TIMEOUT = httpx.Timeout(120.0, connect=10.0)


def _settings(api_key: str | None, base_url: str | None) -> tuple[str, str]:
    key, url = _config.resolve(api_key=api_key, base_url=base_url)
    if not key:
        raise AnnealError(
            "no API key: pass api_key=..., set ANNEAL_API_KEY, or run `anneal login` "
            "(tokens are made on the Tokens page)"
        )
    return key, url


class Anneal:
    """``Anneal(api_key=..., base_url=...)``; either falls back to ANNEAL_API_KEY / ANNEAL_BASE_URL, then to
    the file ``anneal login`` writes. ``base_url`` is the site (``http://127.0.0.1:8000``). Failed calls are
    retried ``max_retries`` times on connection errors, 408, 409, 429 and 5xx, honouring Retry-After."""

    def __init__(
        self,
        *,
        api_key: str | None = None,
        base_url: str | None = None,
        max_retries: int = DEFAULT_MAX_RETRIES,
        timeout: float | httpx.Timeout = DEFAULT_TIMEOUT,
        http_client: httpx.Client | None = None,
    ) -> None:
        self.api_key, self.base_url = _settings(api_key, base_url)
        self._transport = SyncTransport(
            base_url=self.base_url,
            api_key=self.api_key,
            max_retries=max_retries,
            timeout=timeout,
            http_client=http_client,
        )
        self.datasets = Datasets(self._transport)
        self.verifiers = Verifiers(self._transport)
        self.jobs = Jobs(self._transport)
        self.checkpoints = Checkpoints(self._transport)
        self.deployments = Deployments(self._transport)
        self.models = Models(self._transport)

    def me(self) -> dict[str, Any]:
        """Who the token belongs to: ``{username, teams: [{id, name, role}], token}``."""
        return self._transport.run(_plan.get("/me"))

    def close(self) -> None:
        self._transport.close()

    def __enter__(self) -> Anneal:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()


class AsyncAnneal:
    """The same as ``Anneal``, every call awaited; iterators (events, rows) are async iterators."""

    def __init__(
        self,
        *,
        api_key: str | None = None,
        base_url: str | None = None,
        max_retries: int = DEFAULT_MAX_RETRIES,
        timeout: float | httpx.Timeout = DEFAULT_TIMEOUT,
        http_client: httpx.AsyncClient | None = None,
    ) -> None:
        self.api_key, self.base_url = _settings(api_key, base_url)
        self._transport = AsyncTransport(
            base_url=self.base_url,
            api_key=self.api_key,
            max_retries=max_retries,
            timeout=timeout,
            http_client=http_client,
        )
        self.datasets = AsyncDatasets(self._transport)
        self.verifiers = AsyncVerifiers(self._transport)
        self.jobs = AsyncJobs(self._transport)
        self.checkpoints = AsyncCheckpoints(self._transport)
        self.deployments = AsyncDeployments(self._transport)
        self.models = AsyncModels(self._transport)

    async def me(self) -> dict[str, Any]:
        return await self._transport.run(_plan.get("/me"))

    async def close(self) -> None:
        await self._transport.close()

    async def __aenter__(self) -> AsyncAnneal:
        return self

    async def __aexit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.close()
