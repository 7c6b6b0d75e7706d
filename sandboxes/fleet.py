"""Fleet-wide sandbox accounting in Redis: per-team concurrency quotas and per-backend run statistics.

Both are kept where every sandbox host and the platform can see them (the Redis that carries the queues), by
the "sandbox.run_many" task on the hosts. `redis` is always a redis-py client.

Quota: a team may have at most `quota` runs in flight across the fleet. A batch takes one lease per request
(a member of a sorted set scored by its expiry) or none at all; a batch larger than the quota is refused
outright, since it could never start. A holder renews its leases every LEASE_RENEW_S while it runs, so a host
that dies mid-batch frees them within LEASE_S, and the batch re-sent to another host finds its room.

Statistics: per backend, counters of runs by status and by sandbox profile and a capped list of the latest run
durations, from which `snapshot` derives p50/p99 latency and error rates; queue depth is the length of the
queue's Redis list. Hosts: each host (or local process) that ran a batch, with the profiles it can run and its
warm pools, forgotten HOST_TTL_S after its latest batch.
"""

from __future__ import annotations

import json
import math
import socket
import threading
import time
import uuid
from dataclasses import dataclass
from typing import TYPE_CHECKING

from sandboxes.types import Status

if TYPE_CHECKING:
    from redis import Redis

    from sandboxes.backends.base import SandboxBackend

PREFIX = "anneal:sandbox:"
LATENCY_WINDOW = 2000  # latest run durations kept per backend
HOST_TTL_S = 900.0  # a host with no batch for this long leaves the fleet page
LEASE_S = 15.0  # a lease lapses this long after its holder's latest renewal (a dead host's, for instance)
LEASE_RENEW_S = 2.0  # how often a holder renews its leases
RELEASE_TRIES = 10  # a second apart: how long a host waits for Redis to give its leases back

# Take `n` leases (ARGV[3..]) for one team if they fit under the quota; returns 1 when taken, 0 otherwise.
_ACQUIRE = """
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', ARGV[1])
local quota = tonumber(ARGV[2])
local n = #ARGV - 3
if redis.call('ZCARD', KEYS[1]) + n > quota then return 0 end
for i = 4, #ARGV do redis.call('ZADD', KEYS[1], ARGV[3], ARGV[i]) end
redis.call('EXPIRE', KEYS[1], math.ceil(ARGV[3] - ARGV[1]) + 60)
return 1
"""


class QuotaError(ValueError):
    """A batch that can never fit under its team's quota."""


def _team_key(team: str) -> str:
    return f"{PREFIX}team:{team}:leases"


# Push the expiry of those of ARGV[3..] still held to ARGV[1] and the set's own to ARGV[2] seconds; a lease
# already lapsed (its room maybe taken by another batch since) is not brought back.
_RENEW = """
for i = 3, #ARGV do redis.call('ZADD', KEYS[1], 'XX', ARGV[1], ARGV[i]) end
redis.call('EXPIRE', KEYS[1], ARGV[2])
return 1
"""


@dataclass
class Leases:
    """A batch's runs under its team's quota. As a context manager: renewed while the body runs, released at
    its end (whatever the end)."""

    redis: Redis
    team: str
    members: list[str]

    def __post_init__(self) -> None:
        self._stop = threading.Event()
        self._renewer: threading.Thread | None = None

    def __enter__(self) -> Leases:
        self._renewer = threading.Thread(target=self._renew_until_stopped, daemon=True, name="lease-renewal")
        self._renewer.start()
        return self

    def __exit__(self, *exc_info) -> None:
        self._stop.set()
        if self._renewer is not None:
            self._renewer.join()
        self.release()

    def renew(self) -> None:
        """Push every lease's expiry to LEASE_S from now."""
        if self.members:
            self.redis.eval(
                _RENEW, 1, _team_key(self.team), time.time() + LEASE_S, math.ceil(LEASE_S) + 60, *self.members
            )

    def _renew_until_stopped(self) -> None:
        while not self._stop.wait(LEASE_RENEW_S):
            try:
                self.renew()
            except Exception:  # noqa: BLE001 - Redis restarting: the next renewal, well inside LEASE_S, may land
                pass

    def release(self) -> None:
        """Give the runs back. Redis unreachable (restarting): tried again for RELEASE_TRIES s, then left to
        lapse after LEASE_S; a batch that ran is never failed for it."""
        for _ in range(RELEASE_TRIES if self.members else 0):
            try:
                self.redis.zrem(_team_key(self.team), *self.members)
                return
            except Exception:  # noqa: BLE001 - redis-py's ConnectionError and kin
                time.sleep(1.0)


def try_acquire(redis: Redis, *, team: str, runs: int, quota: int) -> Leases | None:
    """Leases for `runs` runs of `team` if they fit under `quota` now, else None. QuotaError if runs > quota."""
    if runs > quota:
        raise QuotaError(f"a batch of {runs} runs is larger than team {team!r}'s sandbox quota of {quota}")
    now = time.time()
    members = [uuid.uuid4().hex for _ in range(runs)]
    taken = redis.eval(_ACQUIRE, 1, _team_key(team), now, quota, now + LEASE_S, *members)
    return Leases(redis=redis, team=team, members=members) if taken else None


def in_flight(redis: Redis, *, team: str) -> int:
    """Runs of `team` holding leases now."""
    return redis.zcount(_team_key(team), time.time(), "+inf")


