"""Deployments through the real stack: a short GRPO job's checkpoint is deployed on the CPU (regression gate,
then a `python -m gpu_jobs.serving` replica supervised by the `serve` worker), called with the official
`openai` client (plain and streaming), metered, refused with a revoked key and past the budget cap, switched
to the batch tier and fed a batch file, and stopped. One deployment serves every test, in file order.
"""

import json
import os

import openai
import pytest

from tests.stack import jsonl, wait_for

pytestmark = pytest.mark.integration

ROWS = [{"prompt": f"{a}+{b}=", "answer": str(a + b)} for a, b in [(12, 45), (33, 21), (70, 19), (41, 8)]]
EVAL = [
    {"prompt": f"{a}+{b}=", "answer": str(a + b), "domain": "sums"} for a, b in [(25, 25), (60, 13), (9, 9)]
]
# A learning rate so small the checkpoint answers as its base model does: the gate passes deterministically
# (a blocking gate and its override are unit-tested in tests/unit/test_deploy_api.py).
PARAMS = {
    "max_steps": 2,
    "num_generations": 2,
    "prompts_per_step": 2,
    "max_completion_length": 4,
    "learning_rate": 1e-9,
}
HELLO = [{"role": "user", "content": "12+45="}]


def upload(api, name: str, rows) -> int:
    response = api.post("/datasets/uploads", data={"name": name}, files={"file": ("d.jsonl", jsonl(rows))})
    assert response.status_code == 202, response.text
    upload_id = response.json()["id"]
    done = wait_for(
        lambda: api.get(f"/datasets/uploads/{upload_id}").json(),
        lambda u: u["state"] in ("ready", "failed", "review"),
        timeout_s=60,
        what="the ingest task",
    )
    assert done["state"] == "ready", done
    return done["dataset_version"]


@pytest.fixture(scope="module")
def owner(stack):
    return stack.client(stack.member("deployer", team="Serving", organisation="ServeCo"))


@pytest.fixture(scope="module")
def deployment(stack, owner):
    verifier = owner.post("/verifiers", json={"name": "exact", "spec": {"type": "exact_match"}})
    assert verifier.status_code == 201, verifier.text
    job = owner.post(
        "/jobs",
        json={
            "name": "adder",
            "dataset_version": upload(owner, "sums", ROWS),
            "eval_dataset_version": upload(owner, "held-out sums", EVAL),
            "verifiers": [{"verifier_version": verifier.json()["versions"][0]["id"], "weight": 1}],
            "params": PARAMS,
        },
    )
    assert job.status_code == 201, job.text
    finished = wait_for(
        lambda: owner.get(f"/jobs/{job.json()['id']}").json(),
        lambda j: j["state"] in ("succeeded", "failed", "cancelled"),
        timeout_s=300,
        what="the training job",
    )
    assert finished["state"] == "succeeded", f"{finished['error']}\n{stack.log_tail('gpu')}"
    checkpoint = max(finished["checkpoints"], key=lambda c: c["step"])
    created = owner.post("/deployments", json={"checkpoint": checkpoint["id"], "name": "adder"})
    assert created.status_code == 201, created.text
    deployment_id = created.json()["id"]
    ready = wait_for(
        lambda: owner.get(f"/deployments/{deployment_id}").json(),
        lambda d: d["state"] in ("ready", "failed", "stopped"),
        timeout_s=300,
        what="the deployment to turn ready",
    )
    assert ready["state"] == "ready", (
        f"{ready['error']}\n--- worker ---\n{stack.log_tail('worker')}\n--- serve ---\n{stack.log_tail('serve')}"
    )
    key = owner.post("/deployments/keys", json={"name": "app", "deployment": deployment_id})
    assert key.status_code == 201, key.text
    return {"id": deployment_id, "key": key.json()["key"], "detail": ready}


def client_for(stack, key: str) -> openai.OpenAI:
    return openai.OpenAI(base_url=f"{stack.base_url}/v1", api_key=key, max_retries=0, timeout=120)


