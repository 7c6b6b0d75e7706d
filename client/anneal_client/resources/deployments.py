"""Deployments (a checkpoint behind /v1 at a tier), their keys and usage."""

from __future__ import annotations

import builtins
from collections.abc import Callable
from typing import Any

from anneal_client import _plan
from anneal_client._plan import Plan
from anneal_client.resources._base import AsyncResource, SyncResource, poll
from anneal_client.types import Deployment, DeploymentKey

DEPLOYMENT_SETTLED = frozenset({"ready", "failed", "stopped"})


def _create(body: dict[str, Any]) -> Plan[Deployment]:
    return Deployment.from_api((yield from _plan.post("/deployments", body)))


def _get(deployment_id: int) -> Plan[Deployment]:
    return Deployment.from_api((yield from _plan.get(f"/deployments/{deployment_id}")))


def _list() -> Plan[list[Deployment]]:
    return [Deployment.from_api(d) for d in (yield from _plan.list_all("/deployments"))]


def _action(deployment_id: int, action: str, body: dict[str, Any] | None = None) -> Plan[Deployment]:
    return Deployment.from_api((yield from _plan.post(f"/deployments/{deployment_id}/{action}", body)))


def _wait(
    deployment_id: int, timeout: float | None, interval: float, on_update: Callable[[Deployment], None] | None
) -> Plan[Deployment]:
    return (
        yield from poll(
            lambda: _get(deployment_id),
            lambda d: d.state in DEPLOYMENT_SETTLED,
            what=f"deployment {deployment_id}",
            timeout=timeout,
            interval=interval,
            on_update=on_update,
        )
    )


def _key_create(name: str, deployment: int | None) -> Plan[DeploymentKey]:
    return DeploymentKey.from_api(
        (yield from _plan.post("/deployments/keys", {"name": name, "deployment": deployment}))
    )


def _keys() -> Plan[list[DeploymentKey]]:
    return [DeploymentKey.from_api(k) for k in (yield from _plan.list_all("/deployments/keys"))]


def _key_revoke(key_id: int) -> Plan[DeploymentKey]:
    return DeploymentKey.from_api((yield from _plan.post(f"/deployments/keys/{key_id}/revoke")))


def _deploy_body(
    checkpoint: int, name: str, tier: str, replicas: int, max_concurrency: int
) -> dict[str, Any]:
    return {
        "checkpoint": checkpoint,
        "name": name,
        "tier": tier,
        "replicas": replicas,
        "max_concurrency": max_concurrency,
    }


class Keys(SyncResource):
    def create(self, *, name: str, deployment: int | None = None) -> DeploymentKey:
        """A /v1 key (``sk-anneal-…``; ``.key`` holds it, in this answer only), for one deployment or all."""
        return self._run(_key_create(name, deployment))

    def list(self) -> builtins.list[DeploymentKey]:
        return self._run(_keys())

    def revoke(self, key_id: int) -> DeploymentKey:
        return self._run(_key_revoke(key_id))


class AsyncKeys(AsyncResource):
    async def create(self, *, name: str, deployment: int | None = None) -> DeploymentKey:
        return await self._run(_key_create(name, deployment))

    async def list(self) -> builtins.list[DeploymentKey]:
        return await self._run(_keys())

    async def revoke(self, key_id: int) -> DeploymentKey:
        return await self._run(_key_revoke(key_id))


class Deployments(SyncResource):
    def __init__(self, transport: Any) -> None:
        super().__init__(transport)
        self.keys = Keys(transport)

    def create(
        self,
        *,
        checkpoint: int,
        name: str = "",
        tier: str = "standard",
        replicas: int = 1,
        max_concurrency: int = 4,
    ) -> Deployment:
        """Deploy a checkpoint: pending, the regression gate, then starting and ready (see ``wait``)."""
        return self._run(_create(_deploy_body(checkpoint, name, tier, replicas, max_concurrency)))

    def get(self, deployment_id: int) -> Deployment:
        return self._run(_get(deployment_id))

    def list(self) -> builtins.list[Deployment]:
        return self._run(_list())

    def wait(
        self,
        deployment_id: int,
        *,
        timeout: float | None = 600,
        poll_interval: float = 1.0,
        on_update: Callable[[Deployment], None] | None = None,
    ) -> Deployment:
        """Return once the deployment is ready, failed or stopped."""
        return self._run(_wait(deployment_id, timeout, poll_interval, on_update))

    def set_tier(self, deployment_id: int, tier: str) -> Deployment:
        return self._run(_action(deployment_id, "tier", {"tier": tier}))

    def stop(self, deployment_id: int) -> Deployment:
        return self._run(_action(deployment_id, "stop"))

    def override_gate(self, deployment_id: int, *, reason: str = "") -> Deployment:
        return self._run(_action(deployment_id, "gate/override", {"reason": reason}))

    def usage(self, deployment_id: int) -> dict[str, Any]:
        """Tokens and cost per key and tier, per hour, and the tiers' speeds."""
        return self._run(_plan.get(f"/deployments/{deployment_id}/usage"))

    def team_usage(self) -> dict[str, Any]:
        return self._run(_plan.get("/deployments/usage"))

    def set_budget(self, monthly_cap_usd: float | str | None) -> dict[str, Any]:
        return self._run(_plan.post("/deployments/usage", {"monthly_cap_usd": monthly_cap_usd}))


class AsyncDeployments(AsyncResource):
    def __init__(self, transport: Any) -> None:
        super().__init__(transport)
        self.keys = AsyncKeys(transport)

    async def create(
        self,
        *,
        checkpoint: int,
        name: str = "",
        tier: str = "standard",
        replicas: int = 1,
        max_concurrency: int = 4,
    ) -> Deployment:
        return await self._run(_create(_deploy_body(checkpoint, name, tier, replicas, max_concurrency)))

    async def get(self, deployment_id: int) -> Deployment:
        return await self._run(_get(deployment_id))

    async def list(self) -> builtins.list[Deployment]:
        return await self._run(_list())

    async def wait(
        self,
        deployment_id: int,
        *,
        timeout: float | None = 600,
        poll_interval: float = 1.0,
        on_update: Callable[[Deployment], None] | None = None,
    ) -> Deployment:
        return await self._run(_wait(deployment_id, timeout, poll_interval, on_update))

    async def set_tier(self, deployment_id: int, tier: str) -> Deployment:
        return await self._run(_action(deployment_id, "tier", {"tier": tier}))

    async def stop(self, deployment_id: int) -> Deployment:
        return await self._run(_action(deployment_id, "stop"))

    async def override_gate(self, deployment_id: int, *, reason: str = "") -> Deployment:
        return await self._run(_action(deployment_id, "gate/override", {"reason": reason}))

    async def usage(self, deployment_id: int) -> dict[str, Any]:
        return await self._run(_plan.get(f"/deployments/{deployment_id}/usage"))

    async def team_usage(self) -> dict[str, Any]:
        return await self._run(_plan.get("/deployments/usage"))

    async def set_budget(self, monthly_cap_usd: float | str | None) -> dict[str, Any]:
        return await self._run(_plan.post("/deployments/usage", {"monthly_cap_usd": monthly_cap_usd}))
