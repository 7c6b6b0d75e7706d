"""The launch page: the form, its cost estimate in place (a small fetch; a plain submit without JavaScript),
and the warnings a launch does not stop for (max completion length shorter than the data's answers)."""

from django.contrib.auth.decorators import login_required
from django.db import transaction
from django.http import JsonResponse
from django.shortcuts import redirect, render
from django.template.loader import render_to_string
from django.views.decorators.http import require_http_methods, require_POST

from anneal.datasets.models import DatasetVersion
from anneal.errors import InputError
from anneal.pages import form_show_errors, writable_team
from anneal.training.answer_lengths import FIELD as LENGTH_FIELD
from anneal.training.answer_lengths import answer_length_warnings, spec_warnings
from anneal.training.costs import job_estimate
from anneal.training.forms import SETTINGS, LaunchForm
from anneal.training.services import job_launch


def _checked(form: LaunchForm, *, team, user, estimate: bool) -> tuple[object, dict | None, list[dict]]:
    """Launch the valid ``form`` (or check it as a launch and roll back, for an estimate): (job or None,
    estimate or None, warnings). Service errors land on the form's fields."""
    try:
        with transaction.atomic():
            job = job_launch(team=team, user=user, **form.launch_arguments())
            warnings = spec_warnings(job.spec)
            if not estimate:
                return job, None, warnings
            # Checked exactly as a launch, then rolled back: nothing is kept or queued.
            found = job_estimate(spec=job.spec, team=team)
            transaction.set_rollback(True)
            return None, found, warnings
    except InputError as exc:
        form_show_errors(form, exc, fields=form.service_fields())
        return None, None, _form_warnings(form, team=team)


def _form_warnings(form: LaunchForm, *, team) -> list[dict]:
    """The warnings for what the form holds so far (its initial values when unbound), however incomplete."""
    values = form.cleaned_data if form.is_bound else {}
    first = values.get("dataset_version")
    if not form.is_bound:
        first = DatasetVersion.objects.filter(
            pk=form.initial.get("dataset_version") or 0, dataset__team=team
        ).first()
    if first is None:
        return []
    versions = [first, *[v for v in values.get("extra_dataset_versions") or [] if v.pk != first.pk]]
    model = values.get("p_model") or SETTINGS["model"]["default"]
    length = values.get("p_max_completion_length") or SETTINGS["max_completion_length"]["default"]
    if values.get("p_environment"):
        return []
    return answer_length_warnings(versions=versions, model=model, max_completion_length=length)


def _field_warnings(warnings: list[dict]) -> dict[str, str]:
    """Form field name -> warning text, for the message shown next to the field."""
    names = {LENGTH_FIELD: "p_max_completion_length"}
    return {names.get(w["field"], w["field"]): w["message"] for w in warnings}


def _page(request, form: LaunchForm, *, team, estimate: dict | None, warnings: list[dict]):
    context = {
        "section": "jobs",
        "form": form,
        "team": team,
        "estimate": estimate,
        "warnings": warnings,
        "field_warnings": _field_warnings(warnings),
        "advanced_open": bool(warnings) or _advanced_errors(form),
    }
    return render(request, "training/job_new.html", context)


def _advanced_errors(form: LaunchForm) -> bool:
    """Whether an error sits on a field under Advanced (the section then opens, so it is seen)."""
    if not form.is_bound:
        return False
    shown = {"name", "dataset_version", "verifiers"} | {
        f"p_{name}" for name, _, _ in form.essential_settings()
    }
    return any(name not in shown and not name.startswith(("use_", "weight_")) for name in form.errors)


@require_http_methods(["GET", "POST"])
@login_required
def job_new(request):
    team = writable_team(request)
    if request.method == "GET":
        form = LaunchForm(team=team, initial={"dataset_version": request.GET.get("dataset_version")})
        return _page(request, form, team=team, estimate=None, warnings=_form_warnings(form, team=team))
    form = LaunchForm(request.POST, team=team)
    estimate_only = "estimate" in request.POST
    if not form.is_valid():
        return _page(request, form, team=team, estimate=None, warnings=_form_warnings(form, team=team))
    job, estimate, warnings = _checked(form, team=team, user=request.user, estimate=estimate_only)
    if job is not None:
        return redirect("job-detail", pk=job.pk)
    return _page(request, form, team=team, estimate=estimate, warnings=warnings)


@require_POST
def job_new_estimate(request):
    """The estimate of the form as posted, as JSON for the page's script: the panel's HTML, the warnings by
    field, and whether the form had errors (then the panel lists them, naming each field)."""
    if not request.user.is_authenticated:
        return JsonResponse({"error": "sign in again: your session has ended"}, status=401)
    team = writable_team(request)
    form = LaunchForm(request.POST, team=team)
    estimate, warnings = None, []
    if form.is_valid():
        _, estimate, warnings = _checked(form, team=team, user=request.user, estimate=True)
    else:
        warnings = _form_warnings(form, team=team)
    errors = [
        {"field": name, "label": form.fields[name].label if name in form.fields else "", "message": message}
        for name, messages in form.errors.items()
        for message in messages
    ]
    html = render_to_string(
        "training/launch_estimate.html", {"estimate": estimate, "errors": errors}, request=request
    )
    return JsonResponse(
        {
            "estimate": estimate,
            "errors": errors,
            "warnings": warnings,
            "field_warnings": _field_warnings(warnings),
            "html": html,
        }
    )
