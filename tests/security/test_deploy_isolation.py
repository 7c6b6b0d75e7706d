"""Deployments keep each team's models, money and batches its own (issue 16).

- A replica answers only the platform: without its credential (or with a wrong one) a call gets a bare 401,
  a wrong model name reveals nothing, and the credential never shows on its command line, in the API, the
  pages or the admin. The platform's /v1 proxy and the worker's health check send it.
- Only an owner lifts the team's spending cap, through the API as through the page.
- A /v1 key bound to one deployment sees only that deployment's batches and the files made with it.
- /v1/files refuses an over-size upload with 413 while it streams in, without reading the rest.

Named users: owner (owner of team Core), expert (expert in Core), outsider (owner of team Rivals).
"""

import asyncio
import json
import os
import time
from decimal import Decimal
from pathlib import Path

import httpx
import pytest
from django.conf import settings as django_settings
from django.contrib.auth.models import User
from django.core.files.uploadedfile import SimpleUploadedFile
from django.test import Client

from anneal.deployments import services
from anneal.deployments.models import Replica
from anneal.deployments.selectors import team_budget_cap
from gpu_jobs.tiny_model import ensure_tiny_model
from tests.stack import free_port
from tests.world import api_client, checkpoint_create, page_client

pytestmark = pytest.mark.django_db

MODEL_STORE = Path(os.environ.get("ANNEAL_MODEL_STORE", "/tmp/anneal-test/models"))
HELLO = [{"role": "user", "content": "12+45="}]


def deploy(world, name: str, *, tier: str = "standard", location: Path | None = None):
    location = location or Path(django_settings.DATA_DIR) / f"ckpt-{name}"  # the test's own (data_dirs)
    checkpoint = checkpoint_create(team=world["core"], location=location)
    return services.deployment_create(
        team=world["core"], user=world["owner"], checkpoint_id=checkpoint.pk, name=name, tier=tier
    )


def key_for(world, deployment=None) -> str:
    name = deployment.name if deployment else "team-wide"
    return services.deployment_key_create(
        team=world["core"], user=world["owner"], name=name, deployment=deployment
    )[1]


# --- replicas answer the platform only ----------------------------------------------------------------------


@pytest.fixture
def served(world, tmp_path):
    """A replica of deployment `adder` started the way the serve worker starts one, serving the tiny model."""
    from workers import deploy as worker

    deployment = deploy(world, "adder", location=ensure_tiny_model(MODEL_STORE))
    services.deployment_claim_prepare(deployment_id=deployment.pk)
    (replica,) = services.replicas_spawn(deployment=deployment, count=1, tier=deployment.tier)
    assert services.replica_claim(replica_id=replica.pk, worker="test")
    port = free_port()
    log_path = tmp_path / "replica.log"
    with log_path.open("ab") as log:
        child, credential = worker.replica_process_start(replica=replica, port=port, log=log)
    try:
        services.replica_started(
            replica_id=replica.pk, host=worker.advertised_host(), port=port, pid=child.pid
        )
        url = Replica.objects.get(pk=replica.pk).base_url
        with httpx.Client(timeout=2.0) as http:
            for _ in range(600):  # the worker's own health check, credential included
                if worker.replica_health(http, base_url=url, credential=credential)["status"] == "ok":
                    break
                assert child.poll() is None, log_path.read_text()[-2000:]
                time.sleep(0.2)
            else:
                raise AssertionError(f"the replica never turned healthy: {log_path.read_text()[-2000:]}")
        assert services.replica_ready(replica_id=replica.pk)
        yield {
            "deployment": deployment,
            "replica": Replica.objects.get(pk=replica.pk),
            "url": url,
            "credential": credential,
            "pid": child.pid,
        }
    finally:
        worker._stop_group(child)


