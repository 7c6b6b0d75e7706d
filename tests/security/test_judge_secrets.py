"""Secrets for judges: a model judge uses a team secret (never a process variable), reaches only hosts an
owner allowed, is refused loopback, private, link-local and metadata addresses unless exactly allowed (checked
after DNS and on every redirect, before any connection), and can call a team deployment through /v1.

Named users: owner and expert (owner and expert of team Core), teammate (viewer in Core), outsider (owner of
team Rivals). Every server here is a real HTTP server on 127.0.0.1; other addresses are only ever resolved
by an injected resolver and refused before a socket opens (a guard on socket.create_connection fails the
test if one would).
"""

import json
import socket
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from ipaddress import ip_address

import pytest

from anneal.accounts.models import AuditEntry, TeamSecret
from anneal.accounts.secret_box import decrypt, encrypt
from anneal.verifiers.outbound import team_outbound
from gpu_jobs.rewards import SpecError, build_scorer, validate_spec
from gpu_jobs.rewards.outbound import Outbound, OutboundRefused, parse_host_entry
from tests.world import api_client, checkpoint_create, page_client

SECRET_VALUE = "sk-live-0123456789-TOP-SECRET-judge-key"
GOOD_ROW = {"prompt": "12+45=", "answer": "57"}


class JudgeServer:
    """A tiny OpenAI-compatible judge on 127.0.0.1 that records what it was sent. ``redirect_to``: answer
    every request with a 307 to that URL (and a body a refusal must not echo) instead."""

    def __init__(self, *, redirect_to: str = "") -> None:
        self.requests: list[dict] = []
        self.redirect_to = redirect_to
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):  # noqa: N802 (http.server's naming)
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                outer.requests.append({"headers": dict(self.headers), "body": body, "path": self.path})
                if outer.redirect_to:
                    self.send_response(307)
                    self.send_header("Location", outer.redirect_to)
                    self.send_header("Content-Length", "25")
                    self.end_headers()
                    self.wfile.write(b"INTERNAL-BODY-DO-NOT-SHOW")
                    return
                payload = json.dumps({"choices": [{"message": {"content": "Fine. Score: 8"}}]}).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.server.server_address[1]
        self.url = f"http://127.0.0.1:{self.port}/v1"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def judge():
    server = JudgeServer()
    yield server
    server.close()


@pytest.fixture
def no_connections(monkeypatch):
    """Fails any attempt to open a TCP connection: proves a refusal came before a packet could leave."""
    attempts: list = []

    def refuse(address, *args, **kwargs):
        attempts.append(address)
        raise AssertionError(f"a connection to {address} was attempted")

    monkeypatch.setattr(socket, "create_connection", refuse)
    return attempts


def judge_spec(url: str, **extra) -> dict:
    return {"type": "model_judge", "endpoint": url, "model": "judge", "timeout_s": 5, **extra}


def allow(world, host: str):
    response = api_client(world["owner"]).post("/api/v1/team/outbound-hosts", {"host": host}, format="json")
    assert response.status_code == 201, response.content
    return response


def store_secret(world, user: str = "owner", name: str = "JUDGE_KEY", value: str = SECRET_VALUE):
    return api_client(world[user]).post("/api/v1/team/secrets", {"name": name, "value": value}, format="json")


# --- a judge never reads the process environment ----------------------------------------------------------


@pytest.mark.parametrize("variable", ["SECRET_KEY", "DATABASE_URL", "AWS_SECRET_ACCESS_KEY", "HOME"])
def test_naming_any_environment_variable_is_refused_with_a_pointer_to_team_secrets(world, variable):
    with pytest.raises(SpecError) as caught:
        validate_spec(judge_spec("https://api.example.com/v1", api_key_env=variable))
    assert caught.value.field == "api_key_env" and "team secret" in caught.value.message
    created = api_client(world["owner"]).post(
        "/api/v1/verifiers",
        {"name": "leaky", "spec": judge_spec("https://api.example.com/v1", api_key_env=variable)},
        format="json",
    )
    assert created.status_code == 400
    assert created.json()["errors"][0]["field"] == "spec.api_key_env"
    assert "api_key_secret" in created.json()["errors"][0]["message"]


def test_a_version_saved_before_secrets_with_a_null_api_key_env_still_loads():
    clean = validate_spec(judge_spec("https://api.example.com/v1", api_key_env=None))
    assert "api_key_env" not in clean and clean["api_key_secret"] is None


# --- secrets: encrypted, write-only, audited --------------------------------------------------------------


