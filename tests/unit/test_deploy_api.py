"""Deployments without serving processes: the REST API, the lifecycle the worker drives, keys, metering,
budget and rate limits, and every /v1 refusal in OpenAI's error shape.

Named users: owner (owner of team Core), expert (expert in Core), teammate (viewer in Core), outsider (owner
of team Rivals). The replicas' processes are the integration tests' business (test_deploy_stack.py).
"""

import os
from decimal import Decimal

import pytest
from django.contrib.auth.models import User
from django.test import Client

from anneal.accounts.models import AuditEntry
from anneal.deployments import services
from anneal.deployments.batches import parse_lines
from anneal.deployments.gate import gate_decide
from anneal.deployments.models import (
    Deployment,
    DeploymentKey,
    DeploymentState,
    Replica,
    ReplicaState,
    UsageRecord,
    key_hash,
)
from anneal.deployments.selectors import deployment_usage, team_spend_month
from tests.world import api_client, checkpoint_create, page_client

pytestmark = pytest.mark.django_db

CHAT = {"model": "adder", "messages": [{"role": "user", "content": "12+45="}], "max_tokens": 4}


@pytest.fixture
def world(world, tmp_path) -> dict:
    """The shared world (tests/world.py) with a checkpoint in Core (ckpt) and one in Rivals (rival_ckpt)."""
    return {
        **world,
        "ckpt": checkpoint_create(team=world["core"], location=tmp_path / "ckpt-core"),
        "rival_ckpt": checkpoint_create(team=world["rivals"], location=tmp_path / "ckpt-rivals"),
    }


def deploy(world, name: str = "adder", **extra) -> Deployment:
    return services.deployment_create(
        team=world["core"], user=world["owner"], checkpoint_id=world["ckpt"].pk, name=name, **extra
    )


def make_ready(deployment: Deployment, *, port: int = 9) -> Replica:
    services.deployment_claim_prepare(deployment_id=deployment.pk)
    (replica,) = services.replicas_spawn(deployment=deployment, count=1, tier=deployment.tier)
    assert services.replica_claim(replica_id=replica.pk, worker="test")
    services.replica_started(replica_id=replica.pk, host="127.0.0.1", port=port, pid=1)
    assert services.replica_ready(replica_id=replica.pk)
    return replica


def v1(path: str, *, key: str | None = None, body=None, raw: bytes | None = None, method: str = "post"):
    headers = {"HTTP_AUTHORIZATION": f"Bearer {key}"} if key else {}
    client = Client()
    if method == "get":
        return client.get(f"/v1/{path}", **headers)
    data = raw if raw is not None else __import__("json").dumps(body)
    return client.post(f"/v1/{path}", data=data, content_type="application/json", **headers)


def assert_openai_error(response, status: int, *, code: str | None = None, param: str | None = None) -> dict:
    assert response.status_code == status, response.content
    error = response.json()["error"]
    assert set(error) == {"message", "type", "param", "code"} and error["message"]
    if code is not None:
        assert error["code"] == code, error
    if param is not None:
        assert error["param"] == param, error
    return error


# --- the REST API -----------------------------------------------------------------------------------------


def test_create_lists_and_scopes_deployments(world):
    owner = api_client(world["owner"])
    created = owner.post(
        "/api/v1/deployments", {"checkpoint": world["ckpt"].pk, "name": "adder"}, format="json"
    )
    assert created.status_code == 201, created.json()
    body = created.json()
    assert body["state"] == "pending" and body["tier"] == "standard" and body["base_url"].endswith("/v1")
    assert [d["name"] for d in owner.get("/api/v1/deployments").json()] == ["adder"]
    assert api_client(world["outsider"]).get(f"/api/v1/deployments/{body['id']}").status_code == 404
    assert api_client(world["outsider"]).get("/api/v1/deployments").json() == []


