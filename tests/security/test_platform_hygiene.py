"""Platform hygiene (issue 16): previews and probes on the team's sandbox quota and a per-user rate, lineage kept,
a cheap liveness check with the details for staff, sign-in and API throttling, the audit log complete and
read-only, no server paths shown, and production security settings when DEBUG is off.

Named users: owner and expert (team Core), viewer (Core, read-only).
"""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from django.contrib import admin
from django.contrib.auth.models import User
from django.core.cache import cache
from django.test import RequestFactory

from anneal.accounts.login import failures_key
from anneal.accounts.models import AuditEntry
from anneal.accounts.services import audit
from anneal.datasets.models import DatasetVersion
from anneal.datasets.services import dataset_version_create_from_rows
from anneal.sandboxes_view import fleet_redis, quota_team_id
from anneal.throttles import window_clear
from anneal.training.models import Job, JobState
from anneal.training.services import job_launch
from anneal.verifiers.models import Verifier
from anneal.verifiers.sandbox_quota import preview_rate_key
from anneal.verifiers.services import verifier_create
from sandboxes import fleet
from tests.world import api_client

pytestmark = pytest.mark.django_db

ROOT = Path(__file__).resolve().parents[2]
ROWS = [{"prompt": f"{a}+{b}=", "answer": str(a + b)} for a, b in [(12, 45), (3, 4), (20, 22), (7, 8)]]
NUMERIC = {"spec": {"type": "numeric"}, "samples": [{"row": {"answer": "57"}, "completion": "57"}]}
CODE = {
    "spec": {"type": "python_tests"},
    "samples": [{"row": {"tests": ["assert result == 57"]}, "completion": "```python\n12 + 45\n```"}],
}


@pytest.fixture
def core(world, settings, tmp_path):
    """Team Core of the shared world (tests/world.py): its owner, expert and viewer (the teammate)."""
    settings.CHECKPOINT_DIR = tmp_path / "checkpoints"
    core = {
        "team": world["core"],
        "owner": world["owner"],
        "expert": world["expert"],
        "viewer": world["teammate"],
    }
    # Counts kept in the cache outlive a test database: start every user afresh.
    for user in (core["owner"], core["expert"], core["viewer"]):
        window_clear(preview_rate_key(user))
        cache.delete(f"throttle_user_{user.pk}")
    return core


def actions(action: str) -> list[AuditEntry]:
    return list(AuditEntry.objects.filter(action=action).order_by("id"))


@pytest.fixture
def full_quota(core, settings):
    """Core's sandbox quota (2 runs) all taken, as by a job's checks on the sandbox hosts."""
    settings.SANDBOX_TEAM_QUOTA = 2
    store = fleet_redis()
    leases = fleet.try_acquire(store, team=quota_team_id(core["team"]), runs=2, quota=2)
    assert leases is not None
    yield leases
    leases.release()


# Previews and probes: the team's sandbox quota, a per-user rate, and no viewer.


def test_a_viewer_may_not_run_a_preview(core):
    response = api_client(core["viewer"]).post("/api/v1/verifiers/preview", NUMERIC, format="json")
    assert response.status_code == 403
    assert "viewer" in response.json()["detail"]
    assert actions("verifier.preview") == []


def test_a_code_preview_waits_for_room_on_the_teams_sandbox_quota(core, full_quota):
    expert = api_client(core["expert"])
    refused = expert.post("/api/v1/verifiers/preview", CODE, format="json")
    assert refused.status_code == 429
    detail = refused.json()["detail"]
    assert "team 'Core' has 2 of its 2 concurrent sandbox runs in use (ANNEAL_SANDBOX_TEAM_QUOTA)" in detail
    assert "retry in 10 s" in detail and refused["Retry-After"] == "10"
    # A check that runs no code takes no sandbox: it is not held back.
    assert expert.post("/api/v1/verifiers/preview", NUMERIC, format="json").status_code == 200

    full_quota.release()
    ran = expert.post("/api/v1/verifiers/preview", CODE, format="json")
    assert ran.status_code == 200 and ran.json()["results"][0]["score"] == 1.0
    assert fleet.in_flight(fleet_redis(), team=quota_team_id(core["team"])) == 0  # its leases are back


def test_the_hack_probes_of_a_save_count_against_the_quota_too(core, full_quota):
    expert = api_client(core["expert"])
    body = {"name": "sums", "spec": {"type": "python_tests"}}
    refused = expert.post("/api/v1/verifiers", body, format="json")
    assert refused.status_code == 429
    assert "ANNEAL_SANDBOX_TEAM_QUOTA" in refused.json()["detail"]
    assert not Verifier.objects.exists()  # nothing is saved unprobed
    full_quota.release()
    saved = expert.post("/api/v1/verifiers", body, format="json")
    assert saved.status_code == 201
    assert not any(
        p.get("skipped", "").startswith("the probes") for p in saved.json()["versions"][0]["probe_results"]
    )


