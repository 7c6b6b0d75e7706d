"""What every drill does: a team, a dataset whose rewards run in the sandboxes (python_tests) beside an exact
answer, a job long enough for a fault to land mid-way, and the check that nothing was lost or counted twice."""

import time

import psycopg

from tests.stack import all_events, assert_each_step_once, jsonl, wait_for

ROWS = [
    {"prompt": f"{a}+{b}=", "answer": str(a + b), "tests": [f"assert result == {a + b}"]}
    for a, b in [(12, 45), (33, 21), (70, 19), (41, 8), (25, 25), (60, 13), (14, 77), (9, 90)]
]
PARAMS = {
    "max_steps": 14,
    "num_generations": 4,
    "prompts_per_step": 2,
    "max_completion_length": 4,
    "save_steps": 4,
    "rollouts_per_step": 2,
    "seed": 5,
}
FINISHED = ("succeeded", "failed", "cancelled", "stopped")


def team_setup(cluster, name: str, rows: list[dict] = ROWS) -> tuple:
    """(API client, launch body without the name) for a team of its own, on a dataset of `rows`."""
    api = cluster.client(cluster.member(f"{name}-owner", team=name))
    response = api.post("/datasets/uploads", data={"name": "sums"}, files={"file": ("d.jsonl", jsonl(rows))})
    assert response.status_code == 202, response.text
    upload_id = response.json()["id"]
    ready = wait_for(
        lambda: api.get(f"/datasets/uploads/{upload_id}").json(),
        lambda u: u["state"] in ("ready", "failed", "review"),
        timeout_s=60,
        what="the ingest",
    )
    assert ready["state"] == "ready", ready
    exact = api.post("/verifiers", json={"name": "exact", "spec": {"type": "exact_match"}})
    tests = api.post(
        "/verifiers", json={"name": "tests", "spec": {"type": "python_tests", "tests_field": "tests"}}
    )
    assert exact.status_code == 201 and tests.status_code == 201, (exact.text, tests.text)
    body = {
        "dataset_version": ready["dataset_version"],
        "verifiers": [
            {"verifier_version": exact.json()["versions"][0]["id"], "weight": 1.0},
            {"verifier_version": tests.json()["versions"][0]["id"], "weight": 0.5},
        ],
    }
    return api, body


def launch(api, body: dict, name: str, **params) -> dict:
    response = api.post("/jobs", json={"name": name, **body, "params": {**PARAMS, **params}})
    assert response.status_code == 201, response.text
    return response.json()


def job_row(cluster, job_id: int) -> tuple:
    """(step, state, attempt) read straight from the database (None while it cannot be reached)."""
    try:
        with psycopg.connect(cluster.database_url, autocommit=True, connect_timeout=2) as conn:
            return conn.execute(
                "SELECT step, state, attempt FROM training_job WHERE id = %s", [job_id]
            ).fetchone()
    except psycopg.OperationalError:
        return None


def wait_step(cluster, job_id: int, step: int, timeout_s: float = 300) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        row = job_row(cluster, job_id)
        if row and (row[0] >= step or row[1] in FINISHED):
            return
        time.sleep(0.1)
    raise AssertionError(
        f"job {job_id} did not reach step {step} in {timeout_s} s\n{cluster.log_tail('gpu')}"
    )


def wait_finished(cluster, api, job_id: int, timeout_s: float = 600) -> dict:
    job = wait_for(
        lambda: api.get(f"/jobs/{job_id}").json(),
        lambda j: j.get("state") in FINISHED,
        timeout_s=timeout_s,
        what=f"job {job_id} to finish",
    )
    assert job["state"] == "succeeded", f"{job['state']}: {job.get('error')}\n{cluster.log_tail('gpu', 8000)}"
    return job


def assert_nothing_lost(api, job: dict) -> list[dict]:
    """Seqs 1..last_seq with no gap or repeat; every step's metrics once; every step's rollouts once each."""
    events = all_events(api, job["id"])
    assert_each_step_once(events, job, rollouts_per_step=PARAMS["rollouts_per_step"])
    rollouts = {e["payload"]["step"] for e in events if e["kind"] == "rollout"}
    assert rollouts == set(range(1, job["max_steps"] + 1)), rollouts
    states = [e["payload"]["state"] for e in events if e["kind"] == "state"]
    assert states[-1] == "succeeded", states
    return events


def wait_ready(cluster, api, deployment_id: int, *, besides: set[int] = frozenset()) -> dict:
    """The deployment once it and a replica other than `besides` are ready (it fails the drill if it failed).

    Both, not the replica alone: the detail reads the deployment and its replicas in two queries, so a poll can
    fall between them and show a replica turned ready beside its deployment still starting."""
    detail = wait_for(
        lambda: api.get(f"/deployments/{deployment_id}").json(),
        lambda d: (
            d["state"] in ("failed", "stopped")
            or (
                d["state"] == "ready"
                and any(r["state"] == "ready" and r["id"] not in besides for r in d["replica_set"])
            )
        ),
        timeout_s=180,
        what="a ready replica",
    )
    assert detail["state"] == "ready", f"{detail['state']}: {detail['error']}\n{cluster.log_tail('serve')}"
    return detail


def deployed(cluster, api, body, tier: str = "standard") -> tuple[dict, str]:
    """A ready deployment (at `tier`) of a short job's checkpoint, and a key for it."""
    # A learning rate so small the checkpoint answers as its base model does: the regression gate passes.
    job = wait_finished(
        cluster, api, launch(api, body, "to serve", max_steps=2, save_steps=2, learning_rate=1e-9)["id"]
    )
    checkpoint = max(job["checkpoints"], key=lambda c: c["step"])
    created = api.post("/deployments", json={"checkpoint": checkpoint["id"], "name": "adder", "tier": tier})
    assert created.status_code == 201, created.text
    ready = wait_ready(cluster, api, created.json()["id"])
    key = api.post("/deployments/keys", json={"name": "app", "deployment": ready["id"]})
    assert key.status_code == 201, key.text
    return ready, key.json()["key"]
