"""Drill: a sandbox host killed (SIGKILL to the whole host, its pool included) while it runs one of a job's
batches. The client sees the host's heartbeat lapse and sends the batch again, under the same id, to the
other host, which finds room under the team's quota because the dead host's leases lapse within seconds.

Nothing is lost and nothing is counted twice: the job is seeded, so the same job run without the fault
is the reference, and every step's rewards must come out exactly as they do there (a batch scored 0 for the
outage, or a result taken twice, would change them and every step trained on them)."""

import os
import time

import pytest
import redis

from sandboxes.remote import KEY_PREFIX, heartbeat_key
from tests.chaos.drill import assert_nothing_lost, launch, team_setup, wait_finished, wait_step
from tests.stack import all_events

pytestmark = pytest.mark.chaos

# Each check sleeps, so that a batch runs long enough (about a second) for the kill to land inside it.
SLOW_ROWS = [
    {
        "prompt": f"{a}+{b}=",
        "answer": str(a + b),
        "tests": ["__import__('time').sleep(0.25)", f"assert result == {a + b}"],
    }
    for a, b in [(12, 45), (33, 21), (70, 19), (41, 8), (25, 25), (60, 13), (14, 77), (9, 90)]
]
STEPS = 8


def host_of(cluster, label: str) -> str | None:
    """The stack's name for the sandbox host whose pool process wrote heartbeat `label` ("hostname:pid")."""
    pid = int(label.rsplit(":", 1)[1])
    hosts = {proc.pid: name for name, proc in cluster.processes.items() if name.startswith("sandbox")}
    for _ in range(3):  # the pool process, or the host's main process itself
        if pid in hosts:
            return hosts[pid]
        try:
            with open(f"/proc/{pid}/stat") as stat:
                pid = int(stat.read().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            return None
    return None


def running_batch(cluster, store, timeout_s: float = 60) -> tuple[str, str]:
    """(batch id, host name) of a batch a host is running now: its heartbeat alive, its result not stored (a
    heartbeat outlives its batch by a few seconds)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        for key in store.scan_iter(match=f"{KEY_PREFIX}*:host"):
            batch_id = key.decode()[len(KEY_PREFIX) : -len(":host")]
            label = store.get(key)
            name = label and host_of(cluster, label.decode())
            if name and not store.exists(f"celery-task-meta-{batch_id}"):
                return batch_id, name
        time.sleep(0.02)
    raise AssertionError(f"no sandbox batch seen running in {timeout_s} s")


def rerun_by(cluster, store, batch_id: str, dead: str, timeout_s: float = 60) -> str:
    """The host that ran `batch_id` again after `dead` was killed."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        label = store.get(heartbeat_key(batch_id))
        name = label and host_of(cluster, label.decode())
        if name and name != dead:
            return name
        time.sleep(0.05)
    raise AssertionError(f"batch {batch_id} was not run again on another host in {timeout_s} s")


def step_rewards(api, job_id: int) -> dict[int, tuple]:
    return {
        e["payload"]["step"]: (e["payload"]["reward"], e["payload"].get("rewards/tests"))
        for e in all_events(api, job_id)
        if e["kind"] == "metric" and "reward" in e["payload"]
    }


def test_a_sandbox_host_killed_mid_batch_costs_the_job_nothing(cluster):
    assert cluster.env.get("ANNEAL_SANDBOX_TEAM_QUOTA") == "1", "the drill needs batches that fill the quota"
    store = redis.Redis.from_url(cluster.redis_url)
    api, body = team_setup(cluster, "sandbox-drill", rows=SLOW_ROWS)
    reference = wait_finished(cluster, api, launch(api, body, "reference", max_steps=STEPS)["id"])
    job = launch(api, body, "sandbox host killed", max_steps=STEPS)
    wait_step(cluster, job["id"], 2)
    batch_id, dead = running_batch(cluster, store)
    cluster.kill(dead)
    try:
        survivor = rerun_by(cluster, store, batch_id, dead)
        done = wait_finished(cluster, api, job["id"])
    finally:
        cluster.respawn(dead)
    assert survivor != dead
    assert done["attempt"] == 1, "the job was restarted instead of its batch being re-sent"
    events = assert_nothing_lost(api, done)
    outages = [
        e["payload"]["reason"] for e in events if "sandbox unavailable" in e["payload"].get("reason", "")
    ]
    assert not outages, f"samples scored 0 for the outage: {outages[:3]}"
    assert step_rewards(api, done["id"]) == step_rewards(api, reference["id"]), (
        "the rewards differ from the same job run without the fault"
    )
    assert os.kill(cluster.processes[dead].pid, 0) is None  # the host is back for the drills after this one