def test_previews_are_limited_per_user_per_minute(core, settings):
    settings.VERIFIER_PREVIEW_RATE_PER_MIN = 2
    expert = api_client(core["expert"])
    assert [expert.post("/api/v1/verifiers/preview", NUMERIC, format="json").status_code for _ in "ab"] == [
        200,
        200,
    ]
    refused = expert.post("/api/v1/verifiers/preview", NUMERIC, format="json")
    assert refused.status_code == 429
    detail = refused.json()["detail"]
    assert "at most 2 verifier previews per minute per user (ANNEAL_PREVIEW_RATE_PER_MIN)" in detail
    assert 1 <= int(refused["Retry-After"]) <= 60 and f"retry in {refused['Retry-After']} s" in detail
    # Per user: a teammate still previews.
    assert (
        api_client(core["owner"]).post("/api/v1/verifiers/preview", NUMERIC, format="json").status_code == 200
    )
    # Each preview that ran is in the audit log, with what it ran.
    previews = actions("verifier.preview")
    assert [(e.user, e.team) for e in previews] == [(core["expert"], core["team"])] * 2 + [
        (core["owner"], core["team"])
    ]
    assert previews[0].detail == {"type": "numeric", "samples": 1, "sandbox_runs": 0}


# Lineage: a version a job names is never deleted.


@pytest.fixture
def job_with_lineage(core):
    team, owner = core["team"], core["owner"]
    train, pooled, held_out = (
        dataset_version_create_from_rows(team=team, user=owner, name=name, rows=ROWS)
        for name in ("train", "pooled", "held-out")
    )
    verifier = verifier_create(team=team, user=owner, name="exact", spec={"type": "exact_match"})
    job = job_launch(
        team=team,
        user=owner,
        name="run",
        dataset_version_ids=[train.id, pooled.id],
        eval_dataset_version_id=held_out.id,
        verifiers=[{"verifier_version": verifier.latest_version.id}],
        params={"max_steps": 1},
    )
    return {"job": job, "train": train, "pooled": pooled, "held_out": held_out}


def test_no_version_a_job_names_can_be_deleted(core, job_with_lineage, client):
    owner = api_client(core["owner"])
    job = job_with_lineage["job"]
    held_out = owner.delete(f"/api/v1/datasets/versions/{job_with_lineage['held_out'].id}")
    assert held_out.status_code == 409
    assert f"job #{job.pk} 'run' is evaluated on held-out v1" in held_out.json()["detail"]
    pooled = owner.delete(f"/api/v1/datasets/versions/{job_with_lineage['pooled'].id}")
    assert pooled.status_code == 409 and f"job #{job.pk} 'run' uses pooled v1" in pooled.json()["detail"]
    whole = owner.delete(f"/api/v1/datasets/{job_with_lineage['held_out'].dataset_id}")
    assert whole.status_code == 409 and f"job #{job.pk}" in whole.json()["detail"]

    client.force_login(core["owner"])
    page = client.post(f"/datasets/versions/{job_with_lineage['held_out'].id}/delete/", follow=True)
    assert f"job #{job.pk} &#x27;run&#x27; is evaluated on held-out v1" in page.content.decode()
    assert DatasetVersion.objects.count() == 3


def test_a_retry_of_a_job_whose_inputs_are_gone_says_so_plainly(core, job_with_lineage, client):
    job, held_out = job_with_lineage["job"], job_with_lineage["held_out"]
    # As a version deleted before versions in use were protected: the spec still names it.
    Job.objects.filter(pk=job.pk).update(eval_dataset_version=None, state=JobState.FAILED)
    gone = held_out.pk
    held_out.delete()
    response = api_client(core["owner"]).post(f"/api/v1/jobs/{job.pk}/retry")
    assert response.status_code == 409
    detail = response.json()["detail"]
    assert detail == (
        f"eval_dataset_version: job #{job.pk} cannot run again: its held-out evaluation dataset version "
        f"(id {gone}) was deleted. Launch a new job with the versions you have now."
    )
    assert Job.objects.count() == 1
    client.force_login(core["owner"])
    page = client.post(f"/jobs/{job.pk}/retry/", follow=True).content.decode()
    assert "cannot run again" in page and "DoesNotExist" not in page


# Health: cheap liveness for anyone, details for staff.


def test_healthz_is_cheap_and_says_nothing_but_ok(client, settings, django_assert_num_queries):
    settings.SANDBOX_BACKEND = "kubernetes"  # no cluster here: the sandbox check would fail, loudly
    with django_assert_num_queries(0):
        response = client.get("/healthz")
    assert response.status_code == 200
    assert response.content == b'{"ok": true}'


