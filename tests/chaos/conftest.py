"""One cluster for the chaos drills: the platform's processes (tests/stack.py) with two sandbox hosts and beat,
on a PostgreSQL and a Redis of its own that the drills restart, and a sandbox quota a step's batch fills."""

import logging
import os
from pathlib import Path

import pytest

from tests.chaos.services import PrivatePostgres, PrivateRedis
from tests.stack import Stack


@pytest.fixture(scope="session")
def servers(tmp_path_factory):
    workdir = tmp_path_factory.mktemp("chaos-servers")
    postgres, redis_server = PrivatePostgres(), PrivateRedis(workdir)
    postgres.init()
    redis_server.start()
    yield {"postgres": postgres, "redis": redis_server}
    redis_server.stop()
    postgres.remove()


@pytest.fixture(scope="session")
def cluster(servers, tmp_path_factory):
    logging.getLogger("httpx").setLevel(logging.WARNING)
    from gpu_jobs.tiny_model import ensure_tiny_model

    ensure_tiny_model(Path(os.environ["ANNEAL_MODEL_STORE"]))
    running = Stack(
        tmp_path_factory.mktemp("chaos-stack"),
        pg_admin_url=servers["postgres"].admin_url,
        redis_url=servers["redis"].url,
        sandbox_hosts=2,
        beat=True,
        # Every sandbox run fills a team's quota: a batch re-sent after its host died needs the room
        # the dead host held.
        # A replica lost with its serve worker is replaced within 15 s.
        extra_env={"ANNEAL_SANDBOX_TEAM_QUOTA": "1", "ANNEAL_REPLICA_HEARTBEAT_TIMEOUT_S": "10"},
    )
    running.start()
    yield running
    running.stop()
