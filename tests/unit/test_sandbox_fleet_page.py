"""The sandbox fleet page and the fleet figures in the staff health view (/healthz/detail)."""

import uuid

import pytest
from django.contrib.auth.models import User
from django.urls import reverse

from anneal.sandboxes_view import fleet_redis, quota_team_id
from sandboxes import fleet

pytestmark = pytest.mark.django_db


@pytest.fixture
def owner(world):
    return world["owner"], world["core"]


def test_the_page_shows_backends_queue_and_the_teams_quota(client, owner, settings):
    user, team = owner
    settings.SANDBOX_TEAM_QUOTA = 7
    store = fleet_redis()
    backend = f"bwrap-page-{uuid.uuid4().hex[:6]}"
    fleet.record(store, backend=backend, results=[{"status": "ok", "duration_s": 0.004}] * 3)
    leases = fleet.try_acquire(store, team=quota_team_id(team), runs=2, quota=7)
    try:
        client.force_login(user)
        page = client.get(reverse("sandbox-fleet")).content.decode()
    finally:
        leases.release()
    assert "2 of 7 concurrent sandbox runs in use by Core" in page
    assert backend in page
    assert "4.0 ms" in page
    assert 'id="queue-depth"' in page


def test_the_page_needs_a_login(client):
    response = client.get(reverse("sandbox-fleet"))
    assert response.status_code == 302


def test_the_staff_health_view_carries_the_fleet_figures(client):
    store = fleet_redis()
    fleet.record(store, backend="bwrap", results=[{"status": "ok", "duration_s": 0.003}])
    client.force_login(User.objects.create_user("fleet-operator", password="x", is_staff=True))
    body = client.get("/healthz/detail").json()
    check = body["checks"]["sandbox"]
    assert check["ok"] is True, check
    figures = check["detail"]["fleet"]
    assert "queue_depth" in figures
    assert figures["backends"]["bwrap"]["p50_ms"] is not None


def test_local_runs_count_beside_the_hosts_runs(client, owner, settings):
    """SANDBOX_EXECUTION=local runs a batch in the caller's process: it is counted too, apart from a host's."""
    from sandboxes.client import SandboxClient
    from sandboxes.types import RunRequest

    user, _ = owner
    backend = "bwrap"
    store = fleet_redis()
    before = fleet.snapshot(store)["backends"].get(backend, {"local_runs": 0, "remote_runs": 0})
    sandbox = SandboxClient(mode="local", backend=backend, result_backend_url=settings.REDIS_URL)
    results = sandbox.run_many(
        [RunRequest(language="python", code="print(1)"), RunRequest(language="python", code="print(2)")]
    )
    assert [r.stdout.strip() for r in results] == ["1", "2"]
    fleet.record(store, backend=backend, results=[{"status": "ok", "duration_s": 0.002}])  # a host's batch
    after = fleet.snapshot(store)["backends"][backend]
    assert after["local_runs"] - before["local_runs"] == 2
    assert after["remote_runs"] - before["remote_runs"] == 1
    client.force_login(user)
    page = client.get(reverse("sandbox-fleet")).content.decode()
    assert f'<td class="local-runs">{after["local_runs"]}</td>' in page


def test_the_page_lists_the_hosts_with_their_profiles(client, owner, settings):
    from sandboxes.client import SandboxClient
    from sandboxes.types import RunRequest

    user, _ = owner
    SandboxClient(mode="local", backend="bwrap", result_backend_url=settings.REDIS_URL).run_many(
        [RunRequest(language="python", code="print(1)", profile="javascript")]
    )
    client.force_login(user)
    page = client.get(reverse("sandbox-fleet")).content.decode()
    hosts = page.split('id="fleet-hosts"', 1)[1].split("</table>", 1)[0]
    assert "in a job&#x27;s or page&#x27;s process" in hosts or "in a job's or page's process" in hosts
    assert '<span class="tag">c-cpp</span> <span class="tag">javascript</span>' in hosts
    assert "javascript " in page.split("Runs by profile on bwrap:", 1)[1].split(".", 1)[0]