def test_a_replica_answers_only_the_platform_and_names_nothing_to_others(world, served):
    # One replica for every check below: starting one loads a model.
    url, credential = served["url"], served["credential"]
    chat = {"model": "adder", "messages": HELLO, "max_tokens": 2}
    wrong = credential[:-1] + ("A" if credential[-1] != "A" else "B")
    calls = [
        ("GET", "/health", None),
        ("GET", "/v1/models", None),
        ("POST", "/v1/chat/completions", chat),
        ("POST", "/v1/completions", {"model": "adder", "prompt": "1+1=", "max_tokens": 2}),
        ("GET", "/no/such/route", None),
    ]
    for headers in (
        {},
        {"Authorization": f"Bearer {wrong}"},
        {"Authorization": credential},
        {"X-Key": credential},
    ):
        for method, path, body in calls:
            response = httpx.request(method, url + path, json=body, headers=headers, timeout=10)
            assert response.status_code == 401, (headers, path, response.text)
            assert response.content == b"", (headers, path, response.text)  # no detail at all
    good = {"Authorization": f"Bearer {credential}"}
    guess = httpx.post(
        url + "/v1/chat/completions", json={**chat, "model": "guess"}, headers=good, timeout=10
    )
    assert guess.status_code == 404 and "adder" not in guess.text, guess.text
    assert httpx.post(url + "/v1/chat/completions", json=chat, headers=good, timeout=60).status_code == 200
    # The credential reaches the process through its environment, never its world-readable command line.
    assert credential.encode() not in Path(f"/proc/{served['pid']}/cmdline").read_bytes()

    # The platform's /v1 proxy sends the credential; it shows on no page, API answer or admin page.
    raw = key_for(world, served["deployment"])
    response = Client().post(
        "/v1/chat/completions",
        json.dumps({"model": "adder", "messages": HELLO, "max_tokens": 2}),
        content_type="application/json",
        HTTP_AUTHORIZATION=f"Bearer {raw}",
    )
    assert response.status_code == 200, response.content
    assert response.json()["usage"]["total_tokens"] > 0
    credential, replica = served["credential"], served["replica"]
    assert replica.credential == credential  # what the proxy derives from the row is what the process got
    shown = [api_client(world["owner"]).get(f"/api/v1/deployments/{served['deployment'].pk}").content]
    shown.append(page_client(world["owner"]).get(f"/deployments/{served['deployment'].pk}/").content)
    root = page_client(User.objects.create_superuser("root", password="rootroot"))
    shown.append(root.get(f"/admin/deployments/deployment/{served['deployment'].pk}/change/").content)
    for content in shown:
        assert credential.encode() not in content and replica.credential_salt.encode() not in content


def test_a_vllm_replica_gets_the_credential_where_vllm_reads_it_and_never_in_argv():
    from workers.deploy import serving_argv, serving_env

    credential = "c" * 64
    shape = {
        "model_dir": "/m",
        "tier": "standard",
        "port": 5123,
        "served_name": "adder",
        "max_concurrency": 2,
    }
    env = serving_env(credential=credential, backend="vllm")
    assert env["VLLM_API_KEY"] == credential and "ANNEAL_REPLICA_CREDENTIAL" not in env
    assert serving_env(credential=credential, backend="cpu")["ANNEAL_REPLICA_CREDENTIAL"] == credential
    for backend in ("cpu", "vllm"):
        assert credential not in " ".join(serving_argv(**shape, backend=backend))


# --- spending caps: owners only -----------------------------------------------------------------------------


def test_only_an_owner_sets_the_spending_cap_through_the_api_and_the_page(world):
    services.team_budget_set(team=world["core"], user=world["owner"], monthly_cap_usd=Decimal("5"))
    lifted = api_client(world["expert"]).post(
        "/api/v1/deployments/usage", {"monthly_cap_usd": None}, format="json"
    )
    assert lifted.status_code == 403, lifted.content
    assert "owner" in lifted.json()["detail"] and "cap" in lifted.json()["detail"]
    refused = page_client(world["expert"]).post("/deployments/budget/", {"monthly_cap_usd": "1000"})
    assert refused.status_code == 403 and "owner" in refused.content.decode()
    assert team_budget_cap(world["core"].pk) == Decimal("5")
    raised = api_client(world["owner"]).post(
        "/api/v1/deployments/usage", {"monthly_cap_usd": "9"}, format="json"
    )
    assert raised.status_code == 200 and team_budget_cap(world["core"].pk) == Decimal("9")


