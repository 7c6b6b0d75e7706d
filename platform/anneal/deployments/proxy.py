"""Routing a /v1 request: authenticate the deployment key, check budget and rate limit, pick the least busy
ready replica, forward the request with the replica's credential (a replica answers nothing else), relay the
answer (streams too) and meter the tokens it reports. The replica is called with httpx."""

import itertools
import json
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass

import httpx
from asgiref.sync import sync_to_async
from django.conf import settings
from django.core.cache import cache
from django.http import HttpResponse, JsonResponse, StreamingHttpResponse
from django.urls import reverse

from anneal.deployments.models import Deployment, DeploymentKey, DeploymentState, Replica
from anneal.deployments.openai_shape import CHAT, OpenAIError, error_response
from anneal.deployments.selectors import (
    budget_reached,
    deployments_for_key,
    key_lookup,
    ready_replicas,
    team_budget_cap,
    team_spend_month,
)
from anneal.deployments.services import usage_record

CONNECT_TIMEOUT_S = 5.0
READ_TIMEOUT_S = 300.0

# Requests in flight per replica in this web process: the router sends each request to the least busy.
_in_flight: dict[int, int] = {}
_turn = itertools.count()


# --- admission: key, deployment, budget, rate limit, replica -------------------------------------------


@dataclass
class Admission:
    deployment: Deployment
    key: DeploymentKey | None
    replica: Replica


def bearer(request) -> str:
    header = request.headers.get("Authorization", "")
    scheme, _, raw = header.partition(" ")
    if scheme.lower() != "bearer" or not raw.strip():
        raise OpenAIError(
            401,
            "You didn't provide an API key. Send it as 'Authorization: Bearer sk-anneal-…' "
            "(create one on the deployment's page).",
            code="missing_api_key",
        )
    return raw.strip()


def authenticate(raw: str) -> DeploymentKey:
    key = key_lookup(raw)
    if key is None:
        raise OpenAIError(401, f"Incorrect API key provided: {raw[:14]}…", code="invalid_api_key")
    if not key.is_active:
        raise OpenAIError(401, f"The API key {key.key_hint}… has been revoked.", code="invalid_api_key")
    return key


def find_deployment(key: DeploymentKey, model: str) -> Deployment:
    # No deployment's name holds a NUL, and PostgreSQL cannot even compare one: such a model is not found.
    deployments = deployments_for_key(key).select_related("team")
    deployment = None if "\x00" in model else deployments.filter(name=model).first()
    if deployment is None:
        raise OpenAIError(
            404,
            f"The model `{model}` does not exist or you do not have access to it.",
            param="model",
            code="model_not_found",
        )
    return deployment


def admit(*, deployment: Deployment, key: DeploymentKey | None, limiter: str) -> Admission:
    """Budget, then rate limit, then a ready replica. Sync: the async views call it in a thread."""
    if deployment.state in (DeploymentState.PENDING, DeploymentState.STARTING):
        raise OpenAIError(
            503,
            f"The deployment `{deployment.name}` is {deployment.state}: retry shortly.",
            type="server_error",
            code="model_not_ready",
        )
    if deployment.state != DeploymentState.READY:
        raise OpenAIError(
            404,
            f"The deployment `{deployment.name}` is {deployment.state}: it serves no requests.",
            param="model",
            code="model_not_found",
        )
    cap = team_budget_cap(deployment.team_id)
    if cap is not None:
        spent = team_spend_month(deployment.team_id)
        if budget_reached(spent, cap):
            raise OpenAIError(
                429,
                f"Team '{deployment.team.name}' has spent ${spent:.6f} this month, reaching its budget cap of "
                f"${cap:.6f}: requests are refused until an owner raises the cap (Deployments → Budget, "
                f"{settings.BASE_URL.rstrip('/')}{reverse('deployment-list')}#budget) or the month ends.",
                type="insufficient_quota",
                code="insufficient_quota",
                headers={"x-should-retry": "false"},
            )
    rpm = settings.DEPLOY_RATE_LIMIT_RPM[deployment.tier]
    now = time.time()
    window = f"v1-rpm:{limiter}:{int(now // 60)}"
    cache.add(window, 0, timeout=90)
    count = cache.incr(window)
    if count > rpm:
        retry = max(1, int(60 - now % 60))
        raise OpenAIError(
            429,
            f"Rate limit reached: {rpm} requests per minute for the {deployment.tier} tier. Retry in {retry} s.",
            type="requests",
            code="rate_limit_exceeded",
            headers={"Retry-After": str(retry)},
        )
    replicas = ready_replicas(deployment)
    if not replicas:
        raise OpenAIError(
            503,
            f"No replica of `{deployment.name}` is ready: retry shortly.",
            type="server_error",
            code="no_ready_replica",
        )
    turn = next(_turn)
    replica = min(
        replicas, key=lambda r: (_in_flight.get(r.pk, 0), (replicas.index(r) - turn) % len(replicas))
    )
    return Admission(deployment=deployment, key=key, replica=replica)


