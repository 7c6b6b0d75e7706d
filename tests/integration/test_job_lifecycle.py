"""A job's life through the real stack, on the tiny model: SIGKILL of the training process mid-job, pause and
resume, the queue, a budget cap that pauses, a time limit that stops, and specs refused with the field named.

The gpu worker runs one job at a time (ANNEAL_GPU_SLOTS=1), so the jobs of this module queue behind each other.
"""

import json
import logging
import os
import signal
import sys
import time
from pathlib import Path

import psycopg
import pytest

from tests.stack import all_events, assert_each_step_once, wait_for

pytestmark = pytest.mark.integration

ROWS = [{"prompt": f"{a}+{b}=", "answer": str(a + b)} for a, b in [(12, 45), (33, 21), (70, 19), (41, 8)]]
FAST = {
    "max_steps": 10,
    "num_generations": 4,
    "prompts_per_step": 2,
    "max_completion_length": 4,
    "save_steps": 2,
    "rollouts_per_step": 2,
    "seed": 3,
}
FINISHED = ("succeeded", "failed", "cancelled", "stopped")
# Jobs that are interrupted mid-way run this many steps, so that the interruption lands before the end.
LONG = 16


def assert_reported_once(events: list[dict], job: dict) -> None:
    assert_each_step_once(events, job, rollouts_per_step=FAST["rollouts_per_step"])


@pytest.fixture(scope="module")
def owner(stack):
    return stack.client(stack.member("lifecycle-owner", team="Lifecycle"))


@pytest.fixture(scope="module", autouse=True)
def quiet_and_built():
    logging.getLogger("httpx").setLevel(logging.WARNING)
    # The jobs' timeouts count training, not the first build of the tiny model (which others may be running).
    from gpu_jobs.tiny_model import ensure_tiny_model

    ensure_tiny_model(Path(os.environ["ANNEAL_MODEL_STORE"]))


@pytest.fixture(scope="module")
def setup(owner):
    body = "".join(json.dumps(r) + "\n" for r in ROWS).encode()
    response = owner.post("/datasets/uploads", data={"name": "sums"}, files={"file": ("d.jsonl", body)})
    assert response.status_code == 202, response.text
    upload_id = response.json()["id"]
    ready = wait_for(
        lambda: owner.get(f"/datasets/uploads/{upload_id}").json(),
        lambda u: u["state"] in ("ready", "failed", "review"),
        timeout_s=60,
        what="the ingest",
    )
    exact = owner.post("/verifiers", json={"name": "exact", "spec": {"type": "exact_match"}})
    assert ready["state"] == "ready" and exact.status_code == 201, (ready, exact.text)
    return {
        "dataset_version": ready["dataset_version"],
        "verifiers": [{"verifier_version": exact.json()["versions"][0]["id"], "weight": 1.0}],
    }


def launch(owner, setup, name: str, **params) -> dict:
    response = owner.post("/jobs", json={"name": name, **setup, "params": {**FAST, **params}})
    assert response.status_code == 201, response.text
    return response.json()


def wait_step(stack, job_id: int, step: int, timeout_s: float = 240) -> None:
    """Poll the database (fast: a tiny-model step takes ~0.1 s) until the job has reported ``step``."""
    deadline = time.monotonic() + timeout_s
    with psycopg.connect(f"postgresql://postgres@127.0.0.1:5432/{stack.db_name}", autocommit=True) as conn:
        while time.monotonic() < deadline:
            row = conn.execute("SELECT step, state FROM training_job WHERE id = %s", [job_id]).fetchone()
            if row[0] >= step or row[1] in FINISHED:
                return
            time.sleep(0.05)
    raise AssertionError(f"job {job_id} did not reach step {step} in {timeout_s} s\n{stack.log_tail('gpu')}")


def child_pid(stack, job_id: int) -> int | None:
    with psycopg.connect(f"postgresql://postgres@127.0.0.1:5432/{stack.db_name}") as conn:
        row = conn.execute("SELECT child_pid, state FROM training_job WHERE id = %s", [job_id]).fetchone()
    return row[0] if row and row[1] == "running" else None


def test_bad_limits_are_refused_with_the_field_named_and_estimate_launches_nothing(owner, setup):
    for params, field in [
        ({"budget": -1}, "params.budget"),
        ({"time_limit_minutes": "soon"}, "params.time_limit_minutes"),
        ({"device_type": "abacus"}, "params.device_type"),
        ({"devices": 10_000}, "params.devices"),
        ({"priority": 1000}, "params.priority"),
        ({"pause_on_alarms": "no_signal,moon_phase"}, "params.pause_on_alarms"),
    ]:
        for path in ("/jobs", "/jobs/estimate"):
            response = owner.post(path, json={**setup, "params": {**FAST, **params}})
            assert response.status_code == 400, (path, params, response.text)
            assert [e["field"] for e in response.json()["errors"]] == [field], response.text
    before = len(owner.get("/jobs").json())
    estimate = owner.post("/jobs/estimate", json={**setup, "params": {**FAST, "devices": 2, "budget": 5}})
    assert estimate.status_code == 200, estimate.text
    body = estimate.json()
    assert body["currency"] == "USD" and body["devices"] == 2 and body["device_type"] == "cpu"
    assert body["total"] > 0 and body["device_cost"] > 0 and body["budget"] == 5
    assert len(owner.get("/jobs").json()) == before