# --- batch objects belong to the key's deployment ----------------------------------------------------------


def test_a_key_bound_to_one_deployment_sees_only_its_own_batches_and_files(world):
    alpha, beta = deploy(world, "alpha", tier="batch"), deploy(world, "beta", tier="batch")
    keys = {"alpha": key_for(world, alpha), "beta": key_for(world, beta), "team": key_for(world)}

    def call(key: str, method: str, path: str, **kwargs):
        return getattr(Client(), method)(f"/v1/{path}", HTTP_AUTHORIZATION=f"Bearer {keys[key]}", **kwargs)

    def batch_of(key: str, model: str) -> tuple[str, str]:
        line = {
            "custom_id": "a",
            "method": "POST",
            "url": "/v1/chat/completions",
            "body": {"model": model, "messages": HELLO},
        }
        upload = SimpleUploadedFile("b.jsonl", json.dumps(line).encode())
        file_id = call(key, "post", "files", data={"file": upload, "purpose": "batch"}).json()["id"]
        body = {"input_file_id": file_id, "endpoint": "/v1/chat/completions", "completion_window": "24h"}
        batch = call(key, "post", "batches", data=json.dumps(body), content_type="application/json")
        assert batch.status_code == 200, batch.content
        return file_id, batch.json()["id"]

    files, batches = {}, {}
    files["alpha"], batches["alpha"] = batch_of("alpha", "alpha")
    files["beta"], batches["beta"] = batch_of("beta", "beta")
    for mine, theirs in (("alpha", "beta"), ("beta", "alpha")):
        assert [b["id"] for b in call(mine, "get", "batches").json()["data"]] == [batches[mine]]
        assert [f["id"] for f in call(mine, "get", "files").json()["data"]] == [files[mine]]
        assert call(mine, "get", f"batches/{batches[theirs]}").status_code == 404
        assert call(mine, "post", f"batches/{batches[theirs]}/cancel").status_code == 404
        assert call(mine, "get", f"files/{files[theirs]}").status_code == 404
        assert call(mine, "get", f"files/{files[theirs]}/content").status_code == 404
        body = {
            "input_file_id": files[theirs],
            "endpoint": "/v1/chat/completions",
            "completion_window": "24h",
        }
        reuse = call(mine, "post", "batches", data=json.dumps(body), content_type="application/json")
        assert reuse.status_code == 404 and reuse.json()["error"]["code"] == "file_not_found"
    # A key for every deployment of the team sees them all.
    assert {b["id"] for b in call("team", "get", "batches").json()["data"]} == set(batches.values())
    assert {f["id"] for f in call("team", "get", "files").json()["data"]} == set(files.values())


# --- /v1/files: the size is checked while the upload streams in ----------------------------------------------

LIMIT = 1024 * 1024
CHUNK = 64 * 1024
OFFERED = 32 * LIMIT
LINE = (
    json.dumps({"custom_id": "x", "method": "POST", "url": "/v1/completions", "body": {}}) + "\n"
).encode()


def assert_too_large(status: int, body: bytes) -> None:
    assert status == 413, body
    error = json.loads(body)["error"]
    assert set(error) == {"message", "type", "param", "code"}
    assert "1 MB" in error["message"] and "ANNEAL_UPLOAD_MAX_MB" in error["message"], error