def test_the_detailed_health_view_is_for_staff_only(core, client, settings):
    settings.SANDBOX_BACKEND = "kubernetes"
    assert client.get("/healthz/detail").status_code in (401, 403)
    client.force_login(core["owner"])  # a team owner is not an operator
    assert client.get("/healthz/detail").status_code == 403
    client.force_login(User.objects.create_user("operator", is_staff=True))
    response = client.get("/healthz/detail")
    body = response.json()
    assert set(body["checks"]) == {"database", "redis", "workers", "sandbox"}
    assert body["checks"]["database"]["ok"] is True
    assert body["checks"]["sandbox"]["ok"] is False and response.status_code == 503


# Throttling: sign-in and the REST API.


def test_sign_in_is_refused_after_repeated_failures_for_that_username_and_address(core, client, settings):
    settings.LOGIN_MAX_FAILURES = 3
    window_clear(failures_key(username="owner", address="127.0.0.1"))
    for _ in range(3):
        failed = client.post("/login/", {"username": "owner", "password": "wrong"})
        assert failed.status_code == 200 and "_auth_user_id" not in client.session
    locked = client.post("/login/", {"username": "owner", "password": "owner-password"})
    assert locked.status_code == 429 and "_auth_user_id" not in client.session
    page = locked.content.decode()
    assert "Too many failed sign-ins for this username from your address" in page
    assert "ANNEAL_LOGIN_MAX_FAILURES" in page and "try again in 15 minute(s)" in page
    # Another address is not locked out, and the right password works there.
    elsewhere = client.post(
        "/login/", {"username": "owner", "password": "owner-password"}, REMOTE_ADDR="192.0.2.7"
    )
    assert elsewhere.status_code == 302 and client.session["_auth_user_id"] == str(core["owner"].pk)

    entries = AuditEntry.objects.filter(action__startswith="login").order_by("id")
    assert [e.action for e in entries] == ["login.failed"] * 3 + ["login.refused", "login"]
    assert entries[0].detail == {"username": "owner", "address": "127.0.0.1"} and entries[0].user is None
    assert entries[4].user == core["owner"] and entries[4].detail["address"] == "192.0.2.7"
    assert not any("password" in json.dumps(e.detail) for e in entries)


def test_the_admin_sign_in_shares_the_lockout(core, client, settings):
    settings.LOGIN_MAX_FAILURES = 1
    window_clear(failures_key(username="owner", address="127.0.0.1"))
    client.post("/admin/login/", {"username": "owner", "password": "wrong"})
    page = client.post("/admin/login/", {"username": "owner", "password": "owner-password"})
    assert "Too many failed sign-ins" in page.content.decode()


def test_the_api_is_throttled_per_user_and_per_address(core, settings):
    settings.API_RATE_PER_MIN = 3
    expert = api_client(core["expert"])
    assert [expert.get("/api/v1/me").status_code for _ in range(3)] == [200] * 3
    throttled = expert.get("/api/v1/me")
    assert throttled.status_code == 429
    assert (
        "the limit is 3 requests per minute per user (ANNEAL_API_RATE_PER_MIN)" in throttled.json()["detail"]
    )
    assert int(throttled["Retry-After"]) >= 1
    assert api_client(core["owner"]).get("/api/v1/me").status_code == 200  # per user

    # Without a sign-in, the API answers 401 before any work; what is open (the schema) is throttled per address.
    settings.API_ANON_RATE_PER_MIN = 1
    cache.delete("throttle_anon_127.0.0.1")
    assert api_client(None).get("/api/schema/").status_code == 200
    anonymous = api_client(None).get("/api/schema/")
    assert anonymous.status_code == 429
    assert "1 requests per minute per address (ANNEAL_API_ANON_RATE_PER_MIN)" in str(anonymous.data["detail"])


# The audit log: complete for previews, exports and sign-ins (above), and read-only for everyone.


def test_audit_entries_are_read_only_in_the_admin_even_for_a_superuser(core, client):
    audit(team=core["team"], user=core["owner"], action="team.rename", obj=core["team"])
    entry = AuditEntry.objects.get(action="team.rename")
    root = User.objects.create_superuser("root", password="root-password")
    request = RequestFactory().get("/admin/")
    request.user = root
    model_admin = admin.site._registry[AuditEntry]
    assert not model_admin.has_add_permission(request)
    assert not model_admin.has_change_permission(request, entry)
    assert not model_admin.has_delete_permission(request, entry)
    assert "delete_selected" not in model_admin.get_actions(request)

    client.force_login(root)
    assert client.get(f"/admin/accounts/auditentry/{entry.pk}/delete/").status_code == 403
    assert client.post(f"/admin/accounts/auditentry/{entry.pk}/delete/", {"post": "yes"}).status_code == 403
    assert client.post(f"/admin/accounts/auditentry/{entry.pk}/change/", {"action": "x"}).status_code == 403
    assert AuditEntry.objects.filter(pk=entry.pk, action="team.rename").exists()


