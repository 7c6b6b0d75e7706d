"""The batch API under /v1, as OpenAI's: files (purpose batch) and batches, authenticated by deployment keys."""

import json
from pathlib import Path

from django.http import FileResponse, HttpResponse, JsonResponse
from django.views.decorators.csrf import csrf_exempt

from anneal import jsontext
from anneal.deployments.batches import (
    batch_cancel,
    batch_create,
    batch_file_create,
    batch_for_key,
    batch_object,
    file_for_key,
    file_object,
)
from anneal.deployments.models import BatchFile, BatchJob
from anneal.deployments.v1 import OpenAIError, authenticate, bearer, error_response, internal_error


def _key(request):
    return authenticate(bearer(request))


def _openai_view(methods: tuple[str, ...]):
    def wrap(view):
        @csrf_exempt
        def inner(request, *args, **kwargs) -> HttpResponse:
            if request.method not in methods:
                return error_response(
                    405, f"Use {' or '.join(methods)} for {request.path}.", code="method_not_allowed"
                )
            try:
                return view(request, *args, **kwargs)
            except OpenAIError as exc:
                return exc.response()
            except Exception as exc:  # noqa: BLE001 - answered in OpenAI's shape, logged
                return internal_error(exc)

        return inner

    return wrap


@_openai_view(("GET", "POST"))
def files(request) -> HttpResponse:
    key = _key(request)
    if request.method == "GET":
        rows = BatchFile.objects.filter(team_id=key.team_id).order_by("-created_at")[:1000]
        return JsonResponse({"object": "list", "data": [file_object(f) for f in rows]})
    upload = request.FILES.get("file")
    if upload is None:
        raise OpenAIError(400, "Send the file as multipart form data in the field 'file'.", param="file")
    batch_file = batch_file_create(
        key=key, filename=upload.name or "", data=upload.read(), purpose=request.POST.get("purpose", "")
    )
    return JsonResponse(file_object(batch_file))


@_openai_view(("GET",))
def file_detail(request, file_id: str) -> HttpResponse:
    return JsonResponse(file_object(file_for_key(_key(request), file_id)))


@_openai_view(("GET",))
def file_content(request, file_id: str) -> HttpResponse:
    batch_file = file_for_key(_key(request), file_id)
    path = Path(batch_file.path)
    if not path.exists():
        raise OpenAIError(404, f"The content of {file_id} is no longer stored.", code="file_not_found")
    return FileResponse(path.open("rb"), content_type="application/jsonl", filename=batch_file.filename)


@_openai_view(("GET", "POST"))
def batches(request) -> HttpResponse:
    key = _key(request)
    if request.method == "GET":
        rows = BatchJob.objects.filter(team_id=key.team_id).select_related("input_file", "output_file")
        data = [batch_object(b) for b in rows.select_related("error_file")[:100]]
        return JsonResponse({"object": "list", "data": data, "has_more": False})
    try:
        body = jsontext.loads(request.body or b"null")
    except (json.JSONDecodeError, UnicodeDecodeError):
        body = None
    if not isinstance(body, dict):
        raise OpenAIError(400, "The request body must be a JSON object.", code="invalid_json")
    for name in ("input_file_id", "endpoint", "completion_window"):
        if not isinstance(body.get(name), str):
            raise OpenAIError(400, f"'{name}' is required (a string).", param=name)
    batch = batch_create(
        key=key,
        input_file_id=body["input_file_id"],
        endpoint=body["endpoint"],
        completion_window=body["completion_window"],
        metadata=body.get("metadata"),
    )
    return JsonResponse(batch_object(batch))


@_openai_view(("GET",))
def batch_detail(request, batch_id: str) -> HttpResponse:
    return JsonResponse(batch_object(batch_for_key(_key(request), batch_id)))


@_openai_view(("POST",))
def batch_cancel_view(request, batch_id: str) -> HttpResponse:
    return JsonResponse(batch_object(batch_cancel(batch=batch_for_key(_key(request), batch_id))))
