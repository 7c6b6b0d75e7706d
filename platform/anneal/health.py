"""Health. GET /healthz: liveness, for load balancers and orchestrators: no sign-in, cheap (it touches
nothing: no database, no sandbox, no broker), and it says nothing but {"ok": true}.

GET /healthz/detail, for staff only (a session or a staff user's API token): database, Redis, Celery workers
per queue and the sandbox backend, each with a status; the sandbox check carries the fleet's figures too
(queue depth, p50/p99 latency and error rates per backend). 200 when all are ok, 503 otherwise.
"""

import time

import redis
from django.conf import settings
from django.db import connection
from django.http import JsonResponse
from drf_spectacular.utils import extend_schema
from rest_framework.permissions import IsAdminUser
from rest_framework.response import Response
from rest_framework.views import APIView

from anneal.tasks import app

QUEUES = ("default", "gpu", "sandbox")


def _check(fn) -> dict:
    started = time.perf_counter()
    try:
        detail = fn()
        ok = True
    except Exception as exc:  # a health page reports every failure rather than raising
        detail, ok = f"{type(exc).__name__}: {exc}", False
    return {"ok": ok, "detail": detail, "ms": round((time.perf_counter() - started) * 1000, 1)}


def _database() -> str:
    with connection.cursor() as cursor:
        cursor.execute("SELECT 1")
    return connection.vendor


def _redis() -> str:
    client = redis.Redis.from_url(settings.REDIS_URL, socket_timeout=2, socket_connect_timeout=2)
    client.ping()
    return "pong"


def _workers() -> dict:
    replies = app.control.inspect(timeout=1.0).active_queues() or {}
    serving = {queue["name"] for queues in replies.values() for queue in queues}
    missing = [q for q in QUEUES if q not in serving]
    if missing:
        raise RuntimeError(
            f"no worker consumes queue(s) {', '.join(missing)}; workers seen: {sorted(replies)}"
        )
    return {"workers": sorted(replies), "queues": sorted(serving)}


def _sandbox() -> dict:
    from sandboxes.registry import get_backend

    health = get_backend(settings.SANDBOX_BACKEND).health()
    if not health.get("ok"):
        raise RuntimeError(health.get("detail", "sandbox backend unhealthy"))
    return {**health, "fleet": _sandbox_fleet()}


def _sandbox_fleet() -> dict:
    """Queue depth, p50/p99 latency and error rates per backend, as the sandbox hosts recorded them.

    Figures only: Redis failing here is already the "redis" check's failure, so it is reported, not raised.
    """
    from anneal.sandboxes_view import fleet_redis
    from sandboxes import fleet

    try:
        return fleet.snapshot(fleet_redis())
    except Exception as exc:  # noqa: BLE001 - a health page reports every failure rather than raising
        return {"error": f"{type(exc).__name__}: {exc}"}


def healthz(request) -> JsonResponse:
    # Anyone may call this, often: it must stay free of work and of detail.
    return JsonResponse({"ok": True})


class HealthDetailApi(APIView):
    permission_classes = [IsAdminUser]

    @extend_schema(exclude=True)
    def get(self, request):
        checks = {
            "database": _check(_database),
            "redis": _check(_redis),
            "workers": _check(_workers),
            "sandbox": _check(_sandbox),
        }
        ok = all(c["ok"] for c in checks.values())
        return Response({"ok": ok, "checks": checks}, status=200 if ok else 503)