def test_the_gate_compared_the_checkpoint_with_its_base_model_before_ready(deployment):
    gate = deployment["detail"]["gate"]
    assert gate["passed"] is True
    sets = {(row["set"], row["domain"]) for row in gate["scores"]}
    assert ("held-out", "sums") in sets and ("general", "addition") in sets
    assert all(0 <= row["base"] <= 1 and 0 <= row["candidate"] <= 1 for row in gate["scores"])
    (replica,) = deployment["detail"]["replica_set"]
    assert replica["state"] == "ready" and replica["tier"] == "standard" and replica["port"]


def test_the_openai_client_works_unchanged_plain_and_streaming(stack, owner, deployment):
    client = client_for(stack, deployment["key"])
    assert [m.id for m in client.models.list()] == ["adder"]
    reply = client.chat.completions.create(model="adder", messages=HELLO, max_tokens=4, temperature=0)
    assert reply.choices[0].message.role == "assistant" and isinstance(reply.choices[0].message.content, str)
    # The tiny model knows sums, not chat: it may well answer a chat with nothing, but it is metered all the same.
    assert reply.usage.prompt_tokens > 0 and reply.usage.completion_tokens >= 0
    streamed, usage = "", None
    for chunk in client.chat.completions.create(
        model="adder", messages=HELLO, max_tokens=4, temperature=0, stream=True
    ):
        if chunk.choices:
            streamed += chunk.choices[0].delta.content or ""
        usage = chunk.usage or usage
    assert usage is not None and usage.prompt_tokens == reply.usage.prompt_tokens
    assert streamed == reply.choices[0].message.content  # greedy: the same answer either way
    completion = client.completions.create(model="adder", prompt="33+21=", max_tokens=3, temperature=0)
    assert completion.choices[0].text and completion.usage.completion_tokens > 0  # "54" or so
    usage_now = owner.get(f"/deployments/{deployment['id']}/usage").json()
    assert usage_now["totals"]["requests"] >= 3
    expected = reply.usage.total_tokens + usage.total_tokens + completion.usage.total_tokens
    assert usage_now["totals"]["prompt_tokens"] + usage_now["totals"]["completion_tokens"] == expected
    assert float(usage_now["totals"]["cost_usd"]) > 0 and usage_now["per_key"][0]["key_name"] == "app"
    assert usage_now["tiers"][1]["tier"] == "standard" and usage_now["tiers"][1]["tokens_per_s"] > 0


def test_bad_input_gets_the_openai_error_object(stack, deployment):
    client = client_for(stack, deployment["key"])
    with pytest.raises(openai.NotFoundError) as unknown:
        client.chat.completions.create(model="gpt-17", messages=HELLO)
    assert unknown.value.code == "model_not_found"
    with pytest.raises(openai.BadRequestError) as malformed:
        client.chat.completions.create(model="adder", messages=[{"role": "user"}])
    assert malformed.value.param == "messages[0].content"
    with pytest.raises(openai.APIStatusError) as oversized:
        client.chat.completions.create(model="adder", messages=[{"role": "user", "content": "9" * 600_000}])
    assert oversized.value.status_code == 413 and oversized.value.code == "request_too_large"
    with pytest.raises(openai.BadRequestError) as too_many:
        client.chat.completions.create(model="adder", messages=HELLO, max_tokens=10**6)
    assert too_many.value.param == "max_tokens"


def test_a_revoked_key_is_refused(stack, owner, deployment):
    created = owner.post(
        "/deployments/keys", json={"name": "temporary", "deployment": deployment["id"]}
    ).json()
    client = client_for(stack, created["key"])
    client.chat.completions.create(model="adder", messages=HELLO, max_tokens=2)
    assert owner.post(f"/deployments/keys/{created['id']}/revoke").status_code == 200
    with pytest.raises(openai.AuthenticationError) as refused:
        client.chat.completions.create(model="adder", messages=HELLO, max_tokens=2)
    assert refused.value.code == "invalid_api_key" and "revoked" in refused.value.message