def test_sigkill_mid_job_resumes_from_checkpoint_then_pause_and_resume(stack, owner, setup):
    killed = launch(owner, setup, "killed mid-job", max_steps=LONG)
    paused = launch(owner, setup, "paused and resumed", max_steps=LONG)

    # One gpu slot: the second job waits, first in line, with an estimated start.
    queue = owner.get("/jobs/queue").json()
    waiting = {w["job"]: w for w in queue["waiting"]}
    assert waiting[paused["id"]]["position"] == 1 and waiting[paused["id"]]["estimated_start"]
    assert killed["id"] not in waiting

    wait_step(stack, killed["id"], 3)  # past the checkpoint of step 2
    pid = child_pid(stack, killed["id"])
    assert pid, stack.log_tail("gpu")
    os.kill(pid, signal.SIGKILL)

    job = wait_for(
        lambda: owner.get(f"/jobs/{killed['id']}").json(),
        lambda j: j["state"] in FINISHED,
        timeout_s=240,
        what="the killed job to finish",
    )
    assert job["state"] == "succeeded", f"{job['error']}\n{stack.log_tail('gpu')}"
    assert job["restarts"] == 1 and job["attempt"] == 2
    events = all_events(owner, killed["id"])
    assert_reported_once(events, job)
    states = [e["payload"] for e in events if e["kind"] == "state"]
    requeued = next(s for s in states if s.get("requeued"))
    assert "SIGKILL" in requeued["reason"] and "memory" not in requeued["reason"]
    resumed = [s for s in states if s.get("resumed_from_step")]
    assert len(resumed) == 1 and resumed[0]["resumed_from_step"] >= 2 and resumed[0]["attempt"] == 2
    assert job["spend"]["total"] > 0 and job["spend"]["run_seconds"] > 0

    # The second job now runs: pause it, then resume it.
    wait_step(stack, paused["id"], 3)
    response = owner.post(f"/jobs/{paused['id']}/pause")
    assert response.status_code == 200 and response.json()["state"] == "pausing", response.text
    job = wait_for(
        lambda: owner.get(f"/jobs/{paused['id']}").json(),
        lambda j: j["state"] not in ("running", "pausing"),
        timeout_s=120,
        what="the pause",
    )
    assert job["state"] == "paused", f"{job['error']}\n{stack.log_tail('gpu')}"
    assert job["step"] < job["max_steps"] and "paused by lifecycle-owner" in job["reason"]
    assert any(c["step"] == job["step"] for c in job["checkpoints"])
    assert child_pid(stack, paused["id"]) is None
    response = owner.post(f"/jobs/{paused['id']}/resume")
    assert response.status_code == 200 and response.json()["state"] == "queued", response.text
    job = wait_for(
        lambda: owner.get(f"/jobs/{paused['id']}").json(),
        lambda j: j["state"] in FINISHED,
        timeout_s=240,
        what="the resumed job to finish",
    )
    assert job["state"] == "succeeded", f"{job['error']}\n{stack.log_tail('gpu')}"
    assert job["restarts"] == 0 and job["attempt"] == 2
    assert_reported_once(all_events(owner, paused["id"]), job)


def memory_cgroup(pid: int) -> Path | None:
    """Move ``pid`` into a new memory cgroup (v1 or v2) that lets it allocate 1 MiB more (its charges stay where
    they were); None where this host does not let the tests make one."""
    groups = dict(line.split(":", 2)[1:] for line in Path(f"/proc/{pid}/cgroup").read_text().splitlines())
    memory_v1 = next(
        (path for controllers, path in groups.items() if "memory" in controllers.split(",")), None
    )
    if memory_v1 is not None:
        parent, limit = Path("/sys/fs/cgroup/memory") / memory_v1.lstrip("/"), "memory.limit_in_bytes"
    else:
        parent, limit = Path("/sys/fs/cgroup") / groups.get("", "/").lstrip("/"), "memory.max"
    group = parent / f"anneal-oom-test-{pid}"
    try:
        group.mkdir()
        (group / limit).write_text(str(1 << 20))
        (group / "cgroup.procs").write_text(str(pid))
    except OSError:
        return None
    return group


def remove_cgroup(group: Path) -> None:
    for _ in range(300):  # it empties once the killed process is reaped
        try:
            group.rmdir()
            return
        except OSError:
            time.sleep(0.1)


