"""The thin path over REST against the real stack: upload → verifiers → GRPO job on the gpu queue →
sandboxed rewards → events → checkpoint → succeeded; cancel; and what an outsider and a viewer can do."""

import os

import pytest

from tests.stack import all_events, jsonl, wait_for

pytestmark = pytest.mark.integration

ROWS = [
    {"prompt": f"{a}+{b}=", "answer": str(a + b), "tests": [f"assert result == {a + b}"]}
    for a, b in [(12, 45), (33, 21), (70, 19), (41, 8), (25, 25), (60, 13), (14, 77), (9, 90)]
]
FAST = {
    "max_steps": 4,
    "num_generations": 4,
    "prompts_per_step": 2,
    "save_steps": 2,
    "max_completion_length": 6,
}


def upload(api, name: str, body: bytes, **fields) -> dict:
    response = api.post(
        "/datasets/uploads", data={"name": name, **fields}, files={"file": ("data.jsonl", body)}
    )
    assert response.status_code == 202, response.text
    upload_id = response.json()["id"]
    return wait_for(
        lambda: api.get(f"/datasets/uploads/{upload_id}").json(),
        lambda u: u["state"] in ("ready", "failed", "review"),
        timeout_s=60,
        what="the ingest task",
    )


@pytest.fixture(scope="module")
def people(stack):
    return {
        "owner": stack.client(stack.member("owner", team="Research")),
        "teammate": stack.client(stack.member("teammate", team="Research", role="viewer")),
        "outsider": stack.client(stack.member("outsider", team="Elsewhere", organisation="Other Co")),
    }


@pytest.fixture(scope="module")
def setup(people):
    owner = people["owner"]
    ready = upload(owner, "addition", jsonl(ROWS))
    assert ready["state"] == "ready", ready
    exact = owner.post("/verifiers", json={"name": "exact", "spec": {"type": "exact_match"}})
    tests = owner.post(
        "/verifiers", json={"name": "tests", "spec": {"type": "python_tests", "tests_field": "tests"}}
    )
    assert exact.status_code == 201 and tests.status_code == 201, (exact.text, tests.text)
    return {
        "version": ready["dataset_version"],
        "verifiers": [
            {"verifier_version": exact.json()["versions"][0]["id"], "weight": 1.0},
            {"verifier_version": tests.json()["versions"][0]["id"], "weight": 0.5},
        ],
    }


def test_job_runs_end_to_end(stack, people, setup):
    owner = people["owner"]
    response = owner.post(
        "/jobs",
        json={
            "name": "thin path",
            "dataset_version": setup["version"],
            "eval_dataset_version": setup["version"],
            "verifiers": setup["verifiers"],
            "params": {**FAST, "eval_steps": 2},
        },
    )
    assert response.status_code == 201, response.text
    job_id = response.json()["id"]
    job = wait_for(
        lambda: owner.get(f"/jobs/{job_id}").json(),
        lambda j: j["state"] in ("succeeded", "failed", "cancelled"),
        timeout_s=600,
        what="the job to finish",
    )
    assert job["state"] == "succeeded", f"{job['error']}\n--- gpu worker ---\n{stack.log_tail('gpu')}"

    events = all_events(owner, job_id, page_size=50)
    assert [e["seq"] for e in events] == list(range(1, job["last_seq"] + 1))
    kinds = {e["kind"] for e in events}
    assert {"state", "metric", "rollout", "checkpoint"} <= kinds
    states = [e["payload"]["state"] for e in events if e["kind"] == "state"]
    assert states[0] == "queued" and states[1] == "running" and states[-1] == "succeeded"
    assert max(e["payload"]["step"] for e in events if e["kind"] == "metric") == FAST["max_steps"]
    # Held-out evaluation with the job's verifiers: the base model, every 2 steps, the end.
    evals = [e["payload"] for e in events if e["kind"] == "metric" and "eval/mean" in e["payload"]]
    assert [e["step"] for e in evals] == [0, 2, 4]
    assert all(0 <= e["eval/all"] <= 1 for e in evals)
    rollout = next(e["payload"] for e in events if e["kind"] == "rollout")
    # The python-tests verifier really ran in the sandbox: its part is present with a reason.
    assert set(rollout["parts"]) == {"exact", "tests"}
    assert rollout["prompt"] and "reason" in rollout
    # ...and what the program printed in the sandbox travels with the rollout, for the trace view.
    assert set(rollout["output"]) == {"tests"} and rollout["output"]["tests"]["status"] in ("ok", "failed")

    assert job["checkpoints"], "no checkpoint recorded"
    final = max(job["checkpoints"], key=lambda c: c["step"])
    assert final["step"] == FAST["max_steps"]
    assert "location" not in final  # where the files lie on the server is not shown
    kept = stack.workdir / "data" / "checkpoints" / f"job-{job_id}" / f"step-{final['step']}"
    assert (kept / "config.json").exists()
    assert final["lineage"]["dataset_version"] == setup["version"]

    outsider = people["outsider"]
    assert outsider.get(f"/jobs/{job_id}").status_code == 404
    assert outsider.get(f"/jobs/{job_id}/events").status_code == 404
    assert outsider.post(f"/jobs/{job_id}/cancel").status_code == 404
    assert outsider.get("/jobs").json() == []
    assert outsider.get("/datasets").json() == []
    assert outsider.get("/checkpoints").json() == []
    assert outsider.get(f"/datasets/versions/{setup['version']}/rows").status_code == 404


