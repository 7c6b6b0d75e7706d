"""Pages: datasets, the upload form, the upload's mapping / progress / review, splits, packs."""

import json

from django.conf import settings
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import JsonResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from anneal.accounts.scope import page_team
from anneal.accounts.selectors import can_write
from anneal.datasets.forms import MappingForm, PackForm, SplitForm, UploadForm
from anneal.datasets.length_page import length_context
from anneal.datasets.models import Dataset, DatasetUpload, DatasetVersion, UploadState
from anneal.datasets.pack_catalogue import offered_tasks
from anneal.datasets.pack_services import domain_pack_create
from anneal.datasets.selectors import upload_preview
from anneal.datasets.services import (
    FileTooLarge,
    dataset_delete,
    dataset_upload_accept,
    dataset_upload_create,
    dataset_upload_map,
    dataset_upload_reject,
    dataset_version_delete,
)
from anneal.datasets.splits import dataset_version_split
from anneal.datasets.storage import read_rows
from anneal.errors import InputError
from anneal.pages import check_write, form_show_errors, get_visible_or_404, writable_team
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


def _wants_json(request) -> bool:
    return request.headers.get("X-Requested-With") == "XMLHttpRequest"


@require_http_methods(["GET", "POST"])
@login_required
def dataset_upload(request):
    team = writable_team(request)
    form = UploadForm(initial={"name": request.GET.get("name", "")})
    too_large = False
    if request.method == "POST":
        # A body over the limit never gets here: anneal.request_limits refused it while it streamed in.
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
                too_large = isinstance(exc, FileTooLarge)
            else:
                messages.success(
                    request,
                    f"Uploaded {form.cleaned_data['file'].name}: its rows are being read and checked here.",
                )
                url = reverse("upload-detail", args=[upload.pk])
                return JsonResponse({"redirect": url}) if _wants_json(request) else redirect(url)
        if _wants_json(request):
            # The browser's XHR upload shows these next to the fields, as the plain form would.
            return JsonResponse(
                {"errors": {k: [str(m) for m in v] for k, v in form.errors.items()}},
                status=413 if too_large else 400,
            )
    context = {
        "section": "datasets",
        "form": form,
        "team": team,
        "max_mb": settings.UPLOAD_MAX_BYTES // 2**20,
    }
    return render(request, "datasets/upload.html", context, status=413 if too_large else 200)


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
        "finished": upload.state not in (UploadState.PENDING, UploadState.PROCESSING),
        "hidden_errors": max(0, upload.error_count - len(upload.errors)),
        "can_write": can_write(request.user, upload.team),
        "percent": round(upload.progress * 100),
    }
    preview = upload_preview(upload=upload) if upload.state == UploadState.MAPPING else None
    if upload.state == UploadState.MAPPING and preview is None:
        context["finished"] = False  # the worker is still reading the first rows: the page polls
    elif preview is not None:
        context["preview"] = preview
        context["preview_table"] = [[_cell(row.get(c)) for c in preview.columns] for row in preview.rows]
        context["mapping_form"] = MappingForm(columns=preview.columns)
    return render(request, "datasets/upload_detail.html", context)


@require_POST
@login_required
def upload_map(request, pk: int):
    upload = get_visible_or_404(request, DatasetUpload.objects.all(), pk)
    check_write(request, upload.team)
    preview = upload_preview(upload=upload)
    if preview is None:
        messages.error(
            request, "The first rows of the file are still being read: choose the columns once shown."
        )
        return redirect("upload-detail", pk=upload.pk)
    form = MappingForm(request.POST, columns=preview.columns)
    if form.is_valid():
        try:
            dataset_upload_map(
                upload=upload,
                user=request.user,
                mapping=form.mapping(),
                tokenizer=form.cleaned_data["tokenizer"],
            )
        except InputError as exc:
            form_show_errors(form, exc, fields=MappingForm.SERVICE_FIELDS)
        else:
            messages.success(request, "Columns saved: every row is being checked against them.")
            return redirect("upload-detail", pk=upload.pk)
    context = {
        "section": "datasets",
        "upload": upload,
        "finished": True,
        "can_write": True,
        "preview": preview,
        "preview_table": [[_cell(row.get(c)) for c in preview.columns] for row in preview.rows],
        "mapping_form": form,
    }
    return render(request, "datasets/upload_detail.html", context, status=400)


@require_POST
@login_required
def upload_accept(request, pk: int):
    upload = get_visible_or_404(request, DatasetUpload.objects.all(), pk)
    check_write(request, upload.team)
    try:
        version = dataset_upload_accept(upload=upload, user=request.user)
    except InputError as exc:
        messages.error(request, str(exc))
        return redirect("upload-detail", pk=upload.pk)
    messages.success(request, f"Accepted: {version} holds {version.row_count} rows.")
    return redirect("dataset-detail", pk=version.dataset_id)


