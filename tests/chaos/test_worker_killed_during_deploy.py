"""Drill: the default worker, which prepares a deployment (its regression gate, then its replicas), killed while
the gate runs, then started again, as a supervisor restarts a crashed container.

The gate's process dies with the worker; the preparation, whose message would not come back before Redis's
visibility timeout (and would find the deployment claimed), is started again by beat's reaper once its
heartbeat lapses (ANNEAL_REPLICA_HEARTBEAT_TIMEOUT_S), and the deployment turns ready."""

import os
from pathlib import Path

import psycopg
import pytest

from tests.chaos.drill import launch, team_setup, wait_finished, wait_ready
from tests.stack import wait_for

pytestmark = pytest.mark.chaos


def gate_processes(deployment_id: int) -> list[int]:
    """The pids of the gate evaluations of `deployment_id` that are running."""
    found = []
    for entry in Path("/proc").iterdir():
        try:
            argv = (entry / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if b"workers.deploy_gate" in argv and str(deployment_id).encode() in argv:
            found.append(int(entry.name))
    return found


def test_the_worker_killed_mid_gate_the_preparation_starts_again_and_the_deployment_serves(cluster):
    api, body = team_setup(cluster, "deploy-drill")
    # A learning rate so small the checkpoint answers as its base model does: the regression gate passes.
    job = launch(api, body, "to deploy", max_steps=2, save_steps=2, learning_rate=1e-9)
    checkpoint = max(wait_finished(cluster, api, job["id"])["checkpoints"], key=lambda c: c["step"])
    created = api.post("/deployments", json={"checkpoint": checkpoint["id"], "name": "gated"})
    assert created.status_code == 201, created.text
    deployment_id = created.json()["id"]
    running = wait_for(lambda: gate_processes(deployment_id), bool, timeout_s=120, what="the gate running")

    cluster.kill("worker")
    cluster.respawn("worker")
    wait_for(lambda: not any(os.path.exists(f"/proc/{pid}") for pid in running), bool, timeout_s=10,
             what="the gate's process gone with its worker")  # fmt: skip
    ready = wait_ready(cluster, api, deployment_id)

    with psycopg.connect(cluster.database_url, autocommit=True) as conn:
        (attempts,) = conn.execute(
            "SELECT prepare_attempts FROM deployments_deployment WHERE id = %s", [deployment_id]
        ).fetchone()
    assert attempts == 2, "the preparation was not started again: the kill missed the gate"
    assert ready["gate"]["passed"], ready["gate"]
    api.post(f"/deployments/{deployment_id}/stop")
