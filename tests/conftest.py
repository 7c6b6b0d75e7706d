"""Fixtures shared by every test folder. Environment defaults live in pyproject.toml ([tool.pytest] env)."""

import pytest


@pytest.fixture(scope="session")
def stack(tmp_path_factory):
    """The whole platform as users run it: Daphne, three Celery workers, PostgreSQL and Redis."""
    from tests.stack import Stack

    running = Stack(tmp_path_factory.mktemp("stack"))
    running.start()
    yield running
    running.stop()
