"""Drill: the default worker killed (SIGKILL) while it runs a /v1 batch against a batch-tier deployment, then
started again, as a supervisor restarts a crashed container.

The run, whose message would not come back before Redis's visibility timeout (and would find the batch in
progress), is resumed by beat's reaper once its heartbeat lapses: the batch completes with every line answered
once, and the usage it reports is one request per line, none metered twice."""

import json

import httpx
import psycopg
import pytest

from tests.chaos.drill import deployed, team_setup
from tests.stack import jsonl, wait_for

pytestmark = pytest.mark.chaos

LINES = 300


def kept(cluster, batch_pk: int) -> tuple[int, int]:
    """(lines kept, runs claimed) of the batch."""
    with psycopg.connect(cluster.database_url, autocommit=True) as conn:
        (lines,) = conn.execute(
            "SELECT count(*) FROM deployments_batchline WHERE batch_id = %s", [batch_pk]
        ).fetchone()
        (runs,) = conn.execute(
            "SELECT run_attempts FROM deployments_batchjob WHERE id = %s", [batch_pk]
        ).fetchone()
    return lines, runs


def test_the_worker_killed_mid_batch_the_batch_resumes_and_meters_each_line_once(cluster):
    api, body = team_setup(cluster, "batch-drill")
    deployment, key = deployed(cluster, api, body, tier="batch")
    v1 = httpx.Client(
        base_url=f"{cluster.base_url}/v1", headers={"Authorization": f"Bearer {key}"}, timeout=60
    )
    lines = [
        {"custom_id": f"line-{n}", "method": "POST", "url": "/v1/completions",
         "body": {"model": "adder", "prompt": f"{n % 50}+{n % 7}=", "max_tokens": 3, "temperature": 0}}
        for n in range(LINES)
    ]  # fmt: skip
    uploaded = v1.post("/files", data={"purpose": "batch"}, files={"file": ("lines.jsonl", jsonl(lines))})
    assert uploaded.status_code == 200, uploaded.text
    created = v1.post(
        "/batches",
        json={
            "input_file_id": uploaded.json()["id"],
            "endpoint": "/v1/completions",
            "completion_window": "24h",
        },
    )
    assert created.status_code == 200, created.text
    batch_id = created.json()["id"]
    batch_pk = int(batch_id.removeprefix("batch_"))
    wait_for(
        lambda: kept(cluster, batch_pk)[0], lambda n: n >= 10, timeout_s=120, what="the first lines answered"
    )

    cluster.kill("worker")
    at_kill, _ = kept(cluster, batch_pk)
    cluster.respawn("worker")
    assert at_kill < LINES, "the batch was done before the kill: the drill did not reach it"
    done = wait_for(
        lambda: v1.get(f"/batches/{batch_id}").json(),
        lambda b: b["status"] in ("completed", "failed", "cancelled", "expired"),
        timeout_s=300,
        what="the batch",
    )
    assert done["status"] == "completed", done
    assert done["request_counts"] == {"total": LINES, "completed": LINES, "failed": 0}, done["request_counts"]
    output = v1.get(f"/files/{done['output_file_id']}/content")
    results = [line for line in output.text.splitlines() if line]
    ids = sorted(json.loads(line)["custom_id"] for line in results)
    assert ids == sorted(f"line-{n}" for n in range(LINES)), "a line is missing or answered twice"
    assert kept(cluster, batch_pk) == (LINES, 2), "the run was not resumed once"
    usage = api.get(f"/deployments/{deployment['id']}/usage").json()
    assert usage["per_tier"]["batch"]["requests"] == LINES, "a line was metered twice (or not at all)"
    api.post(f"/deployments/{deployment['id']}/stop")
