"""The sandbox fleet page: queue depth, per-backend latency and error rates, the team's quota (read-only)."""

import redis
from django.conf import settings
from django.contrib.auth.decorators import login_required
from django.shortcuts import render
from django.views.decorators.http import require_GET

from anneal.accounts.scope import page_team
from sandboxes import fleet


def fleet_redis() -> redis.Redis:
    """The Redis the sandbox hosts account in (the Celery broker and result backend's database)."""
    return redis.Redis.from_url(settings.REDIS_URL, socket_timeout=2, socket_connect_timeout=2)


def quota_team_id(team) -> str:
    """The name a team's sandbox batches carry (SandboxClient(team=...)) and its quota is kept under."""
    return str(team.pk)


@require_GET
@login_required
def sandbox_fleet(request):
    team = page_team(request)
    context = {
        "section": "sandboxes",
        "backend": settings.SANDBOX_BACKEND,
        "execution": settings.SANDBOX_EXECUTION,
    }
    try:
        client = fleet_redis()
        context["snapshot"] = fleet.snapshot(client)
        context["quota"] = {
            "limit": settings.SANDBOX_TEAM_QUOTA,
            "in_flight": fleet.in_flight(client, team=quota_team_id(team)) if team else 0,
            "team": team,
        }
    except redis.RedisError as exc:
        context["error"] = (
            f"the fleet's statistics are unavailable: Redis did not answer ({type(exc).__name__})"
        )
    return render(request, "sandboxes/fleet.html", context)