def admit_with_key(raw: str, model: str) -> Admission:
    key = authenticate(raw)
    return admit(deployment=find_deployment(key, model), key=key, limiter=f"key-{key.key_hash[:24]}")


# --- forwarding -----------------------------------------------------------------------------------------


def _usage_of(payload: dict) -> tuple[int, int] | None:
    usage = payload.get("usage") if isinstance(payload, dict) else None
    if not isinstance(usage, dict):
        return None
    return int(usage.get("prompt_tokens") or 0), int(usage.get("completion_tokens") or 0)


async def forward(admission: Admission, body: dict, kind: str) -> HttpResponse:
    path = "/v1/chat/completions" if kind == CHAT else "/v1/completions"
    url = admission.replica.base_url + path
    stream = bool(body.get("stream"))
    if stream:
        body = {**body, "stream_options": {**(body.get("stream_options") or {}), "include_usage": True}}
    client = httpx.AsyncClient(timeout=httpx.Timeout(READ_TIMEOUT_S, connect=CONNECT_TIMEOUT_S))
    replica_id = admission.replica.pk
    _in_flight[replica_id] = _in_flight.get(replica_id, 0) + 1
    started = time.monotonic()
    handed_over = False
    try:
        try:
            request = client.build_request("POST", url, json=body, headers=admission.replica.auth_headers)
            upstream = await client.send(request, stream=True)
        except httpx.HTTPError as exc:
            raise OpenAIError(
                503,
                f"The replica of `{admission.deployment.name}` did not answer ({type(exc).__name__}): retry.",
                type="server_error",
                code="replica_unavailable",
            ) from None
        if upstream.status_code != 200:
            content = await upstream.aread()
            await upstream.aclose()
            return _relay_error(upstream.status_code, content)
        if not stream:
            content = await upstream.aread()
            await upstream.aclose()
            try:
                payload = json.loads(content)
            except json.JSONDecodeError:
                raise OpenAIError(
                    502, "The replica sent an unreadable answer.", type="server_error"
                ) from None
            tokens = _usage_of(payload) or (0, 0)
            await _record(admission, kind, False, tokens, started)
            return HttpResponse(content, content_type="application/json")
        handed_over = True
        return StreamingHttpResponse(
            _relay_stream(admission, kind, upstream, client, started),
            content_type="text/event-stream",
            headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"},
        )
    finally:
        if not handed_over:
            _in_flight[replica_id] -= 1
            await client.aclose()


async def _relay_stream(
    admission: Admission, kind: str, upstream: httpx.Response, client: httpx.AsyncClient, started: float
) -> AsyncIterator[bytes]:
    tokens: tuple[int, int] | None = None
    chunks = 0
    buffer = b""
    recorded = False
    try:
        async for raw in upstream.aiter_raw():
            buffer += raw
            while b"\n\n" in buffer:
                event, buffer = buffer.split(b"\n\n", 1)
                for line in event.splitlines():
                    if not line.startswith(b"data:"):
                        continue
                    data = line[5:].strip()
                    if data == b"[DONE]":
                        continue
                    try:
                        payload = json.loads(data)
                    except json.JSONDecodeError:
                        continue
                    chunks += 1
                    tokens = _usage_of(payload) or tokens
            if tokens is not None and not recorded:
                # Metered before the client gets the usage chunk, so its next request (and the budget check)
                # already counts this one.
                recorded = True
                await _record(admission, kind, True, tokens, started)
            yield raw
    finally:
        _in_flight[admission.replica.pk] -= 1
        await upstream.aclose()
        await client.aclose()
        if not recorded:
            # A client that hung up before the usage chunk is billed for what it received: a chunk ~ a token.
            await _record(admission, kind, True, (0, max(0, chunks - 1)), started)


def _relay_error(status: int, content: bytes) -> JsonResponse:
    try:
        payload = json.loads(content)
    except json.JSONDecodeError:
        payload = None
    if isinstance(payload, dict) and isinstance(payload.get("error"), dict) and 400 <= status < 500:
        error = payload["error"]
        return error_response(
            status,
            str(error.get("message") or "The request was refused."),
            type=str(error.get("type") or "invalid_request_error"),
            param=error.get("param"),
            code=error.get("code"),
        )
    detail = content[:300].decode(errors="replace")
    return error_response(502, f"The replica failed with status {status}: {detail}", type="server_error")


async def _record(
    admission: Admission, kind: str, stream: bool, tokens: tuple[int, int], started: float
) -> None:
    await sync_to_async(usage_record)(
        deployment=admission.deployment,
        key=admission.key,
        tier=admission.replica.tier,
        endpoint=kind,
        stream=stream,
        prompt_tokens=tokens[0],
        completion_tokens=tokens[1],
        latency_ms=int((time.monotonic() - started) * 1000),
    )