def test_cancel_kills_the_process_group(stack, people, setup):
    owner = people["owner"]
    response = owner.post(
        "/jobs",
        json={
            "name": "long",
            "dataset_version": setup["version"],
            "verifiers": setup["verifiers"][:1],
            "params": {**FAST, "max_steps": 100000, "save_steps": 0},
        },
    )
    job_id = response.json()["id"]
    wait_for(
        lambda: owner.get(f"/jobs/{job_id}").json(), lambda j: j["step"] >= 1, timeout_s=300, what="a step"
    )
    assert people["teammate"].post(f"/jobs/{job_id}/cancel").status_code == 403
    query = f"from anneal.training.models import Job; print(Job.objects.get(pk={job_id}).child_pid)"
    pid = int(stack.manage("shell", "-c", query).splitlines()[-1])
    assert owner.post(f"/jobs/{job_id}/cancel").status_code == 200
    job = wait_for(
        lambda: owner.get(f"/jobs/{job_id}").json(),
        lambda j: j["state"] == "cancelled",
        timeout_s=30,
        what="cancel",
    )
    assert job["finished_at"]
    with pytest.raises(ProcessLookupError):
        os.killpg(pid, 0)


def test_bad_input_is_named_and_leaves_nothing(people, setup):
    owner = people["owner"]
    bad = upload(owner, "broken", b'{"prompt": "1+1=", "answer": "2"}\n{"prompt": "oops\n{"answer": "3"}\n')
    # Bad rows are named; the valid row waits for the expert, and nothing is stored until accepted.
    assert bad["state"] == "review" and bad["dataset_version"] is None
    assert bad["errors"][0]["row"] == 2 and "not valid JSON" in bad["errors"][0]["message"]
    assert bad["errors"][1] == {
        "row": 3,
        "field": "prompt",
        "message": "missing column 'prompt' (mapped to prompt)",
    }
    assert "broken" not in [d["name"] for d in owner.get("/datasets").json()]
    rejected = owner.post(f"/datasets/uploads/{bad['id']}/reject").json()
    assert rejected["state"] == "rejected"
    assert "broken" not in [d["name"] for d in owner.get("/datasets").json()]

    unknown = owner.post("/verifiers", json={"name": "weird", "spec": {"type": "telepathy"}})
    assert unknown.status_code == 400 and unknown.json()["errors"][0]["field"] == "spec.type"
    assert "weird" not in [v["name"] for v in owner.get("/verifiers").json()]

    outsider = people["outsider"]
    theirs = upload(outsider, "theirs", jsonl(ROWS[:2]))
    stolen = owner.post(
        "/jobs",
        json={"dataset_version": theirs["dataset_version"], "verifiers": setup["verifiers"], "params": FAST},
    )
    assert stolen.status_code == 400
    assert stolen.json()["errors"][0]["field"] == "dataset_version"

    bad_params = owner.post(
        "/jobs",
        json={
            "dataset_version": setup["version"],
            "verifiers": setup["verifiers"],
            "params": {"max_steps": 0},
        },
    )
    assert bad_params.status_code == 400 and "max_steps" in bad_params.json()["errors"][0]["field"]
    jobs_before = len(owner.get("/jobs").json())
    viewer = people["teammate"].post(
        "/jobs", json={"dataset_version": setup["version"], "verifiers": setup["verifiers"], "params": FAST}
    )
    assert viewer.status_code == 403
    assert len(owner.get("/jobs").json()) == jobs_before


def test_schema_and_health(stack):
    import httpx

    schema = httpx.get(f"{stack.base_url}/api/schema/", timeout=30)
    assert schema.status_code == 200 and "/api/v1/jobs" in schema.text
    assert httpx.get(f"{stack.base_url}/api/docs/", timeout=30).status_code == 200
    assert httpx.get(f"{stack.base_url}/healthz", timeout=30).json() == {"ok": True}
    assert httpx.get(f"{stack.base_url}/healthz/detail", timeout=30).status_code in (401, 403)
    health = httpx.get(
        f"{stack.base_url}/healthz/detail",
        headers={"Authorization": f"Bearer {stack.ops_token}"},
        timeout=30,
    ).json()
    assert health["ok"] and set(health["checks"]) == {"database", "redis", "workers", "sandbox"}
