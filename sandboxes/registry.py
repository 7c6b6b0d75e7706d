"""Backends by name. A backend is built once per process: it probes the host (cgroups, binaries) on creation."""

from __future__ import annotations

from collections.abc import Callable
from functools import cache

from sandboxes.backends.base import SandboxBackend


def _bwrap() -> SandboxBackend:
    from sandboxes.backends.bwrap import BwrapBackend

    return BwrapBackend()


_FACTORIES: dict[str, Callable[[], SandboxBackend]] = {"bwrap": _bwrap}
BACKEND_NAMES: tuple[str, ...] = tuple(_FACTORIES)


@cache
def get_backend(name: str) -> SandboxBackend:
    """The shared backend called `name`; ValueError naming the known backends for any other name."""
    if name not in _FACTORIES:
        raise ValueError(f"unknown sandbox backend {name!r}; known backends: {', '.join(BACKEND_NAMES)}")
    return _FACTORIES[name]()
