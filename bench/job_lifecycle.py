"""What a job's faults and pauses cost, through the real stack on the tiny model.

Starts the platform (tests/stack.py: its own PostgreSQL database and Redis database, Daphne, Celery workers),
runs one job undisturbed, one whose training process is SIGKILLed mid-way, and one paused and resumed, and
prints from the jobs' own event timestamps:

- attempt start-up: from the "running" state event to the first metric (process start, model load);
- pause latency: from the pause request ("pausing") to "paused" (checkpoint at the next step boundary);
- restart: from the kill to the first metric of the resumed attempt;
- wall time of each job, and the steps re-run after the checkpoint (trained again, not reported again).

Usage: .venv/bin/python bench/job_lifecycle.py [--steps 16]
"""

import argparse
import json
import os
import signal
import sys
import tempfile
import time
from datetime import datetime
from pathlib import Path

import psycopg

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.stack import Stack  # noqa: E402

ROWS = [{"prompt": f"{a}+{b}=", "answer": str(a + b)} for a, b in [(12, 45), (33, 21), (70, 19), (41, 8)]]


def wait(fetch, done, timeout_s: float = 600):
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        value = fetch()
        if done(value):
            return value
        time.sleep(0.05)
    raise RuntimeError(f"timed out; last: {value}")


def events(api, job_id: int) -> list[dict]:
    out, after = [], 0
    while page := api.get(f"/jobs/{job_id}/events", params={"after": after, "limit": 500}).json()["results"]:
        out.extend(page)
        after = page[-1]["seq"]
    return out


def at(event: dict) -> float:
    return datetime.fromisoformat(event["created_at"]).timestamp()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=16)
    args = parser.parse_args()
    os.environ.setdefault("ANNEAL_MODEL_STORE", "/tmp/anneal-test/models")
    from gpu_jobs.tiny_model import ensure_tiny_model

    ensure_tiny_model(Path(os.environ["ANNEAL_MODEL_STORE"]))
    stack = Stack(Path(tempfile.mkdtemp(prefix="anneal-bench-")))
    stack.start()
    try:
        api = stack.client(stack.member("bench", team="Bench"))
        body = "".join(json.dumps(r) + "\n" for r in ROWS).encode()
        upload_id = api.post(
            "/datasets/uploads", data={"name": "s"}, files={"file": ("d.jsonl", body)}
        ).json()["id"]
        version = wait(
            lambda: api.get(f"/datasets/uploads/{upload_id}").json(), lambda u: u["state"] == "ready"
        )
        exact = api.post("/verifiers", json={"name": "exact", "spec": {"type": "exact_match"}}).json()
        spec = {
            "dataset_version": version["dataset_version"],
            "verifiers": [{"verifier_version": exact["versions"][0]["id"]}],
            "params": {
                "max_steps": args.steps,
                "num_generations": 4,
                "prompts_per_step": 2,
                "save_steps": 2,
                "max_completion_length": 4,
                "seed": 1,
            },
        }
        db = psycopg.connect(f"postgresql://postgres@127.0.0.1:5432/{stack.db_name}", autocommit=True)

        def row(job_id: int) -> tuple:
            return db.execute(
                "SELECT step, state, child_pid FROM training_job WHERE id=%s", [job_id]
            ).fetchone()

        def finished(job_id: int) -> dict:
            return wait(
                lambda: api.get(f"/jobs/{job_id}").json(), lambda j: j["state"] in ("succeeded", "failed")
            )

        plain = api.post("/jobs", json={**spec, "name": "plain"}).json()["id"]
        started = time.monotonic()
        finished(plain)
        plain_s = time.monotonic() - started

        killed = api.post("/jobs", json={**spec, "name": "killed"}).json()["id"]
        started = time.monotonic()
        wait(lambda: row(killed), lambda r: r[0] >= args.steps // 2)
        kill_at = time.time()
        os.kill(row(killed)[2], signal.SIGKILL)
        finished(killed)
        killed_s = time.monotonic() - started

        paused = api.post("/jobs", json={**spec, "name": "paused"}).json()["id"]
        wait(lambda: row(paused), lambda r: r[0] >= 3)
        api.post(f"/jobs/{paused}/pause")
        wait(lambda: row(paused), lambda r: r[1] == "paused")
        api.post(f"/jobs/{paused}/resume")
        finished(paused)

        def startup(evs: list[dict]) -> list[float]:
            out = []
            for i, e in enumerate(evs):
                if e["kind"] == "state" and e["payload"]["state"] == "running":
                    first = next((x for x in evs[i:] if x["kind"] == "metric"), None)
                    if first:
                        out.append(at(first) - at(e))
            return out

        ev_plain, ev_killed, ev_paused = events(api, plain), events(api, killed), events(api, paused)
        resumed = next(e for e in ev_killed if e["payload"].get("resumed_from_step"))
        first_after = next(e for e in ev_killed if e["seq"] > resumed["seq"] and e["kind"] == "metric")
        pausing = next(e for e in ev_paused if e["payload"].get("state") == "pausing")
        paused_ev = next(e for e in ev_paused if e["payload"].get("state") == "paused")
        killed_at_step = max(
            e["payload"]["step"] for e in ev_killed if e["kind"] == "metric" and at(e) <= kill_at
        )
        print(f"steps per job                          {args.steps}")
        print(
            f"attempt start-up (running -> 1st metric) {', '.join(f'{s:.1f}' for s in startup(ev_plain))} s"
        )
        print(f"undisturbed job wall time              {plain_s:.1f} s")
        print(f"killed job wall time                   {killed_s:.1f} s (+{killed_s - plain_s:.1f} s)")
        print(f"kill -> first metric of attempt 2      {at(first_after) - kill_at:.1f} s")
        print(
            f"steps re-run after the checkpoint      {killed_at_step - resumed['payload']['resumed_from_step']} "
            f"(killed after step {killed_at_step}, resumed from {resumed['payload']['resumed_from_step']})"
        )
        print(f"pause latency (pausing -> paused)      {at(paused_ev) - at(pausing):.1f} s")
        print(f"resumed attempt start-up               {startup(ev_paused)[-1]:.1f} s")
    finally:
        stack.stop()


if __name__ == "__main__":
    main()