class LongMultipart:
    """A multipart body whose file part runs to OFFERED bytes, made as it is read; counts what the server took.
    Bounded, so a server that fails to cut it off fills no disk."""

    head = (
        b'--B\r\nContent-Disposition: form-data; name="purpose"\r\n\r\nbatch\r\n'
        b'--B\r\nContent-Disposition: form-data; name="file"; filename="big.jsonl"\r\n'
        b"Content-Type: application/jsonl\r\n\r\n"
    )

    def __init__(self) -> None:
        self.taken = 0

    @property
    def more(self) -> bool:
        return self.taken < OFFERED

    def chunk(self, size: int = CHUNK) -> bytes:
        if not self.more:
            return b""
        data = (self.head if self.taken == 0 else b"") + LINE * max(1, size // len(LINE))
        self.taken += len(data)
        return data

    def read(self, size: int = -1) -> bytes:  # the WSGI input
        return self.chunk(size if size > 0 else CHUNK)

    def readline(self, size: int = -1) -> bytes:
        return self.read(size)


def asgi_upload(world, settings, *, content_length: int | None) -> tuple[int, bytes, int]:
    """POST /v1/files through the ASGI application Daphne serves, a body of OFFERED bytes streamed in chunks."""
    from anneal.asgi import application

    settings.UPLOAD_MAX_BYTES = LIMIT
    body, sent = LongMultipart(), []
    headers = [(b"content-type", b"multipart/form-data; boundary=B"), (b"host", b"testserver")]
    headers.append((b"authorization", f"Bearer {key_for(world)}".encode()))
    if content_length is not None:
        headers.append((b"content-length", str(content_length).encode()))
    scope = {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": "POST",
        "scheme": "http",
        "path": "/v1/files",
        "raw_path": b"/v1/files",
        "query_string": b"",
        "root_path": "",
        "headers": headers,
        "client": ("127.0.0.1", 5000),
        "server": ("testserver", 80),
    }

    async def receive():
        if len(sent) == 2:  # answered: the client goes away
            return {"type": "http.disconnect"}
        data = body.chunk()
        return {"type": "http.request", "body": data, "more_body": body.more}

    async def send(message):
        sent.append(message)

    asyncio.run(asyncio.wait_for(application(scope, receive, send), timeout=30))
    start = next(m for m in sent if m["type"] == "http.response.start")
    content = b"".join(m.get("body", b"") for m in sent if m["type"] == "http.response.body")
    return start["status"], content, body.taken


def test_a_streamed_upload_is_cut_off_past_the_limit_with_413(world, settings):
    status, content, taken = asgi_upload(world, settings, content_length=None)  # chunked: no length told
    assert_too_large(status, content)
    # Read up to the limit (and the room the form's other fields may take), not on to the end.
    assert taken < 3 * LIMIT < OFFERED


def test_an_upload_announced_past_the_limit_is_refused_before_reading_it(world, settings):
    status, content, taken = asgi_upload(world, settings, content_length=50 * LIMIT)
    assert_too_large(status, content)
    assert taken == 0
    # The same through Django's own request handling (a WSGI server, the test client).
    stream = LongMultipart()
    response = Client().generic(
        "POST",
        "/v1/files",
        b"-",
        content_type="multipart/form-data; boundary=B",
        HTTP_AUTHORIZATION=f"Bearer {key_for(world)}",
        CONTENT_LENGTH=str(50 * LIMIT),
        **{"wsgi.input": stream},
    )
    assert_too_large(response.status_code, response.content)
    assert stream.taken == 0


def test_a_file_just_past_the_limit_is_refused_while_parsed(world, settings):
    settings.UPLOAD_MAX_BYTES = LIMIT
    upload = SimpleUploadedFile("big.jsonl", LINE * (LIMIT // len(LINE) + 1))
    response = Client().post(
        "/v1/files", {"file": upload, "purpose": "batch"}, HTTP_AUTHORIZATION=f"Bearer {key_for(world)}"
    )
    assert_too_large(response.status_code, response.content)
    assert not list((settings.DATA_DIR / "batch_files").glob("**/*.jsonl"))