@pytest.mark.parametrize(
    "payload, field",
    [
        ({"name": "x", "tier": "ludicrous"}, "tier"),
        ({"name": "two words"}, "name"),
        ({"name": "x", "replicas": 9}, "replicas"),
        ({"name": "x", "max_concurrency": 0}, "max_concurrency"),
    ],
)
def test_bad_deployment_input_names_the_field(world, payload, field):
    response = api_client(world["owner"]).post(
        "/api/v1/deployments", {"checkpoint": world["ckpt"].pk, **payload}, format="json"
    )
    assert response.status_code == 400
    assert field in [e["field"] for e in response.json()["errors"]], response.json()


def test_another_teams_checkpoint_and_a_taken_name_are_refused(world):
    owner = api_client(world["owner"])
    foreign = owner.post("/api/v1/deployments", {"checkpoint": world["rival_ckpt"].pk}, format="json")
    assert foreign.status_code == 400 and "no checkpoint with id" in foreign.json()["detail"]
    deploy(world)
    again = owner.post(
        "/api/v1/deployments", {"checkpoint": world["ckpt"].pk, "name": "adder"}, format="json"
    )
    assert again.status_code == 400 and "already has a deployment named 'adder'" in again.json()["detail"]


def test_a_viewer_may_look_but_not_deploy_stop_or_make_keys(world):
    deployment = deploy(world)
    viewer = api_client(world["teammate"])
    assert viewer.get(f"/api/v1/deployments/{deployment.pk}").status_code == 200
    assert (
        viewer.post("/api/v1/deployments", {"checkpoint": world["ckpt"].pk}, format="json").status_code == 403
    )
    assert viewer.post(f"/api/v1/deployments/{deployment.pk}/stop").status_code == 403
    assert viewer.post("/api/v1/deployments/keys", {"name": "k"}, format="json").status_code == 403


def test_a_key_is_shown_once_stored_hashed_and_revocable(world):
    deployment = deploy(world)
    owner = api_client(world["owner"])
    created = owner.post(
        "/api/v1/deployments/keys", {"name": "backend", "deployment": deployment.pk}, format="json"
    )
    assert created.status_code == 201 and created["Cache-Control"] == "no-store"
    raw = created.json()["key"]
    assert raw.startswith("sk-anneal-") and len(raw) > 40
    stored = DeploymentKey.objects.get()
    assert stored.key_hash == key_hash(raw) and raw not in str(list(DeploymentKey.objects.values()))
    assert "key" not in owner.get("/api/v1/deployments/keys").json()[0]
    revoked = owner.post(f"/api/v1/deployments/keys/{stored.pk}/revoke")
    assert revoked.status_code == 200 and revoked.json()["revoked_at"]
    assert AuditEntry.objects.filter(action="deployment_key.revoke", object_id=str(stored.pk)).exists()
    assert (
        api_client(world["outsider"]).post(f"/api/v1/deployments/keys/{stored.pk}/revoke").status_code == 404
    )


# --- the lifecycle the worker drives ----------------------------------------------------------------------


def test_ready_then_stop_drains_to_stopped(world):
    deployment = deploy(world)
    replica = make_ready(deployment)
    deployment.refresh_from_db()
    assert deployment.state == DeploymentState.READY and deployment.ready_at
    services.deployment_stop(deployment=deployment, user=world["owner"])
    assert Deployment.objects.get(pk=deployment.pk).state == DeploymentState.DRAINING
    assert Replica.objects.get(pk=replica.pk).state == ReplicaState.DRAINING
    services.replica_finish(replica_id=replica.pk)
    deployment.refresh_from_db()
    assert (
        deployment.state == DeploymentState.STOPPED and Replica.objects.get(pk=replica.pk).state == "stopped"
    )


