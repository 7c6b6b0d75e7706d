"""Backends by name. A backend is built once per process: it probes the host (cgroups, binaries) on creation.

Warm-pool settings come from the environment (this package never imports Django; platform/anneal/settings.py
validates the same variables at start-up): ANNEAL_SANDBOX_POOL_SIZE (warm sandboxes per process, 0 = every
run starts a fresh sandbox) and ANNEAL_SANDBOX_RECYCLE_AFTER (runs before a warm sandbox is replaced); the
docker backend's engine and image: ANNEAL_DOCKER_URL and ANNEAL_SANDBOX_IMAGE; the kubernetes backend's
namespace, seccomp profile and runtime class: ANNEAL_K8S_NAMESPACE, ANNEAL_K8S_SECCOMP_PROFILE and
ANNEAL_K8S_RUNTIME_CLASS (the cluster comes from the service account or KUBECONFIG).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from functools import cache

from sandboxes.backends.base import SandboxBackend

DEFAULT_POOL_SIZE = 2
DEFAULT_RECYCLE_AFTER = 200


def env_int(name: str, default: int, *, minimum: int) -> int:
    """The whole number in environment variable `name` (default when unset); ValueError naming it otherwise."""
    raw = os.environ.get(name, "").strip()
    if not raw:
        return default
    try:
        value = int(raw)
    except ValueError:
        raise ValueError(f"{name}={raw!r}: expected a whole number >= {minimum}") from None
    if value < minimum:
        raise ValueError(f"{name}={raw!r}: expected a whole number >= {minimum}")
    return value


def _bwrap() -> SandboxBackend:
    from sandboxes.backends.bwrap import BwrapBackend

    return BwrapBackend(
        pool_size=env_int("ANNEAL_SANDBOX_POOL_SIZE", DEFAULT_POOL_SIZE, minimum=0),
        recycle_after=env_int("ANNEAL_SANDBOX_RECYCLE_AFTER", DEFAULT_RECYCLE_AFTER, minimum=1),
    )


def _docker() -> SandboxBackend:
    from sandboxes.backends.docker import DEFAULT_IMAGE, DEFAULT_URL, DockerBackend

    return DockerBackend(
        base_url=os.environ.get("ANNEAL_DOCKER_URL") or DEFAULT_URL,
        image=os.environ.get("ANNEAL_SANDBOX_IMAGE") or DEFAULT_IMAGE,
        pool_size=env_int("ANNEAL_SANDBOX_POOL_SIZE", DEFAULT_POOL_SIZE, minimum=0),
        recycle_after=env_int("ANNEAL_SANDBOX_RECYCLE_AFTER", DEFAULT_RECYCLE_AFTER, minimum=1),
    )


def _kubernetes() -> SandboxBackend:
    from sandboxes.backends.docker import DEFAULT_IMAGE
    from sandboxes.backends.kubernetes import KubernetesBackend

    return KubernetesBackend(
        namespace=os.environ.get("ANNEAL_K8S_NAMESPACE") or "anneal-sandbox",
        image=os.environ.get("ANNEAL_SANDBOX_IMAGE") or DEFAULT_IMAGE,
        seccomp_profile=os.environ.get("ANNEAL_K8S_SECCOMP_PROFILE", "").strip(),
        runtime_class=os.environ.get("ANNEAL_K8S_RUNTIME_CLASS", "").strip(),
    )


_FACTORIES: dict[str, Callable[[], SandboxBackend]] = {
    "bwrap": _bwrap,
    "docker": _docker,
    "kubernetes": _kubernetes,
}
BACKEND_NAMES: tuple[str, ...] = tuple(_FACTORIES)


@cache
def get_backend(name: str) -> SandboxBackend:
    """The shared backend called `name`; ValueError naming the known backends for any other name."""
    if name not in _FACTORIES:
        raise ValueError(f"unknown sandbox backend {name!r}; known backends: {', '.join(BACKEND_NAMES)}")
    return _FACTORIES[name]()