def test_a_secret_value_never_appears_in_any_response_and_every_change_is_audited(world, judge):
    owner = api_client(world["owner"])
    created = store_secret(world)
    assert created.status_code == 201, created.content
    assert store_secret(world).status_code == 409  # taken: replace it explicitly
    replaced = owner.put("/api/v1/team/secrets/JUDGE_KEY", {"value": SECRET_VALUE + "-v2"}, format="json")
    assert replaced.status_code == 200
    allow(world, f"127.0.0.1:{judge.port}")
    verifier = owner.post(
        "/api/v1/verifiers",
        {"name": "judged", "spec": judge_spec(judge.url, api_key_secret="JUDGE_KEY")},
        format="json",
    )
    assert verifier.status_code == 201, verifier.content
    page = page_client(world["owner"])
    responses = [
        created,
        replaced,
        verifier,
        owner.get("/api/v1/team/secrets"),
        owner.get(f"/api/v1/verifiers/{verifier.json()['id']}"),
        owner.get("/api/v1/me"),
        page.get("/team/settings/"),
        page.get(f"/verifiers/{verifier.json()['id']}/"),
        page.post("/team/settings/", {"form": "secret", "name": "bad name!", "value": SECRET_VALUE}),
    ]
    for response in responses:
        assert response.status_code in (200, 201), (response.status_code, response.content[:300])
        assert SECRET_VALUE.encode() not in response.content
    assert owner.get("/api/v1/team/secrets").json()[0]["name"] == "JUDGE_KEY"
    stored = TeamSecret.objects.get(team=world["core"], name="JUDGE_KEY")
    assert SECRET_VALUE not in stored.ciphertext and decrypt(stored.ciphertext) == SECRET_VALUE + "-v2"
    # The judge got the current value as its bearer token: the only place it ever goes.
    preview = owner.post(
        "/api/v1/verifiers/preview",
        {
            "spec": judge_spec(judge.url, api_key_secret="JUDGE_KEY"),
            "samples": [{"row": GOOD_ROW, "completion": "57"}],
        },
        format="json",
    )
    assert preview.status_code == 200 and preview.json()["results"][0]["score"] == 0.8
    assert judge.requests[-1]["headers"]["Authorization"] == f"Bearer {SECRET_VALUE}-v2"
    assert SECRET_VALUE.encode() not in preview.content
    assert owner.delete("/api/v1/team/secrets/JUDGE_KEY").status_code == 204
    actions = list(
        AuditEntry.objects.filter(team=world["core"], action__startswith="team_secret.")
        .order_by("created_at")
        .values_list("action", flat=True)
    )
    assert actions == ["team_secret.create", "team_secret.replace", "team_secret.delete"]
    assert not any(SECRET_VALUE in json.dumps(entry.detail) for entry in AuditEntry.objects.all())


def test_a_viewer_cannot_set_secrets_and_nobody_outside_the_team_sees_their_names(world):
    assert store_secret(world, user="teammate").status_code == 403
    assert store_secret(world, user="expert").status_code == 201
    assert api_client(world["outsider"]).get("/api/v1/team/secrets").json() == []
    assert api_client(world["outsider"]).delete("/api/v1/team/secrets/JUDGE_KEY").status_code == 404


def test_secrets_stay_readable_when_an_operator_sets_and_rotates_the_secrets_key(settings):
    settings.SECRETS_KEYS = []
    before = encrypt("value-one")  # with the key derived from SECRET_KEY
    settings.SECRETS_KEYS = ["first operator key"]
    middle = encrypt("value-two")
    settings.SECRETS_KEYS = ["second operator key", "first operator key"]
    assert decrypt(before) == "value-one" and decrypt(middle) == "value-two"
    settings.SECRETS_KEYS = ["second operator key"]
    with pytest.raises(Exception, match="does not decrypt"):
        decrypt(middle)


# --- only hosts an owner allowed; loopback only when exactly allowed ---------------------------------------


def test_a_judge_on_loopback_is_refused_until_an_owner_allows_exactly_that_host(world, judge):
    owner = api_client(world["owner"])
    spec = judge_spec(judge.url)
    preview = {"spec": spec, "samples": [{"row": GOOD_ROW, "completion": "57"}]}
    refused = owner.post("/api/v1/verifiers/preview", preview, format="json")
    assert refused.status_code == 400 and refused.json()["errors"][0]["field"] == "spec.endpoint"
    assert "an owner allows it" in refused.json()["errors"][0]["message"]
    # The engine refuses on its own too: a spec that got past the platform still sends nothing.
    result = build_scorer(spec, outbound=team_outbound(world["core"])).score(GOOD_ROW, "57")
    assert result.score == 0.0 and "not an allowed endpoint" in result.reason
    assert judge.requests == []
    # A wildcard never reaches loopback; the exact host does.
    wildcard = Outbound(
        allowed_hosts=(parse_host_entry("*.judge.test"),), resolver=lambda host, port: ["127.0.0.1"]
    )
    result = build_scorer(judge_spec(f"http://a.judge.test:{judge.port}/v1"), outbound=wildcard).score(
        GOOD_ROW, "57"
    )
    assert "a loopback address" in result.reason and judge.requests == []
    allow(world, f"127.0.0.1:{judge.port}")
    allowed = owner.post("/api/v1/verifiers/preview", preview, format="json")
    assert allowed.status_code == 200 and allowed.json()["results"][0]["score"] == 0.8
    assert len(judge.requests) == 1 and "Authorization" not in judge.requests[0]["headers"]


