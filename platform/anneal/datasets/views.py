"""Pages: datasets, the upload form and the upload's progress."""

import json

from django.contrib.auth.decorators import login_required
from django.shortcuts import redirect, render
from django.views.decorators.http import require_GET, require_http_methods

from anneal.accounts.scope import page_team
from anneal.accounts.selectors import can_write
from anneal.datasets.forms import UploadForm
from anneal.datasets.ingest import read_rows
from anneal.datasets.models import Dataset, DatasetUpload, DatasetVersion, UploadState
from anneal.datasets.services import dataset_upload_create
from anneal.errors import InputError
from anneal.pages import form_show_errors, get_visible_or_404, writable_team
from anneal.training.models import Job

PREVIEW_ROWS = 5


@require_GET
@login_required
def dataset_list(request):
    team = page_team(request)
    datasets = (
        Dataset.objects.filter(team=team).prefetch_related("versions") if team else Dataset.objects.none()
    )
    uploads = DatasetUpload.objects.filter(team=team)[:10] if team else []
    context = {
        "section": "datasets",
        "datasets": datasets,
        "uploads": uploads,
        "can_write": team is not None and can_write(request.user, team),
    }
    return render(request, "datasets/list.html", context)


@require_http_methods(["GET", "POST"])
@login_required
def dataset_upload(request):
    team = writable_team(request)
    form = UploadForm(initial={"name": request.GET.get("name", "")})
    if request.method == "POST":
        form = UploadForm(request.POST, request.FILES)
        if form.is_valid():
            try:
                upload = dataset_upload_create(
                    team=team,
                    user=request.user,
                    name=form.cleaned_data["name"],
                    uploaded_file=form.cleaned_data["file"],
                    mapping=form.mapping(),
                )
            except InputError as exc:
                form_show_errors(form, exc, fields=UploadForm.SERVICE_FIELDS)
            else:
                return redirect("upload-detail", pk=upload.pk)
    return render(request, "datasets/upload.html", {"section": "datasets", "form": form, "team": team})


@require_GET
@login_required
def upload_detail(request, pk: int):
    upload = get_visible_or_404(request, DatasetUpload.objects.all(), pk)
    version = (
        DatasetVersion.objects.filter(source_upload=upload).select_related("dataset").first()
        if upload.state == UploadState.READY
        else None
    )
    context = {
        "section": "datasets",
        "upload": upload,
        "version": version,
        "finished": upload.state in (UploadState.READY, UploadState.FAILED),
        "hidden_errors": max(0, upload.error_count - len(upload.errors)),
        "can_write": can_write(request.user, upload.team),
    }
    return render(request, "datasets/upload_detail.html", context)


@require_GET
@login_required
def dataset_detail(request, pk: int):
    dataset = get_visible_or_404(request, Dataset.objects.all(), pk)
    versions = list(dataset.versions.select_related("source_upload").order_by("-number"))
    latest = versions[0] if versions else None
    # The prompt first, then the answer: what a reader looks for; the other columns after, as stored.
    stored = list(latest.columns) if latest else []
    columns = [c for c in ("prompt", "answer") if c in stored] + [
        c for c in stored if c not in ("prompt", "answer")
    ]
    try:
        rows = read_rows(latest.rows_path, limit=PREVIEW_ROWS) if latest else []
        preview = [[_cell(row.get(column)) for column in columns] for row in rows]
    except OSError:
        # The frozen file went missing (storage moved): the page still shows what the database knows.
        preview = None
    context = {
        "section": "datasets",
        "dataset": dataset,
        "versions": versions,
        "latest": latest,
        "preview": preview,
        "preview_columns": columns,
        "jobs": Job.objects.filter(dataset_version__dataset=dataset).select_related("dataset_version")[:10],
        "can_write": can_write(request.user, dataset.team),
    }
    return render(request, "datasets/detail.html", context)


def _cell(value: object) -> str:
    if value is None:
        return ""
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