def test_a_training_process_out_of_memory_is_requeued_with_a_reason_that_says_so(stack, owner, setup):
    job = launch(owner, setup, "out of memory", max_steps=60)
    wait_step(stack, job["id"], 3)
    pid = child_pid(stack, job["id"])
    assert pid, stack.log_tail("gpu")
    group = memory_cgroup(pid)  # the kernel's OOM killer then ends it at its next allocations
    if group is None:
        owner.post(f"/jobs/{job['id']}/cancel")
        pytest.skip("this host does not let the tests make a memory cgroup")
    try:
        job = wait_for(
            lambda: owner.get(f"/jobs/{job['id']}").json(),
            lambda j: j["state"] in FINISHED,
            timeout_s=240,
            what="the job out of memory to finish",
        )
    finally:
        remove_cgroup(group)
    assert job["state"] == "succeeded" and job["restarts"] == 1, f"{job['error']}\n{stack.log_tail('gpu')}"
    states = [e["payload"] for e in all_events(owner, job["id"]) if e["kind"] == "state"]
    reason = next(s for s in states if s.get("requeued"))["reason"]
    assert "ran out of memory" in reason and "SIGKILL" in reason, reason
    assert "used up to" in reason and "lora_rank" in reason, reason


def test_budget_cap_pauses_and_time_limit_stops(stack, owner, setup):
    capped = launch(owner, setup, "capped", budget=0.00002)  # 0.72 s of one cpu at 0.10 USD an hour
    limited = launch(owner, setup, "limited", time_limit_minutes=0.001)
    job = wait_for(
        lambda: owner.get(f"/jobs/{capped['id']}").json(),
        lambda j: j["state"] not in ("queued", "running", "pausing"),
        timeout_s=240,
        what="the budget cap",
    )
    assert job["state"] == "paused", f"{job['error']}\n{stack.log_tail('gpu')}"
    assert "budget cap reached" in job["reason"] and job["spend"]["total"] >= 0.00002
    assert 0 < job["step"] < job["max_steps"]
    refused = owner.post(f"/jobs/{capped['id']}/resume")
    assert refused.status_code == 400 and refused.json()["errors"][0]["field"] == "budget", refused.text
    cancelled = owner.post(f"/jobs/{capped['id']}/cancel")
    assert cancelled.json()["state"] == "cancelled"

    job = wait_for(
        lambda: owner.get(f"/jobs/{limited['id']}").json(),
        lambda j: j["state"] in FINISHED,
        timeout_s=240,
        what="the time limit",
    )
    assert job["state"] == "stopped", f"{job['error']}\n{stack.log_tail('gpu')}"
    assert "time limit reached" in job["reason"] and job["step"] < job["max_steps"]
    assert any(c["step"] == job["step"] for c in job["checkpoints"])


def test_sigkill_of_the_worker_then_the_reaper_requeues_and_a_new_worker_resumes(stack, owner, setup):
    job = launch(owner, setup, "worker killed", max_steps=LONG)
    wait_step(stack, job["id"], 3)
    pid = child_pid(stack, job["id"])
    assert pid, stack.log_tail("gpu")
    os.kill(stack.processes["gpu"].pid, signal.SIGKILL)  # the worker's main process; its pool dies with it

    def alive() -> bool:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return False
        return True

    # The training process sees its worker gone and exits, writing nothing more.
    wait_for(alive, lambda a: not a, timeout_s=60, what="the orphaned training process to exit")
    time.sleep(11)  # heartbeats stopped with the worker; let the last one age past the reaper's 10 s
    reaped = stack.manage(
        "shell",
        "-c",
        "from anneal.training.housekeeping import jobs_reap_stale; print(jobs_reap_stale(timeout_s=10))",
    )
    assert reaped.splitlines()[-1] == "1"
    assert owner.get(f"/jobs/{job['id']}").json()["state"] == "queued"
    celery = [sys.executable, "-m", "celery", "-A", "workers.celery_app", "worker", "--loglevel", "INFO"]
    stack._spawn("gpu", [*celery, "-Q", "gpu", "-n", f"gpu2-{stack.port}@%h", "-c", "1"])

    done = wait_for(
        lambda: owner.get(f"/jobs/{job['id']}").json(),
        lambda j: j["state"] in FINISHED,
        timeout_s=240,
        what="the requeued job to finish on the new worker",
    )
    assert done["state"] == "succeeded", f"{done['error']}\n{stack.log_tail('gpu')}"
    assert done["restarts"] == 1 and done["attempt"] == 2
    events = all_events(owner, job["id"])
    assert_reported_once(events, done)
    requeued = next(e["payload"] for e in events if e["kind"] == "state" and e["payload"].get("requeued"))
    assert "no heartbeat for 10 s" in requeued["reason"]
