"""Modules registered with sandboxes.preload are defined in every warm run, and only from the host's registry."""

import os
import shutil

import pytest

from sandboxes import preload
from sandboxes.backends.bwrap import BwrapBackend
from sandboxes.types import RunRequest

pytestmark = pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap is not installed")


def test_a_registered_module_is_there_in_each_warm_run_and_a_run_cannot_change_it_for_the_next():
    preload.register("anneal_preload_probe", "VALUE = 41\n", filename="/anneal-test/probe.py")
    backend = BwrapBackend(pool_size=1)
    try:
        first = backend.run(
            RunRequest(
                language="python",
                code="import anneal_preload_probe as p\nprint(p.VALUE, p.__file__)\np.VALUE = 99\n",
            )
        )
        second = backend.run(
            RunRequest(language="python", code="import anneal_preload_probe as p\nprint(p.VALUE)")
        )
    finally:
        backend.pool.close()
        preload._MODULES.pop("anneal_preload_probe", None)
    assert first.stdout.split() == ["41", "/anneal-test/probe.py"]
    assert second.stdout.strip() == "41"


def test_more_than_fits_in_an_argument_is_refused_naming_the_limit():
    # Sources travel compressed: random bytes' hex does not compress below half, so 192 KB stays past 96 KB.
    with pytest.raises(ValueError, match="limit"):
        preload.register("too_big", f"x = {os.urandom(96 * 1024).hex()!r}\n", filename="/anneal-test/big.py")
    assert "too_big" not in preload._MODULES