def test_a_crashed_replica_fails_the_deployment_with_the_reason(world):
    # The reason is the end of the serving process's log, which may hold any byte, NUL included (PostgreSQL
    # text refuses it): it is kept as U+FFFD.
    deployment = deploy(world)
    replica = make_ready(deployment)
    services.replica_finish(replica_id=replica.pk, error="the serving process exited with status 1\nOOM \x00")
    deployment.refresh_from_db()
    assert deployment.state == DeploymentState.FAILED and "exited with status 1" in deployment.error
    assert deployment.error.endswith("OOM \ufffd")
    assert Replica.objects.get(pk=replica.pk).error.endswith("OOM \ufffd")


def test_switching_tier_keeps_the_old_replica_until_a_new_one_is_ready(world):
    deployment = deploy(world)
    old = make_ready(deployment)
    services.deployment_switch_tier(deployment=deployment, tier="turbo", user=world["owner"])
    new = Replica.objects.exclude(pk=old.pk).get()
    assert new.tier == "turbo" and Replica.objects.get(pk=old.pk).state == ReplicaState.READY
    services.replica_claim(replica_id=new.pk, worker="test")
    services.replica_started(replica_id=new.pk, host="127.0.0.1", port=10, pid=2)
    services.replica_ready(replica_id=new.pk)
    assert Replica.objects.get(pk=old.pk).state == ReplicaState.DRAINING
    services.replica_finish(replica_id=old.pk)
    deployment.refresh_from_db()
    assert deployment.state == DeploymentState.READY and deployment.tier == "turbo"
    same = api_client(world["owner"]).post(
        f"/api/v1/deployments/{deployment.pk}/tier", {"tier": "turbo"}, format="json"
    )
    assert same.status_code == 400 and "already runs at the turbo tier" in same.json()["detail"]


def test_stopping_before_any_replica_started_stops_at_once(world):
    deployment = deploy(world)
    services.deployment_claim_prepare(deployment_id=deployment.pk)
    services.replicas_spawn(deployment=deployment, count=2, tier="standard")
    services.deployment_stop(deployment=deployment, user=world["owner"])
    deployment.refresh_from_db()
    assert deployment.state == DeploymentState.STOPPED
    assert set(Replica.objects.values_list("state", flat=True)) == {"stopped"}


# --- the regression gate ------------------------------------------------------------------------------------


def test_gate_blocks_a_drop_beyond_the_threshold_only():
    rows = [
        {"set": "held-out", "domain": "sums", "base": 0.5, "candidate": 0.45, "rows": 8},
        {"set": "general", "domain": "addition", "base": 0.4, "candidate": 0.6, "rows": 48},
    ]
    passed, judged = gate_decide(rows, max_drop=0.05)
    assert passed and [r["drop"] for r in judged] == [0.05, 0.0]
    passed, judged = gate_decide([{**rows[0], "candidate": 0.3}], max_drop=0.05)
    assert not passed and judged[0]["blocked"] and judged[0]["drop"] == 0.2


def test_a_blocked_gate_shows_the_numbers_and_only_an_owner_overrides_it_audited(world):
    deployment = deploy(world)
    services.deployment_claim_prepare(deployment_id=deployment.pk)
    _, scores = gate_decide(
        [{"set": "held-out", "domain": "sums", "base": 0.5, "candidate": 0.25, "rows": 8}], max_drop=0.05
    )
    services.gate_record(deployment=deployment, passed=False, max_drop=0.05, scores=scores, note="")
    deployment.refresh_from_db()
    assert deployment.state == DeploymentState.FAILED
    assert "held-out sums: 0.500 -> 0.250 (-0.250)" in deployment.error
    detail = api_client(world["owner"]).get(f"/api/v1/deployments/{deployment.pk}").json()
    assert detail["gate"]["passed"] is False and detail["gate"]["scores"][0]["blocked"] is True
    expert = api_client(world["expert"]).post(
        f"/api/v1/deployments/{deployment.pk}/gate/override", {}, format="json"
    )
    assert expert.status_code == 400 and "only an owner" in expert.json()["detail"]
    owner = api_client(world["owner"]).post(
        f"/api/v1/deployments/{deployment.pk}/gate/override", {"reason": "sums matter less"}, format="json"
    )
    assert owner.status_code == 200 and owner.json()["state"] == "pending" and owner.json()["gate_overridden"]
    entry = AuditEntry.objects.get(action="deployment.gate_override")
    assert entry.user == world["owner"] and entry.detail["reason"] == "sums matter less"
    assert entry.detail["blocked"][0]["candidate"] == 0.25


