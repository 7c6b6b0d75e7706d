"""The OpenAI-compatible /v1 endpoint's views (async, on Daphne): chat completions and completions go through
the proxy (anneal.deployments.proxy), models lists a key's deployments, and every failure answers in OpenAI's
error shape (anneal.deployments.openai_shape)."""

from asgiref.sync import sync_to_async
from django.http import HttpResponse, JsonResponse
from django.views.decorators.csrf import csrf_exempt

from anneal.deployments.models import Deployment, DeploymentState
from anneal.deployments.openai_shape import (
    CHAT,
    COMPLETIONS,
    OpenAIError,
    check_request,
    error_response,
    internal_error,
    parse_body,
)
from anneal.deployments.proxy import admit_with_key, authenticate, bearer, find_deployment, forward
from anneal.deployments.selectors import deployments_for_key


async def _proxy(request, kind: str) -> HttpResponse:
    if request.method != "POST":
        return error_response(405, f"Use POST for /v1/{kind.replace('.', '/')}.", code="method_not_allowed")
    try:
        raw = bearer(request)
        body = parse_body(request)
        check_request(body, kind)
        admission = await sync_to_async(admit_with_key)(raw, body["model"])
        return await forward(admission, body, kind)
    except OpenAIError as exc:
        return exc.response()
    except Exception as exc:  # noqa: BLE001 - answered in OpenAI's shape, logged
        return internal_error(exc)


@csrf_exempt
async def chat_completions(request) -> HttpResponse:
    return await _proxy(request, CHAT)


@csrf_exempt
async def completions(request) -> HttpResponse:
    return await _proxy(request, COMPLETIONS)


def _model_object(deployment: Deployment) -> dict:
    return {
        "id": deployment.name,
        "object": "model",
        "created": int(deployment.created_at.timestamp()),
        "owned_by": deployment.team.name,
        "tier": deployment.tier,
    }


def _models(raw: str, model: str | None) -> dict:
    key = authenticate(raw)
    if model is not None:
        return _model_object(find_deployment(key, model))
    deployments = deployments_for_key(key).select_related("team").filter(state=DeploymentState.READY)
    return {"object": "list", "data": [_model_object(d) for d in deployments.order_by("name")]}


@csrf_exempt
async def models(request, model: str | None = None) -> HttpResponse:
    if request.method != "GET":
        return error_response(405, "Use GET for /v1/models.", code="method_not_allowed")
    try:
        return JsonResponse(await sync_to_async(_models)(bearer(request), model))
    except OpenAIError as exc:
        return exc.response()
    except Exception as exc:  # noqa: BLE001 - answered in OpenAI's shape, logged
        return internal_error(exc)


@csrf_exempt
def not_found(request, rest: str = "") -> JsonResponse:
    return error_response(
        404,
        f"Invalid URL ({request.method} {request.path}): this endpoint does not exist.",
        code="unknown_url",
    )