WHERE = ("local", "remote")


def describe_host(backend: SandboxBackend) -> dict:
    """What the fleet page shows of the host running `backend`: its name, the profiles it can run, its warm
    pools by profile."""
    return {
        "name": socket.gethostname(),
        "backend": backend.name,
        "profiles": backend.profiles(),
        "pools": backend.warm_pools(),
    }


def record(
    redis: Redis,
    *,
    backend: str,
    results: list[dict],
    where: str = "remote",
    profiles: list[str] | None = None,
    host: dict | None = None,
) -> None:
    """Add a finished batch's runs (RunResult dicts) to `backend`'s statistics. `where`: "remote" for a
    sandbox host's batch, "local" for one a client ran in its own process (SANDBOX_EXECUTION=local);
    `profiles`: each run's sandbox profile; `host`: describe_host() of the host (or process) that ran them."""
    if not results:
        return
    if where not in WHERE:
        raise ValueError(f"where must be one of {WHERE}, got {where!r}")
    pipe = redis.pipeline(transaction=False)
    pipe.hincrby(f"{PREFIX}stats:{backend}:where", where, len(results))
    for profile in profiles or []:
        pipe.hincrby(f"{PREFIX}stats:{backend}:profile", profile, 1)
    if host is not None:
        key = f"{where}:{host['name']}:{backend}"
        pipe.hset(f"{PREFIX}hosts", key, json.dumps({**host, "where": where, "seen": time.time()}))
        pipe.hincrby(f"{PREFIX}host_runs", key, len(results))
    for result in results:
        pipe.hincrby(f"{PREFIX}stats:{backend}:status", result["status"], 1)
    pipe.lpush(f"{PREFIX}stats:{backend}:latency", *[round(float(r["duration_s"]), 5) for r in results])
    pipe.ltrim(f"{PREFIX}stats:{backend}:latency", 0, LATENCY_WINDOW - 1)
    pipe.sadd(f"{PREFIX}stats:backends", backend)
    pipe.execute()


def _percentile(values: list[float], fraction: float) -> float | None:
    if not values:
        return None
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))]


def snapshot(redis: Redis, *, queue: str = "sandbox") -> dict:
    """{"queue_depth": int, "backends": {name: {runs, local_runs, remote_runs, by_status, sandbox_error_rate,
    failure_rate,
    p50_ms, p99_ms, window}}} over everything recorded (latency over the latest LATENCY_WINDOW runs)."""
    backends = {}
    for raw in sorted(redis.smembers(f"{PREFIX}stats:backends")):
        name = raw.decode() if isinstance(raw, bytes) else raw
        counts = {
            (k.decode() if isinstance(k, bytes) else k): int(v)
            for k, v in redis.hgetall(f"{PREFIX}stats:{name}:status").items()
        }
        by_profile = {_text(k): int(v) for k, v in redis.hgetall(f"{PREFIX}stats:{name}:profile").items()}
        latencies = [float(x) for x in redis.lrange(f"{PREFIX}stats:{name}:latency", 0, -1)]
        runs = sum(counts.values())
        local = int(redis.hget(f"{PREFIX}stats:{name}:where", "local") or 0)
        p50, p99 = _percentile(latencies, 0.5), _percentile(latencies, 0.99)
        backends[name] = {
            "runs": runs,
            # Runs recorded before `where` was kept were all a host's.
            "local_runs": local,
            "remote_runs": runs - local,
            "by_status": counts,
            "by_profile": by_profile,  # runs recorded before profiles were counted are left out
            # The sandbox failing (not the program): what an operator is paged for.
            "sandbox_error_rate": round(counts.get(Status.SANDBOX_ERROR, 0) / runs, 4) if runs else 0.0,
            # Programs that did not end "ok" (failed, timeout, memory, output_limit, sandbox_error).
            "failure_rate": round(1 - counts.get(Status.OK, 0) / runs, 4) if runs else 0.0,
            "p50_ms": None if p50 is None else round(p50 * 1000, 2),
            "p99_ms": None if p99 is None else round(p99 * 1000, 2),
            "window": len(latencies),
        }
    return {"queue_depth": int(redis.llen(queue)), "backends": backends, "hosts": hosts(redis)}


def hosts(redis: Redis) -> list[dict]:
    """The hosts (and local processes) that ran sandbox batches in the last HOST_TTL_S, by name: describe_host()
    with "where", "runs" and "seen_s" (seconds since their latest batch). Older ones are forgotten."""
    now = time.time()
    seen = []
    for raw_key, raw in redis.hgetall(f"{PREFIX}hosts").items():
        key = _text(raw_key)
        try:
            entry = json.loads(raw)
            age = now - float(entry["seen"])
        except (ValueError, KeyError, TypeError):
            age = math.inf
        if age > HOST_TTL_S:
            redis.hdel(f"{PREFIX}hosts", key)
            redis.hdel(f"{PREFIX}host_runs", key)
            continue
        entry["runs"] = int(redis.hget(f"{PREFIX}host_runs", key) or 0)
        entry["seen_s"] = round(max(age, 0.0), 1)
        seen.append(entry)
    return sorted(
        seen, key=lambda entry: (entry.get("where", ""), entry.get("name", ""), entry.get("backend", ""))
    )


def _text(value: bytes | str) -> str:
    return value.decode() if isinstance(value, bytes) else value