# --- metering and the budget ----------------------------------------------------------------------------------


def test_usage_is_priced_per_million_tokens_of_the_tier_and_summed_per_key_and_team(world, settings):
    settings.DEPLOY_PRICE_PER_MTOK = {
        "batch": Decimal("0.10"),
        "standard": Decimal("0.20"),
        "turbo": Decimal("1"),
    }
    deployment = deploy(world)
    key, _ = services.deployment_key_create(
        team=world["core"], user=world["owner"], name="k", deployment=deployment
    )
    common = {"deployment": deployment, "endpoint": "chat.completions", "stream": False, "latency_ms": 100}
    services.usage_record(
        key=key, tier="standard", prompt_tokens=600_000, completion_tokens=400_000, **common
    )
    services.usage_record(key=None, tier="turbo", prompt_tokens=10, completion_tokens=20, **common)
    assert UsageRecord.objects.get(tier="standard").cost_usd == Decimal("0.2")
    assert team_spend_month(world["core"].pk) == Decimal("0.20003")
    usage = deployment_usage(deployment)
    assert usage["totals"]["requests"] == 2 and usage["per_tier"]["turbo"]["completion_tokens"] == 20
    assert {row["key_name"]: row["requests"] for row in usage["per_key"]} == {"k": 1, "playground": 1}
    team = api_client(world["owner"]).get("/api/v1/deployments/usage").json()
    assert team["spend_month_usd"] == "0.200030" and team["monthly_cap_usd"] is None


def test_only_writers_set_the_budget_and_a_negative_cap_is_refused(world):
    owner = api_client(world["owner"])
    assert (
        owner.post("/api/v1/deployments/usage", {"monthly_cap_usd": "-1"}, format="json").status_code == 400
    )
    ok = owner.post("/api/v1/deployments/usage", {"monthly_cap_usd": "2.5"}, format="json")
    assert ok.status_code == 200 and ok.json()["monthly_cap_usd"] == "2.500000"
    viewer = api_client(world["teammate"]).post(
        "/api/v1/deployments/usage", {"monthly_cap_usd": "9"}, format="json"
    )
    assert viewer.status_code == 403


# --- /v1 refusals, all in OpenAI's error shape -----------------------------------------------------------------


@pytest.fixture
def ready(world):
    deployment = deploy(world)
    make_ready(deployment)
    _, raw = services.deployment_key_create(
        team=world["core"], user=world["owner"], name="app", deployment=deployment
    )
    return {"deployment": deployment, "key": raw}


def test_missing_unknown_and_revoked_keys_get_401(world, ready):
    assert_openai_error(v1("chat/completions", body=CHAT), 401, code="missing_api_key")
    assert_openai_error(v1("chat/completions", key="sk-anneal-nope", body=CHAT), 401, code="invalid_api_key")
    key = DeploymentKey.objects.get()
    services.deployment_key_revoke(key=key, user=world["owner"])
    error = assert_openai_error(
        v1("chat/completions", key=ready["key"], body=CHAT), 401, code="invalid_api_key"
    )
    assert "revoked" in error["message"]


