"""Drill: PostgreSQL restarted (a fast shutdown: every session cut off, as in a failover) while a job writes
its events. The trainer and the worker watching it wait for the database and carry on: the job finishes in
its first attempt, and its events are one gap-free sequence with every step once."""

import pytest

from tests.chaos.drill import assert_nothing_lost, launch, team_setup, wait_finished, wait_step

pytestmark = pytest.mark.chaos


def test_postgres_restart_mid_job_loses_no_event(cluster, servers):
    api, body = team_setup(cluster, "pg-drill")
    job = launch(api, body, "postgres restarted")
    wait_step(cluster, job["id"], 3)
    servers["postgres"].restart(down_s=5)
    done = wait_finished(cluster, api, job["id"])
    assert done["attempt"] == 1, "the job was restarted instead of waiting for the database"
    assert_nothing_lost(api, done)
    cluster.wait_healthy(timeout_s=60)  # every process of the cluster rode it out (a later drill needs them)
