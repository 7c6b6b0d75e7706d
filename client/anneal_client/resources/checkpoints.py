"""Checkpoints of the team's jobs (what a deployment serves)."""

from __future__ import annotations

import builtins
from typing import Any

from anneal_client import _plan
from anneal_client._plan import Plan, Request
from anneal_client.resources._base import AsyncResource, SyncResource
from anneal_client.types import Checkpoint


def _checkpoints(job: int | None) -> Plan[list[Checkpoint]]:
    found = [Checkpoint.from_api(c) for c in (yield from _plan.list_all("/checkpoints"))]
    return [c for c in found if job is None or c.job == job]


def _card(checkpoint_id: int, markdown: bool) -> Plan[Any]:
    if markdown:
        return (yield Request("GET", f"/checkpoints/{checkpoint_id}/card/markdown", text=True))
    return (yield from _plan.get(f"/checkpoints/{checkpoint_id}/card"))


class Checkpoints(SyncResource):
    def list(self, *, job: int | None = None) -> builtins.list[Checkpoint]:
        return self._run(_checkpoints(job))

    def card(self, checkpoint_id: int, *, markdown: bool = False) -> Any:
        """The checkpoint's model card: a dict (base model, data, verifiers, held-out base against the
        checkpoint, curves, alarms, cost), or its Markdown text with ``markdown=True``."""
        return self._run(_card(checkpoint_id, markdown))


class AsyncCheckpoints(AsyncResource):
    async def list(self, *, job: int | None = None) -> builtins.list[Checkpoint]:
        return await self._run(_checkpoints(job))

    async def card(self, checkpoint_id: int, *, markdown: bool = False) -> Any:
        return await self._run(_card(checkpoint_id, markdown))
