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
