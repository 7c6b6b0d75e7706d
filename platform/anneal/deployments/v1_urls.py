"""Routes of the OpenAI-compatible endpoint, mounted at /v1/ (anneal/urls.py)."""

from django.urls import path, re_path

from anneal.deployments import v1, v1_batch

urlpatterns = [
    path("chat/completions", v1.chat_completions, name="v1-chat-completions"),
    path("completions", v1.completions, name="v1-completions"),
    path("models", v1.models, name="v1-models"),
    path("models/<str:model>", v1.models, name="v1-model"),
    path("files", v1_batch.files, name="v1-files"),
    path("files/<str:file_id>", v1_batch.file_detail, name="v1-file"),
    path("files/<str:file_id>/content", v1_batch.file_content, name="v1-file-content"),
    path("batches", v1_batch.batches, name="v1-batches"),
    path("batches/<str:batch_id>", v1_batch.batch_detail, name="v1-batch"),
    path("batches/<str:batch_id>/cancel", v1_batch.batch_cancel_view, name="v1-batch-cancel"),
    re_path(r"^(?P<rest>.*)$", v1.not_found),
]
