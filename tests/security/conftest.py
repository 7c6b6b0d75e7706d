"""Every sandbox backend this machine can run, as one parametrised `backend` fixture.

Cold variants start a fresh sandbox per run; warm ones run through one warm sandbox (pool size 1, so a test's
consecutive runs land in the same sandbox and can check that nothing leaks from one to the next). The docker
variants need the Podman Docker API service and the sandbox image (`make sandbox-image`); without them they
are skipped with the reason.
"""

import shutil
from functools import cache

import pytest

from sandboxes.backends.bwrap import BwrapBackend
from sandboxes.backends.docker import DockerBackend


@cache
def docker_problem() -> str:
    return DockerBackend().engine_problem()


def _variants() -> list:
    no_bwrap = pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap is not installed")
    return [
        pytest.param("bwrap-cold", marks=no_bwrap, id="bwrap-cold"),
        pytest.param("bwrap-warm", marks=no_bwrap, id="bwrap-warm"),
        pytest.param("docker-cold", id="docker-cold"),  # skipped in the fixture when no engine answers
        pytest.param("docker-warm", id="docker-warm"),
    ]


@pytest.fixture(scope="session", params=_variants())
def backend(request):
    kind, temperature = request.param.split("-")
    if kind == "docker" and docker_problem():
        pytest.skip(docker_problem())
    make = BwrapBackend if kind == "bwrap" else DockerBackend
    if temperature == "cold":
        yield make(pool_size=0)
        return
    warm = make(pool_size=1, recycle_after=10_000)
    yield warm
    if isinstance(warm, DockerBackend):
        warm.close()  # every profile's pool
    else:
        warm.pool.close()
