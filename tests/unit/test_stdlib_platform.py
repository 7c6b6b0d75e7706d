"""platform/ holds the Django project but must never shadow the standard library's `platform` module."""

import os
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
STDLIB = sysconfig.get_paths()["stdlib"]
PROBE = "import platform; assert platform.__file__.startswith({stdlib!r}), platform.__file__; print(platform.system())"


def test_platform_folder_is_not_a_package():
    assert not (ROOT / "platform" / "__init__.py").exists()


def test_pytest_sees_the_standard_library_platform():
    import platform

    assert platform.__file__.startswith(STDLIB)
    assert platform.system() == "Linux"


@pytest.mark.parametrize(
    "entry",
    [
        pytest.param(
            [sys.executable, "manage.py", "shell", "-c", PROBE.format(stdlib=STDLIB)], id="manage.py"
        ),
        pytest.param([sys.executable, "-c", "import anneal.asgi; " + PROBE.format(stdlib=STDLIB)], id="asgi"),
        pytest.param(
            [sys.executable, "-c", "import workers.celery_app; import torch; " + PROBE.format(stdlib=STDLIB)],
            id="celery",
        ),
    ],
)
def test_entry_points_keep_the_standard_library_platform(entry):
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT / "platform"), str(ROOT)])}
    result = subprocess.run(entry, cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stdout.strip().splitlines()[-1] == "Linux"
