"""The sandbox backends a toolchain profile's tests run on: a warm bubblewrap pool, and a warm docker pool when
the profile's image is built (`make sandbox-image`; skipped with the reason otherwise)."""

import pytest

from sandboxes.backends.bwrap import BwrapBackend
from sandboxes.backends.docker import DockerBackend


def backend_params(profile: str) -> list:
    """pytest params making a backend each, for a module-scoped fixture: `request.param()`."""
    problem = DockerBackend().engine_problem(profile)
    return [
        pytest.param(lambda: BwrapBackend(pool_size=1), id="bwrap"),
        pytest.param(
            lambda: DockerBackend(pool_size=1),
            id="docker",
            marks=pytest.mark.skipif(bool(problem), reason=problem),
        ),
    ]


def close(backend) -> None:
    """Stop a backend's warm sandboxes (every profile's, for docker)."""
    (backend.close if isinstance(backend, DockerBackend) else backend.pool.close)()
