"""Live-stream latency: a producer emits events to one job at a fixed rate while websocket clients watch it
through the real ASGI server (Daphne) and the Redis channel layer, with events stored in PostgreSQL.

Prints p50/p99 end-to-end latency (from just before the producer's write to a client's receipt) and lost
events (seqs a client never got, neither sent nor listed as sampled out). Goal: p99 < 250 ms, 0 lost.

    .venv/bin/python bench/trace_stream.py [--rate 1000] [--seconds 10] [--clients 20] [--batch-ms 10]
"""

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import time
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# The producer is a child process of this script: it inherits the names chosen here through the environment.
DB_NAME = os.environ.setdefault("ANNEAL_BENCH_DB", f"anneal_bench_{uuid.uuid4().hex[:6]}")
ENV = {
    "DATABASE_URL": f"postgres://postgres@127.0.0.1:5432/{DB_NAME}",
    "REDIS_URL": "redis://127.0.0.1:6379/11",
    "SECRET_KEY": "bench",
    "ANNEAL_CHANNEL_PREFIX": DB_NAME,
    "ANNEAL_DATA_DIR": f"/tmp/{DB_NAME}",
    "PYTHONPATH": os.pathsep.join([str(ROOT / "platform"), str(ROOT)]),
}


def django_setup() -> None:
    os.environ.update(ENV)
    sys.path[:0] = [str(ROOT / "platform"), str(ROOT)]
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "anneal.settings")
    import django

    django.setup()


def produce(job_id: int, rate: int, seconds: float, batch_ms: int) -> None:
    """Emit ``rate`` metric events a second for ``seconds``, in batches written every ``batch_ms``."""
    django_setup()
    from anneal.training.events import job_events_record

    per_batch = max(1, rate * batch_ms // 1000)
    batches = int(seconds * 1000 / batch_ms)
    start = time.monotonic()
    for n in range(batches):
        delay = start + n * batch_ms / 1000 - time.monotonic()
        if delay > 0:
            time.sleep(delay)
        now = time.time()
        job_events_record(job_id=job_id, events=[("metric", {"step": n, "t": now})] * per_batch)
    print(json.dumps({"events": batches * per_batch, "seconds": time.monotonic() - start}))


async def watch(url: str, cookie: str, out: dict) -> None:
    import websockets

    latencies, covered = out["latencies"], out["covered"]
    async with websockets.connect(
        url, additional_headers={"Cookie": cookie, "Origin": "http://127.0.0.1"}
    ) as ws:
        out["connected"].set_result(True)
        async for raw in ws:
            now = time.time()
            frame = json.loads(raw)
            if frame["type"] != "events":
                continue
            for event in frame["events"]:
                covered.add(event["seq"])
                if "t" in event["payload"]:
                    latencies.append(now - event["payload"]["t"])
            covered.update(frame["skipped"])


async def run(args) -> None:
    import httpx
    from django.contrib.auth.models import User
    from django.contrib.sessions.backends.db import SessionStore

    from anneal.accounts.services import member_ensure
    from anneal.datasets.services import dataset_version_create_from_rows
    from anneal.training.models import Job
    from anneal.training.services import job_launch
    from anneal.verifiers.services import verifier_create

    def setup() -> tuple[int, str]:
        user, team = member_ensure(username="bench", password=None, organisation="B", team="B", role="owner")
        version = dataset_version_create_from_rows(
            team=team, user=user, name="d", rows=[{"prompt": "1+1="}] * 8
        )
        verifier = verifier_create(team=team, user=user, name="v", spec={"type": "exact_match"})
        job = job_launch(
            team=team,
            user=user,
            name="bench",
            dataset_version_id=version.id,
            verifiers=[{"verifier_version": verifier.latest_version.id}],
        )
        session = SessionStore()
        session["_auth_user_id"] = str(user.pk)
        session["_auth_user_backend"] = "django.contrib.auth.backends.ModelBackend"
        session["_auth_user_hash"] = User.objects.get(pk=user.pk).get_session_auth_hash()
        session.create()
        return job.pk, f"sessionid={session.session_key}"

    job_id, cookie = await asyncio.to_thread(setup)
    port = 8765
    web = subprocess.Popen(
        [sys.executable, "-m", "daphne", "-b", "127.0.0.1", "-p", str(port), "anneal.asgi:application"],
        cwd=ROOT,
        env={**os.environ, **ENV},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        for _ in range(100):
            try:
                httpx.get(f"http://127.0.0.1:{port}/api/schema/", timeout=2)
                break
            except httpx.HTTPError:
                await asyncio.sleep(0.2)
        loop = asyncio.get_running_loop()
        clients = [
            {"latencies": [], "covered": set(), "connected": loop.create_future()}
            for _ in range(args.clients)
        ]
        url = f"ws://127.0.0.1:{port}/ws/jobs/{job_id}/?after=0"
        tasks = [asyncio.create_task(watch(url, cookie, c)) for c in clients]
        await asyncio.gather(*(c["connected"] for c in clients))
        producer = await asyncio.create_subprocess_exec(
            sys.executable,
            __file__,
            "--produce",
            str(job_id),
            "--rate",
            str(args.rate),
            "--seconds",
            str(args.seconds),
            "--batch-ms",
            str(args.batch_ms),
            stdout=asyncio.subprocess.PIPE,
        )
        produced = json.loads((await producer.communicate())[0].decode().strip().splitlines()[-1])
        last = await asyncio.to_thread(lambda: Job.objects.get(pk=job_id).last_seq)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and not all(last in c["covered"] for c in clients):
            await asyncio.sleep(0.1)
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
    finally:
        web.terminate()
        web.wait()
    latencies = sorted(latency for c in clients for latency in c["latencies"])
    lost = sum(len(set(range(1, last + 1)) - c["covered"]) for c in clients)
    quantile = statistics.quantiles(latencies, n=100) if len(latencies) > 1 else [0.0] * 99
    rate = produced["events"] / produced["seconds"]
    print(
        f"events produced: {produced['events']} in {produced['seconds']:.1f} s "
        f"({rate:.0f}/s, target {args.rate}/s)"
    )
    print(f"clients: {args.clients}; deliveries measured: {len(latencies)}")
    print(
        f"end-to-end latency: p50 {quantile[49] * 1000:.1f} ms, p99 {quantile[98] * 1000:.1f} ms "
        f"(goal p99 < 250 ms)"
    )
    print(f"lost events: {lost} (goal 0)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rate", type=int, default=1000)
    parser.add_argument("--seconds", type=float, default=10)
    parser.add_argument("--clients", type=int, default=20)
    parser.add_argument("--batch-ms", type=int, default=10)
    parser.add_argument("--produce", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.produce:
        produce(args.produce, args.rate, args.seconds, args.batch_ms)
        return
    import psycopg

    with psycopg.connect("postgresql://postgres@127.0.0.1:5432/postgres", autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{DB_NAME}"')
    try:
        env = {**os.environ, **ENV}
        subprocess.run([sys.executable, "manage.py", "migrate", "-v0"], cwd=ROOT, env=env, check=True)
        django_setup()
        asyncio.run(run(args))
    finally:
        from django.db import connections

        connections.close_all()
        with psycopg.connect("postgresql://postgres@127.0.0.1:5432/postgres", autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{DB_NAME}" WITH (FORCE)')


if __name__ == "__main__":
    main()
