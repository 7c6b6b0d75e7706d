"""Checkpoints of the team's jobs (what a deployment serves)."""

from __future__ import annotations

import builtins

from anneal_client import _plan
from anneal_client._plan import Plan
from anneal_client.resources._base import AsyncResource, SyncResource
from anneal_client.types import Checkpoint


def _checkpoints(job: int | None) -> Plan[list[Checkpoint]]:
    found = [Checkpoint.from_api(c) for c in (yield from _plan.list_all("/checkpoints"))]
    return [c for c in found if job is None or c.job == job]


class Checkpoints(SyncResource):
    def list(self, *, job: int | None = None) -> builtins.list[Checkpoint]:
        return self._run(_checkpoints(job))


class AsyncCheckpoints(AsyncResource):
    async def list(self, *, job: int | None = None) -> builtins.list[Checkpoint]:
        return await self._run(_checkpoints(job))