def test_bad_requests_get_the_openai_error_object_never_a_500(ready, settings):
    key = ready["key"]
    unknown = v1("chat/completions", key=key, body={**CHAT, "model": "gpt-17"})
    assert "gpt-17" in assert_openai_error(unknown, 404, code="model_not_found", param="model")["message"]
    # A NUL in the name (PostgreSQL cannot compare it) is a model not found, not a server error.
    nul = v1("chat/completions", key=key, body={**CHAT, "model": "add\x00er"})
    assert_openai_error(nul, 404, code="model_not_found", param="model")
    assert_openai_error(v1("models/add%00er", key=key, method="get"), 404, code="model_not_found")
    assert_openai_error(
        v1("chat/completions", key=key, body={**CHAT, "messages": "hi"}), 400, param="messages"
    )
    bad_role = {**CHAT, "messages": [{"role": "wizard", "content": "x"}]}
    assert_openai_error(v1("chat/completions", key=key, body=bad_role), 400, param="messages[0].role")
    no_content = {**CHAT, "messages": [{"role": "user", "content": 7}]}
    assert_openai_error(v1("chat/completions", key=key, body=no_content), 400, param="messages[0].content")
    assert_openai_error(v1("chat/completions", key=key, raw=b"{not json"), 400, code="invalid_json")
    assert_openai_error(v1("completions", key=key, body={"model": "adder", "prompt": 5}), 400, param="prompt")
    huge = {**CHAT, "max_tokens": settings.DEPLOY_MAX_TOKENS + 1}
    assert_openai_error(v1("chat/completions", key=key, body=huge), 400, param="max_tokens")
    settings.DEPLOY_MAX_REQUEST_KB = 1
    big = {**CHAT, "messages": [{"role": "user", "content": "1+1=" * 1000}]}
    assert_openai_error(v1("chat/completions", key=key, body=big), 413, code="request_too_large")
    assert_openai_error(v1("embeddings", key=key, body=CHAT), 404, code="unknown_url")
    assert_openai_error(v1("chat/completions", key=key, method="get"), 405)


def test_a_key_for_one_deployment_cannot_reach_another(world, ready):
    other = deploy(world, name="other")
    make_ready(other, port=11)
    response = v1("chat/completions", key=ready["key"], body={**CHAT, "model": "other"})
    assert_openai_error(response, 404, code="model_not_found")
    assert [m["id"] for m in v1("models", key=ready["key"], method="get").json()["data"]] == ["adder"]


def test_a_starting_or_stopped_deployment_refuses_clearly(world, ready):
    deployment = ready["deployment"]
    Deployment.objects.filter(pk=deployment.pk).update(state=DeploymentState.STARTING)
    assert_openai_error(v1("chat/completions", key=ready["key"], body=CHAT), 503, code="model_not_ready")
    Deployment.objects.filter(pk=deployment.pk).update(state=DeploymentState.STOPPED)
    error = assert_openai_error(
        v1("chat/completions", key=ready["key"], body=CHAT), 404, code="model_not_found"
    )
    assert "stopped" in error["message"]


def test_the_budget_cap_refuses_with_insufficient_quota_and_no_retry(world, ready):
    services.team_budget_set(team=world["core"], user=world["owner"], monthly_cap_usd=Decimal("0.000001"))
    services.usage_record(
        deployment=ready["deployment"], key=None, tier="standard", endpoint="chat.completions", stream=False,
        prompt_tokens=5, completion_tokens=5, latency_ms=1,
    )  # fmt: skip
    response = v1("chat/completions", key=ready["key"], body=CHAT)
    error = assert_openai_error(response, 429, code="insufficient_quota")
    assert error["type"] == "insufficient_quota" and "budget cap" in error["message"]
    assert response["x-should-retry"] == "false"


def test_the_tier_rate_limit_counts_per_key(world, ready, settings):
    settings.DEPLOY_RATE_LIMIT_RPM = {"batch": 1, "standard": 2, "turbo": 1}
    Replica.objects.update(state=ReplicaState.STOPPED)  # past the limit check, no replica: a 503, not a call
    codes = [v1("chat/completions", key=ready["key"], body=CHAT) for _ in range(3)]
    assert [r.status_code for r in codes] == [503, 503, 429]
    error = assert_openai_error(codes[2], 429, code="rate_limit_exceeded")
    assert "2 requests per minute for the standard tier" in error["message"] and codes[2]["Retry-After"]


