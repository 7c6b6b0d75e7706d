"""Fixtures shared by every test folder. Environment defaults live in pyproject.toml ([tool.pytest] env).

The named people and teams (`world`), sign-in helpers and the job launcher are described in tests/world.py.
"""

import pytest

from tests.world import Launcher, world_create


@pytest.fixture(scope="session")
def stack(tmp_path_factory):
    """The whole platform as users run it: Daphne, three Celery workers, PostgreSQL and Redis."""
    from tests.stack import Stack

    running = Stack(tmp_path_factory.mktemp("stack"))
    running.start()
    yield running
    running.stop()


@pytest.fixture
def data_dirs(settings, tmp_path):
    """Uploads, dataset versions and other platform data under the test's own temporary folder."""
    settings.UPLOAD_DIR = tmp_path / "uploads"
    settings.DATASET_DIR = tmp_path / "datasets"
    settings.DATA_DIR = tmp_path / "data"
    return tmp_path


@pytest.fixture
def world(db, data_dirs, settings) -> dict:
    """Acme, teams Core and Rivals and their people by name (tests/world.py): owner, expert, teammate,
    outsider, org, core, rivals."""
    # The production hasher is slow on purpose; these tests only need passwords to work.
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
    return world_create()


@pytest.fixture
def launch(world) -> Launcher:
    """launch("name", team=..., verifier=..., max_steps=1) -> Job; see tests.world.Launcher."""
    return Launcher(world)