@require_POST
@login_required
def upload_reject(request, pk: int):
    upload = get_visible_or_404(request, DatasetUpload.objects.all(), pk)
    check_write(request, upload.team)
    try:
        dataset_upload_reject(upload=upload, user=request.user)
    except InputError as exc:
        messages.error(request, str(exc))
    return redirect("upload-detail", pk=upload.pk)


@require_GET
@login_required
def dataset_detail(request, pk: int):
    dataset = get_visible_or_404(request, Dataset.objects.all(), pk)
    versions = list(dataset.versions.select_related("source_upload").order_by("-number"))
    chosen = versions[0] if versions else None
    if request.GET.get("version", "").isdigit():
        chosen = next((v for v in versions if v.number == int(request.GET["version"])), chosen)
    return render(
        request, "datasets/detail.html", _detail_context(request, dataset, versions, chosen, SplitForm())
    )


def _detail_context(request, dataset, versions, chosen, split_form) -> dict:
    # The prompt first, then the answer: what a reader looks for; the other columns after, as stored.
    stored = list(chosen.columns) if chosen else []
    columns = [c for c in ("prompt", "answer") if c in stored] + [
        c for c in stored if c not in ("prompt", "answer")
    ]
    try:
        rows = read_rows(chosen.rows_path, limit=PREVIEW_ROWS) if chosen else []
        preview = [[_cell(row.get(column)) for column in columns] for row in rows]
    except OSError:
        # The frozen file went missing (storage moved): the page still shows what the database knows.
        preview = None
    used = set(
        Job.objects.filter(dataset_version__dataset=dataset).values_list("dataset_version_id", flat=True)
    )
    return {
        "section": "datasets",
        "dataset": dataset,
        "versions": versions,
        "latest": chosen,
        "used_versions": used,
        "preview": preview,
        "preview_columns": columns,
        "split_form": split_form,
        "jobs": Job.objects.filter(dataset_version__dataset=dataset).select_related("dataset_version")[:10],
        "can_write": can_write(request.user, dataset.team),
        **(
            length_context(request, dataset=dataset, version=chosen) if chosen and preview is not None else {}
        ),
    }


@require_POST
@login_required
def version_split(request, pk: int):
    version = get_visible_or_404(request, DatasetVersion.objects.all(), pk, team_path="dataset__team")
    check_write(request, version.dataset.team)
    form = SplitForm(request.POST)
    if form.is_valid():
        try:
            train, held_out = dataset_version_split(version=version, user=request.user, **form.params())
        except InputError as exc:
            form_show_errors(form, exc)
        else:
            messages.success(
                request,
                f"Split {version}: train {train} ({train.row_count} rows), "
                f"eval {held_out} ({held_out.row_count} rows).",
            )
            return redirect("dataset-detail", pk=version.dataset_id)
    dataset = version.dataset
    versions = list(dataset.versions.select_related("source_upload").order_by("-number"))
    context = _detail_context(request, dataset, versions, version, form)
    return render(request, "datasets/detail.html", context, status=400)


@require_POST
@login_required
def version_delete(request, pk: int):
    version = get_visible_or_404(request, DatasetVersion.objects.all(), pk, team_path="dataset__team")
    check_write(request, version.dataset.team)
    dataset_id = version.dataset_id
    try:
        dataset_version_delete(version=version, user=request.user)
    except InputError as exc:
        messages.error(request, str(exc))
    else:
        messages.success(request, f"Deleted {version}.")
    return redirect("dataset-detail", pk=dataset_id)


@require_POST
@login_required
def dataset_delete_view(request, pk: int):
    dataset = get_visible_or_404(request, Dataset.objects.all(), pk)
    check_write(request, dataset.team)
    try:
        dataset_delete(dataset=dataset, user=request.user)
    except InputError as exc:
        messages.error(request, str(exc))
        return redirect("dataset-detail", pk=dataset.pk)
    messages.success(request, f"Deleted dataset {dataset.name}.")
    return redirect("dataset-list")


@require_http_methods(["GET", "POST"])
@login_required
def pack_new(request):
    team = writable_team(request)
    offered = offered_tasks()
    names = [check.task for check in offered]
    form = PackForm(tasks=names, initial={"name": "reasoning-gym"})
    if request.method == "POST":
        form = PackForm(request.POST, tasks=names)
        if form.is_valid():
            try:
                result = domain_pack_create(team=team, user=request.user, **form.cleaned_data)
            except InputError as exc:
                form_show_errors(form, exc)
            else:
                messages.success(
                    request,
                    f"Made {result.version} ({result.version.row_count} rows) and "
                    f"{len(result.verifiers)} verifier{'s' if len(result.verifiers) != 1 else ''}.",
                )
                return redirect("dataset-detail", pk=result.version.dataset_id)
    context = {"section": "datasets", "form": form, "offered": offered, "team": team}
    return render(request, "datasets/pack_new.html", context)


def _cell(value: object) -> str:
    if value is None:
        return ""
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
