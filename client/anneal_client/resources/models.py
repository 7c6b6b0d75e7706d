"""Base models a job may start from."""

from __future__ import annotations

import builtins

from anneal_client import _plan
from anneal_client._plan import Plan
from anneal_client.resources._base import AsyncResource, SyncResource
from anneal_client.types import BaseModel


def _models() -> Plan[list[BaseModel]]:
    return [BaseModel.from_api(m) for m in (yield from _plan.get("/models"))["results"]]


class Models(SyncResource):
    def list(self) -> builtins.list[BaseModel]:
        """Base models a job may start from on this installation."""
        return self._run(_models())


class AsyncModels(AsyncResource):
    async def list(self) -> builtins.list[BaseModel]:
        return await self._run(_models())