def test_the_team_budget_cap_refuses_then_a_higher_cap_serves_again(stack, owner, deployment):
    client = client_for(stack, deployment["key"])
    spent = owner.get("/deployments/usage").json()["spend_month_usd"]
    assert owner.post("/deployments/usage", json={"monthly_cap_usd": spent}).status_code == 200
    with pytest.raises(openai.RateLimitError) as capped:
        client.chat.completions.create(model="adder", messages=HELLO, max_tokens=2)
    assert capped.value.code == "insufficient_quota" and "budget cap" in capped.value.message
    assert owner.post("/deployments/usage", json={"monthly_cap_usd": None}).status_code == 200
    assert client.chat.completions.create(model="adder", messages=HELLO, max_tokens=2).usage.total_tokens > 0


def test_switch_to_the_batch_tier_and_run_a_batch_file(stack, owner, deployment, tmp_path):
    switched = owner.post(f"/deployments/{deployment['id']}/tier", json={"tier": "batch"})
    assert switched.status_code == 200, switched.text
    detail = wait_for(
        lambda: owner.get(f"/deployments/{deployment['id']}").json(),
        lambda d: (
            {(r["tier"], r["state"]) for r in d["replica_set"]}
            == {("batch", "ready"), ("standard", "stopped")}
        ),
        timeout_s=180,
        what="the batch replica to take over",
    )
    assert detail["state"] == "ready" and detail["tier"] == "batch"
    client = client_for(stack, deployment["key"])
    lines = [
        {
            "custom_id": f"sum-{n}",
            "method": "POST",
            "url": "/v1/chat/completions",
            "body": {
                "model": "adder",
                "messages": [{"role": "user", "content": r["prompt"]}],
                "max_tokens": 3,
            },
        }
        for n, r in enumerate(ROWS)
    ]
    path = tmp_path / "batch.jsonl"
    path.write_bytes(jsonl(lines))
    uploaded = client.files.create(file=path.open("rb"), purpose="batch")
    assert uploaded.purpose == "batch" and uploaded.bytes == path.stat().st_size
    batch = client.batches.create(
        input_file_id=uploaded.id, endpoint="/v1/chat/completions", completion_window="24h"
    )
    assert batch.status in ("validating", "in_progress")
    batch = wait_for(
        lambda: client.batches.retrieve(batch.id),
        lambda b: b.status in ("completed", "failed", "cancelled"),
        timeout_s=120,
        what="the batch",
    )
    assert batch.status == "completed" and batch.request_counts.completed == len(lines), batch
    results = [json.loads(line) for line in client.files.content(batch.output_file_id).text.splitlines()]
    assert sorted(r["custom_id"] for r in results) == [f"sum-{n}" for n in range(len(ROWS))]
    assert all(r["response"]["status_code"] == 200 and r["response"]["body"]["usage"] for r in results)
    usage = owner.get(f"/deployments/{deployment['id']}/usage").json()
    assert usage["per_tier"]["batch"]["requests"] == len(lines)


def test_stop_drains_the_replica_and_calls_are_refused(stack, owner, deployment):
    replica = next(
        r
        for r in owner.get(f"/deployments/{deployment['id']}").json()["replica_set"]
        if r["state"] == "ready"
    )
    assert owner.post(f"/deployments/{deployment['id']}/stop").status_code == 200
    stopped = wait_for(
        lambda: owner.get(f"/deployments/{deployment['id']}").json(),
        lambda d: d["state"] == "stopped",
        timeout_s=60,
        what="the deployment to stop",
    )
    assert {r["state"] for r in stopped["replica_set"]} == {"stopped"}
    with pytest.raises(ProcessLookupError):
        os.kill(replica["pid"], 0)  # the serving process is gone
    with pytest.raises(openai.NotFoundError) as refused:
        client_for(stack, deployment["key"]).chat.completions.create(model="adder", messages=HELLO)
    assert "stopped" in refused.value.message
