"""The batch API under /v1, as OpenAI's: files (purpose batch) and batches, authenticated by deployment keys.
A key bound to one deployment sees only that deployment's batches and files (batches.files_for_key)."""

import json
from pathlib import Path

from django.conf import settings
from django.core.files.uploadhandler import FileUploadHandler, StopUpload
from django.http import FileResponse, HttpResponse, JsonResponse
from django.views.decorators.csrf import csrf_exempt

from anneal import jsontext
from anneal.deployments.batches import (
    batch_cancel,
    batch_create,
    batch_file_create,
    batch_for_key,
    batch_object,
    batches_for_key,
    file_for_key,
    file_object,
    file_too_large,
    files_for_key,
)
from anneal.deployments.openai_shape import OpenAIError, error_response, internal_error
from anneal.deployments.proxy import authenticate, bearer

# The multipart framing and the form's other field (purpose) beside the file.
FORM_ROOM = 64 * 1024


def _key(request):
    return authenticate(bearer(request))


class UploadTooLarge(Exception):
    pass


class UploadSizeLimit(FileUploadHandler):
    """First of the request's upload handlers: refuses a body announced past the limit before reading any of
    it, and counts each file's bytes as the multipart body is parsed, stopping at the limit, so an over-size
    file is never read to its end (into memory or a temporary file). ``too_large`` tells the view."""

    def __init__(self, request=None, *, max_bytes: int) -> None:
        super().__init__(request)
        self.max_bytes = max_bytes
        self.size = 0
        self.too_large = False

    def handle_raw_input(self, input_data, META, content_length, boundary, encoding=None):  # noqa: N803
        if content_length > self.max_bytes + FORM_ROOM:
            raise UploadTooLarge  # nothing read or opened yet
        return None

    def new_file(self, *args, **kwargs) -> None:
        super().new_file(*args, **kwargs)
        self.size = 0

    def receive_data_chunk(self, raw_data: bytes, start: int) -> bytes:
        self.size += len(raw_data)
        if self.size > self.max_bytes:
            self.too_large = True
            # Django closes what the handlers kept so far and reads no further.
            raise StopUpload(connection_reset=True)
        return raw_data  # the next handler (memory, or a temporary file past 2.5 MB) keeps it

    def file_complete(self, file_size: int) -> None:
        return None


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
        rows = files_for_key(key).order_by("-created_at")[:1000]
        return JsonResponse({"object": "list", "data": [file_object(f) for f in rows]})
    limit = UploadSizeLimit(request, max_bytes=settings.UPLOAD_MAX_BYTES)
    request.upload_handlers.insert(0, limit)
    try:
        upload = request.FILES.get("file")
    except UploadTooLarge:
        limit.too_large = True
    if limit.too_large:
        raise file_too_large()
    if upload is None:
        raise OpenAIError(400, "Send the file as multipart form data in the field 'file'.", param="file")
    with upload:
        batch_file = batch_file_create(
            key=key, filename=upload.name or "", source=upload, purpose=request.POST.get("purpose", "")
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
        rows = batches_for_key(key).select_related("input_file", "output_file")
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