def test_the_connection_goes_to_the_address_that_was_checked_with_the_name_kept(judge):
    # judge.test exists in no DNS: the request reaches the server only through the checked address.
    resolved: list = []

    def resolver(host, port):
        resolved.append(host)
        return ["127.0.0.1"]

    outbound = Outbound(allowed_hosts=(parse_host_entry("judge.test"),), resolver=resolver)
    result = build_scorer(judge_spec(f"http://judge.test:{judge.port}/v1"), outbound=outbound).score(
        GOOD_ROW, "57"
    )
    assert result.score == 0.8, result.reason
    assert resolved == ["judge.test"] and judge.requests[0]["headers"]["Host"] == f"judge.test:{judge.port}"


ADDRESSES = [
    ("10.0.0.7", "a private address"),
    ("192.168.1.1", "a private address"),
    ("169.254.1.1", "a link-local address"),
    ("169.254.169.254", "a cloud metadata address"),
    ("fd00:ec2::254", "a cloud metadata address"),
    ("100.64.0.1", "a carrier-grade NAT (shared) address"),
    ("224.0.0.1", "a multicast address"),
    ("0.0.0.0", "an unspecified address"),
    ("::1", "a loopback address"),
    ("::ffff:169.254.169.254", "a cloud metadata address"),
    ("fe80::1", "a link-local address"),
]


@pytest.mark.parametrize(("address", "kind"), ADDRESSES)
def test_non_public_addresses_behind_an_allowed_wildcard_are_refused_before_any_connection(
    no_connections, address, kind
):
    outbound = Outbound(
        allowed_hosts=(parse_host_entry("*.example.com"),), resolver=lambda host, port: [address]
    )
    result = build_scorer(judge_spec("https://judge.example.com/v1"), outbound=outbound).score(GOOD_ROW, "57")
    assert result.score == 0.0 and kind in result.reason and str(ip_address(address)) in result.reason
    assert no_connections == []


def test_a_host_resolving_to_a_metadata_address_is_refused_even_when_exactly_allowed(no_connections):
    outbound = Outbound(
        allowed_hosts=(parse_host_entry("judge.internal"),), resolver=lambda host, port: ["169.254.169.254"]
    )
    with pytest.raises(OutboundRefused, match="cloud metadata address: refused unless that literal address"):
        outbound.check("judge.internal", 80)
    for literal in ("http://169.254.169.254/latest", "http://10.0.0.7/v1", "http://[fd00:ec2::254]/v1"):
        result = build_scorer(judge_spec(literal), outbound=Outbound()).score(GOOD_ROW, "57")
        assert "not an allowed endpoint" in result.reason
    assert no_connections == []


def test_a_redirect_to_a_refused_address_is_refused_and_its_body_not_shown(world, judge):
    other = JudgeServer()  # on loopback too, but on a port nobody allowed
    bouncer = JudgeServer(redirect_to=f"{other.url}/chat/completions")
    try:
        outbound = Outbound(
            allowed_hosts=(parse_host_entry(f"127.0.0.1:{bouncer.port}"),), secrets={"K": "k-value"}
        )
        result = build_scorer(judge_spec(bouncer.url, api_key_secret="K"), outbound=outbound).score(
            GOOD_ROW, "57"
        )
        assert result.score == 0.0 and f"127.0.0.1:{other.port} is not an allowed endpoint" in result.reason
        assert "INTERNAL-BODY" not in result.reason
        assert len(bouncer.requests) == 1 and other.requests == []
        # To a metadata address: refused before a connection is even attempted.
        bouncer.redirect_to = "http://169.254.169.254/latest/meta-data/"
        result = build_scorer(judge_spec(bouncer.url), outbound=outbound).score(GOOD_ROW, "57")
        assert "169.254.169.254:80 is not an allowed endpoint" in result.reason
        assert len(bouncer.requests) == 2
    finally:
        other.close()
        bouncer.close()


# --- a team's secrets are its own; owners alone choose the hosts --------------------------------------------