# --- the batch file format --------------------------------------------------------------------------------------


def test_batch_lines_are_checked_and_errors_name_the_line():
    good = {"custom_id": "a", "method": "POST", "url": "/v1/chat/completions", "body": CHAT}
    lines = [good, {**good, "custom_id": "a"}, {**good, "custom_id": "b", "url": "/v1/embeddings"}, "{oops"]
    data = "\n".join(x if isinstance(x, str) else __import__("json").dumps(x) for x in lines).encode()
    requests, errors = parse_lines(data)
    assert len(requests) == 1
    assert errors[0].startswith("line 2: custom_id 'a' is used twice")
    assert errors[1].startswith("line 3: url must be one of") and errors[2].startswith(
        "line 4: not valid JSON"
    )


# --- pages -----------------------------------------------------------------------------------------------------


def test_pages_render_for_the_team_and_404_for_others(world, ready):
    client = page_client(world["owner"])
    deployment = ready["deployment"]
    for url in ("/deployments/", f"/deployments/new/?checkpoint={world['ckpt'].pk}", f"/deployments/{deployment.pk}/",
                f"/deployments/{deployment.pk}/playground/"):  # fmt: skip
        assert client.get(url).status_code == 200, url
    detail = client.get(f"/deployments/{deployment.pk}/").content.decode()
    assert "$0.20" in detail and "Switch to turbo" in detail and "app" in detail
    job_page = client.get(f"/jobs/{world['ckpt'].job_id}/").content.decode()
    assert f"/deployments/new/?checkpoint={world['ckpt'].pk}" in job_page
    created = client.post(f"/deployments/{deployment.pk}/keys/", {"name": "web"}, follow=True)
    assert created.status_code == 200 and "sk-anneal-" in created.content.decode()
    outsider = page_client(world["outsider"])
    assert outsider.get(f"/deployments/{deployment.pk}/").status_code == 404
    assert (
        outsider.post(
            f"/deployments/{deployment.pk}/playground/chat", CHAT, content_type="application/json"
        ).status_code
        == 404
    )


def test_replica_commands_for_the_cpu_server_and_for_vllm_on_gpu_hosts():
    import sys

    from workers.deploy import serving_argv

    shape = {
        "model_dir": "/models/ckpt",
        "tier": "turbo",
        "port": 5123,
        "served_name": "adder",
        "max_concurrency": 3,
    }
    cpu = serving_argv(**shape)
    # A prelude that makes the kernel kill the replica with its worker, then the server itself.
    assert cpu[:2] == [sys.executable, "-c"] and "prctl" in cpu[2] and cpu[3] == str(os.getpid())
    assert cpu[4:7] == [sys.executable, "-m", "gpu_jobs.serving"]
    assert cpu[cpu.index("--tier") + 1] == "turbo" and cpu[cpu.index("--served-name") + 1] == "adder"
    assert cpu[cpu.index("--port") + 1] == "5123" and cpu[cpu.index("--max-concurrency") + 1] == "3"
    gpu = serving_argv(**shape, backend="vllm")
    assert gpu[4:6] == ["vllm", "serve"] and "/models/ckpt" in gpu and gpu[gpu.index("--port") + 1] == "5123"