def test_reading_a_versions_rows_through_the_api_is_audited(core):
    version = dataset_version_create_from_rows(team=core["team"], user=core["owner"], name="sums", rows=ROWS)
    response = api_client(core["viewer"]).get(f"/api/v1/datasets/versions/{version.id}/rows?limit=2")
    assert response.status_code == 200
    [entry] = actions("dataset_version.rows_export")
    assert (entry.user, entry.team, entry.object_id) == (core["viewer"], core["team"], str(version.id))
    assert entry.detail == {"offset": 0, "rows": 2}


# Checkpoints: no server paths on the page or in the API.


def test_checkpoints_show_no_server_path(core, job_with_lineage, client, settings, tmp_path):
    from workers.sink import DjangoCheckpointStore

    job = job_with_lineage["job"]
    model = tmp_path / "model"
    model.mkdir()
    (model / "config.json").write_text("{}")
    where = DjangoCheckpointStore(job=job).save(step=1, local_dir=model)
    assert where == f"job-{job.pk}/step-1"  # what the training events carry: a name in the store
    assert (settings.CHECKPOINT_DIR / where / "config.json").exists()

    secret = str(settings.CHECKPOINT_DIR)
    owner = api_client(core["owner"])
    detail = owner.get(f"/api/v1/jobs/{job.pk}")
    listed = owner.get("/api/v1/checkpoints")
    assert detail.json()["checkpoints"][0]["step"] == 1
    assert "location" not in detail.json()["checkpoints"][0]
    assert secret not in detail.content.decode() and secret not in listed.content.decode()
    client.force_login(core["owner"])
    page = client.get(f"/jobs/{job.pk}/").content.decode()
    assert 'data-step="1"' in page and secret not in page


# Production settings: on whenever DEBUG is off, HSTS and secure cookies where TLS is.


def _settings_under(**env: str) -> dict:
    names = [
        "SESSION_COOKIE_SECURE",
        "CSRF_COOKIE_SECURE",
        "SECURE_HSTS_SECONDS",
        "SECURE_CONTENT_TYPE_NOSNIFF",
        "X_FRAME_OPTIONS",
        "SECURE_PROXY_SSL_HEADER",
        "SESSION_COOKIE_HTTPONLY",
    ]
    code = f"import json; from django.conf import settings as s; print(json.dumps({{n: getattr(s, n) for n in {names}}}))"
    clean = {
        k: v for k, v in os.environ.items() if not k.startswith(("ANNEAL_TLS", "ANNEAL_TRUST", "ANNEAL_HSTS"))
    }
    result = subprocess.run(
        [sys.executable, "manage.py", "shell", "-c", code],
        cwd=ROOT,
        env=clean | {"SECRET_KEY": "x" * 50} | env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout.strip().splitlines()[-1])


def test_production_settings_are_on_when_debug_is_off():
    behind_tls = _settings_under(DEBUG="false", ANNEAL_BASE_URL="https://anneal.example.com")
    assert behind_tls["SESSION_COOKIE_SECURE"] and behind_tls["CSRF_COOKIE_SECURE"]
    assert behind_tls["SECURE_HSTS_SECONDS"] == 31_536_000
    assert behind_tls["SECURE_CONTENT_TYPE_NOSNIFF"] and behind_tls["SESSION_COOKIE_HTTPONLY"]
    assert behind_tls["X_FRAME_OPTIONS"] == "SAMEORIGIN"
    assert behind_tls["SECURE_PROXY_SSL_HEADER"] is None  # trusted only when asked (README)

    proxied = _settings_under(
        DEBUG="false",
        ANNEAL_BASE_URL="http://10.0.0.5:8000",
        ANNEAL_TLS="1",
        ANNEAL_TRUST_X_FORWARDED_PROTO="1",
    )
    assert proxied["SESSION_COOKIE_SECURE"] and proxied["SECURE_HSTS_SECONDS"] > 0
    assert proxied["SECURE_PROXY_SSL_HEADER"] == ["HTTP_X_FORWARDED_PROTO", "https"]

    debugging = _settings_under(DEBUG="true", ANNEAL_BASE_URL="https://anneal.example.com")
    assert not debugging["SESSION_COOKIE_SECURE"] and debugging["SECURE_HSTS_SECONDS"] == 0


def test_hsts_and_nosniff_reach_the_browser(client, settings):
    settings.SECURE_HSTS_SECONDS = 31_536_000
    response = client.get("/login/", secure=True)
    assert response["Strict-Transport-Security"] == "max-age=31536000"
    assert response["X-Content-Type-Options"] == "nosniff"
    assert response["X-Frame-Options"] == "SAMEORIGIN"