def test_another_teams_secret_cannot_be_named_or_resolved(world, judge):
    assert store_secret(world).status_code == 201
    outsider = api_client(world["outsider"])
    outsider.post("/api/v1/team/outbound-hosts", {"host": f"127.0.0.1:{judge.port}"}, format="json")
    created = outsider.post(
        "/api/v1/verifiers",
        {"name": "borrow", "spec": judge_spec(judge.url, api_key_secret="JUDGE_KEY")},
        format="json",
    )
    assert created.status_code == 400
    assert created.json()["errors"][0] == {
        "field": "spec.api_key_secret",
        "message": "team 'Rivals' has no secret named 'JUDGE_KEY': add it under Team settings → Secrets",
    }
    # Built straight from the engine with the other team's policy: no key is found, nothing is sent.
    scorer = build_scorer(
        judge_spec(judge.url, api_key_secret="JUDGE_KEY"), outbound=team_outbound(world["rivals"])
    )
    result = scorer.score(GOOD_ROW, "57")
    assert result.score == 0.0 and "no secret named 'JUDGE_KEY'" in result.reason
    assert judge.requests == []


def test_only_an_owner_changes_the_allowed_hosts_in_api_and_pages_alike(world):
    expert = api_client(world["expert"])
    refused = expert.post("/api/v1/team/outbound-hosts", {"host": "api.example.com"}, format="json")
    assert refused.status_code == 403 and "owner" in refused.json()["detail"]
    page = page_client(world["expert"])
    assert page.post("/team/settings/", {"form": "host", "host": "api.example.com"}).status_code == 403
    assert b"Only an owner of the team changes this list" in page.get("/team/settings/").content
    added = allow(world, "api.example.com").json()
    assert expert.delete(f"/api/v1/team/outbound-hosts/{added['id']}").status_code == 403
    bad = api_client(world["owner"]).post(
        "/api/v1/team/outbound-hosts", {"host": "https://x.com/v1"}, format="json"
    )
    assert bad.status_code == 400 and bad.json()["errors"][0]["field"] == "host"
    assert api_client(world["owner"]).delete(f"/api/v1/team/outbound-hosts/{added['id']}").status_code == 204
    actions = set(
        AuditEntry.objects.filter(action__startswith="outbound_host.").values_list("action", flat=True)
    )
    assert actions == {"outbound_host.add", "outbound_host.remove"}


# --- a team deployment as the judge, through the platform's own /v1 -----------------------------------------


@pytest.mark.django_db(transaction=True)
def test_a_deployment_judge_goes_through_v1_with_a_key_bound_to_it_and_is_metered(
    world, settings, live_server, tmp_path
):
    from anneal.deployments.models import Deployment, DeploymentKey, DeploymentState, Replica, UsageRecord

    settings.BASE_URL = live_server.url
    owner, outsider, core = world["owner"], world["outsider"], world["core"]
    checkpoint = checkpoint_create(team=core, location=tmp_path / "ckpt", step=1)
    replica_server = JudgeServer()  # stands in for the deployment's replica behind the platform's proxy
    try:
        deployment = Deployment.objects.create(
            team=core, checkpoint=checkpoint, name="adder", state=DeploymentState.READY
        )
        Replica.objects.create(
            deployment=deployment,
            tier=deployment.tier,
            state="ready",
            host="127.0.0.1",
            port=replica_server.port,
        )
        preview = {
            "spec": {"type": "model_judge", "deployment": "adder"},
            "samples": [{"row": GOOD_ROW, "completion": "57"}],
        }
        for _ in range(2):
            response = api_client(owner).post("/api/v1/verifiers/preview", preview, format="json")
            assert response.status_code == 200, response.content
            assert response.json()["results"][0]["score"] == 0.8, response.json()
        # One key, bound to that deployment alone, issued once and reused; never listed among the secrets.
        (key,) = DeploymentKey.objects.filter(team=core)
        assert key.deployment_id == deployment.pk and key.is_active
        assert api_client(owner).get("/api/v1/team/secrets").json() == []
        records = UsageRecord.objects.filter(deployment=deployment)
        assert records.count() == 2 and set(records.values_list("key_id", flat=True)) == {key.pk}
        assert [r["body"]["model"] for r in replica_server.requests] == ["adder", "adder"]
        # Another team names the same deployment: it has none by that name.
        rival = api_client(outsider).post("/api/v1/verifiers/preview", preview, format="json")
        assert rival.status_code == 400 and rival.json()["errors"][0]["field"] == "spec.deployment"
    finally:
        replica_server.close()


def test_the_form_builder_offers_the_teams_secret_names_and_never_an_environment_variable(world):
    assert store_secret(world, name="CORE_JUDGE_KEY").status_code == 201
    page = page_client(world["owner"])
    html = page.get("/verifiers/new/?type=model_judge").content.decode()
    assert 'name="model_judge.api_key_secret"' in html and "api_key_env" not in html
    assert '<option value="CORE_JUDGE_KEY">' in html and SECRET_VALUE not in html
    outsider = page_client(world["outsider"])
    assert "CORE_JUDGE_KEY" not in outsider.get("/verifiers/new/?type=model_judge").content.decode()