def test_the_replica_prelude_serves_under_its_worker_even_as_pid_1_and_exits_when_the_worker_is_gone():
    """In a container the serve worker is pid 1: the prelude checks for its own worker, not for pid 1."""
    import subprocess
    import sys

    from workers.deploy import _DIE_WITH_PARENT

    def run(worker_pid: int) -> subprocess.CompletedProcess:
        command = [
            sys.executable,
            "-c",
            _DIE_WITH_PARENT,
            str(worker_pid),
            sys.executable,
            "-c",
            "print('served')",
        ]
        return subprocess.run(command, capture_output=True, text=True, timeout=60)

    served = run(os.getpid())
    assert served.returncode == 0 and served.stdout == "served\n", served.stderr
    gone = run(1)  # a worker that is not its parent: this one already died
    assert gone.returncode == 1 and "the serving worker is gone" in gone.stderr


def test_the_admin_lists_every_deployment_model_and_stops_deployments(world, ready):
    client = page_client(User.objects.create_superuser("root", password="rootroot"))
    for model in ("deployment", "deploymentkey", "usagerecord", "teambudget", "batchjob", "batchfile"):
        assert client.get(f"/admin/deployments/{model}/").status_code == 200, model
    deployment = ready["deployment"]
    assert client.get(f"/admin/deployments/deployment/{deployment.pk}/change/").status_code == 200
    client.post(
        "/admin/deployments/deployment/", {"action": "stop", "_selected_action": [deployment.pk]}, follow=True
    )
    assert Deployment.objects.get(pk=deployment.pk).state == DeploymentState.DRAINING


def test_the_batch_api_refuses_bad_files_and_non_batch_deployments_in_openai_shape(world, ready):
    import json

    from django.core.files.uploadedfile import SimpleUploadedFile

    headers = {"HTTP_AUTHORIZATION": f"Bearer {ready['key']}"}
    client = Client()
    good = {"custom_id": "a", "method": "POST", "url": "/v1/chat/completions", "body": CHAT}

    def upload(data: bytes, purpose: str = "batch"):
        file = SimpleUploadedFile("b.jsonl", data)
        return client.post("/v1/files", {"file": file, "purpose": purpose}, **headers)

    assert_openai_error(upload(json.dumps(good).encode(), purpose="fine-tune"), 400, param="purpose")
    bad = upload((json.dumps(good) + "\n" + json.dumps({**good, "custom_id": "b", "method": "GET"})).encode())
    assert "line 2: method must be POST" in assert_openai_error(bad, 400, code="invalid_file")["message"]
    created = upload(json.dumps(good).encode())
    assert created.status_code == 200 and created.json()["id"].startswith("file-")
    file_id = created.json()["id"]
    batch = client.post(
        "/v1/batches",
        json.dumps(
            {"input_file_id": file_id, "endpoint": "/v1/chat/completions", "completion_window": "24h"}
        ),
        content_type="application/json",
        **headers,
    )
    error = assert_openai_error(batch, 400, code="model_not_found")  # `adder` is at the standard tier
    assert "line 1" in error["message"] and "batch-tier" in error["message"]
    nul = client.post(
        "/v1/batches",
        json.dumps(
            {
                "input_file_id": file_id,
                "endpoint": "/v1/chat/completions",
                "completion_window": "24h",
                "metadata": {"note": "a\x00b"},  # PostgreSQL's jsonb cannot store NUL
            }
        ),
        content_type="application/json",
        **headers,
    )
    assert "Null characters" in assert_openai_error(nul, 400, param="metadata")["message"]
    assert_openai_error(client.get("/v1/files/file-99999/content", **headers), 404, code="file_not_found")
    assert_openai_error(client.get("/v1/batches/batch_nope", **headers), 404, code="batch_not_found")
    content = client.get(f"/v1/files/{file_id}/content", **headers)
    assert content.status_code == 200 and json.loads(b"".join(content.streaming_content)) == good


def test_a_cap_set_to_the_shown_spend_is_reached():
    from decimal import Decimal

    from anneal.deployments.selectors import budget_reached

    assert budget_reached(Decimal("0.0000166"), Decimal("0.000017"))  # the page shows 0.000017
    assert not budget_reached(Decimal("0.0000164"), Decimal("0.000017"))
    assert not budget_reached(Decimal("5"), None)
