"""Fleet accounting against the test Redis: team quotas, per-backend statistics, and a host's batch path."""

import os
import socket
import time
import uuid

import pytest
import redis

from sandboxes import fleet
from sandboxes.profiles import PROFILES
from sandboxes.service import run_batch
from sandboxes.types import RunRequest


@pytest.fixture
def store():
    client = redis.Redis.from_url(os.environ.get("REDIS_URL", "redis://127.0.0.1:6379/9"))
    client.ping()
    return client


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:10]}"


def test_a_team_gets_leases_up_to_its_quota_and_back_on_release(store):
    team = unique("team")
    first = fleet.try_acquire(store, team=team, runs=3, quota=5)
    assert first is not None and fleet.in_flight(store, team=team) == 3
    assert fleet.try_acquire(store, team=team, runs=3, quota=5) is None  # would be 6
    other = fleet.try_acquire(store, team=unique("team"), runs=5, quota=5)  # quotas are per team
    assert other is not None
    first.release()
    assert fleet.in_flight(store, team=team) == 0
    assert fleet.try_acquire(store, team=team, runs=5, quota=5) is not None


def test_leases_of_a_dead_host_expire(store, monkeypatch):
    team = unique("team")
    monkeypatch.setattr(fleet, "LEASE_S", 0.2)
    assert fleet.try_acquire(store, team=team, runs=2, quota=2) is not None  # never released
    assert fleet.try_acquire(store, team=team, runs=1, quota=2) is None
    time.sleep(0.3)
    assert fleet.try_acquire(store, team=team, runs=2, quota=2) is not None


def test_leases_held_by_a_live_holder_are_renewed_past_their_lease_time(store, monkeypatch):
    team = unique("team")
    monkeypatch.setattr(fleet, "LEASE_S", 0.4)
    monkeypatch.setattr(fleet, "LEASE_RENEW_S", 0.1)
    with fleet.try_acquire(store, team=team, runs=2, quota=2):
        time.sleep(1.0)  # more than twice LEASE_S: only the renewals keep the runs held
        assert fleet.in_flight(store, team=team) == 2
        assert fleet.try_acquire(store, team=team, runs=1, quota=2) is None
    assert fleet.in_flight(store, team=team) == 0  # released at the end of the body


def test_a_lapsed_lease_is_not_brought_back_by_a_late_renewal(store, monkeypatch):
    team = unique("team")
    monkeypatch.setattr(fleet, "LEASE_S", 0.2)
    stalled = fleet.try_acquire(store, team=team, runs=2, quota=2)  # its holder stalled past LEASE_S
    time.sleep(0.3)
    taken = fleet.try_acquire(store, team=team, runs=2, quota=2)
    assert taken is not None, "the lapsed leases still held the room"
    monkeypatch.setattr(fleet, "LEASE_S", 30.0)
    stalled.renew()
    assert fleet.in_flight(store, team=team) == 2, "the late renewal put runs over the quota"
    taken.release()


def test_a_batch_larger_than_the_quota_is_refused_with_the_numbers(store):
    with pytest.raises(
        fleet.QuotaError, match="batch of 9 runs is larger than team 't1'.s sandbox quota of 4"
    ):
        fleet.try_acquire(store, team="t1", runs=9, quota=4)


def test_statistics_give_latency_percentiles_and_error_rates(store):
    backend = unique("backend")
    results = [{"status": "ok", "duration_s": (i + 1) / 1000} for i in range(98)]
    results += [{"status": "sandbox_error", "duration_s": 0.5}, {"status": "timeout", "duration_s": 1.0}]
    fleet.record(store, backend=backend, results=results)
    queue = unique("queue")
    store.lpush(queue, "a", "b")
    snap = fleet.snapshot(store, queue=queue)
    assert snap["queue_depth"] == 2
    stats = snap["backends"][backend]
    assert stats["runs"] == 100
    assert stats["by_status"] == {"ok": 98, "sandbox_error": 1, "timeout": 1}
    assert stats["sandbox_error_rate"] == 0.01
    assert stats["failure_rate"] == 0.02
    assert stats["p50_ms"] == 51.0
    assert stats["p99_ms"] == 1000.0
    store.delete(queue)


def test_a_host_runs_a_batch_within_its_teams_quota_and_records_it(store):
    team, batch = unique("team"), unique("batch")
    requests = [RunRequest(language="python", code=f"print({i})").to_dict() for i in range(3)]
    held = fleet.try_acquire(store, team=team, runs=2, quota=4)
    # Two of four in flight elsewhere: a batch of three must wait (None: the task retries later).
    assert run_batch(requests, "bwrap", batch_id=batch, redis=store, team=team, quota=4) is None
    held.release()
    before = fleet.snapshot(store)["backends"].get("bwrap", {}).get("runs", 0)
    results = run_batch(requests, "bwrap", batch_id=batch, redis=store, team=team, quota=4)
    assert [r["stdout"] for r in results] == ["0\n", "1\n", "2\n"]
    assert fleet.in_flight(store, team=team) == 0
    assert fleet.snapshot(store)["backends"]["bwrap"]["runs"] >= before + 3


def test_each_host_is_listed_with_its_profiles_pools_and_runs_by_profile(store):
    requests = [
        RunRequest(language="python", code="print(1)").to_dict(),
        RunRequest(language="python", code="print(2)", profile="c-cpp").to_dict(),
    ]
    before = fleet.snapshot(store)["backends"].get("bwrap", {}).get("by_profile", {})
    run_batch(requests, "bwrap", batch_id=unique("batch"), redis=store, team=None, quota=4)
    snap = fleet.snapshot(store)
    after = snap["backends"]["bwrap"]["by_profile"]
    assert (after["python"] - before.get("python", 0), after["c-cpp"] - before.get("c-cpp", 0)) == (1, 1)
    (host,) = [h for h in snap["hosts"] if h["where"] == "remote" and h["backend"] == "bwrap"]
    assert host["name"] == socket.gethostname()
    assert host["profiles"] == list(PROFILES)  # this host has every toolchain (setup-system.sh test)
    assert host["runs"] >= 2 and host["seen_s"] < 60


def test_a_host_silent_for_longer_than_the_ttl_is_forgotten(store, monkeypatch):
    backend = unique("backend")
    host = {"name": unique("host"), "backend": backend, "profiles": ["python"], "pools": {}}
    fleet.record(store, backend=backend, results=[{"status": "ok", "duration_s": 0.1}], host=host)
    assert [h["name"] for h in fleet.hosts(store)].count(host["name"]) == 1
    monkeypatch.setattr(fleet, "HOST_TTL_S", -1.0)
    assert host["name"] not in [h["name"] for h in fleet.hosts(store)]
    monkeypatch.undo()
    assert host["name"] not in [h["name"] for h in fleet.hosts(store)]  # removed, not only hidden
