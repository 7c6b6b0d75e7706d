"""Pages: verifiers, the form builder that writes their spec (with a live preview), versions, clone, delete."""

import json

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.shortcuts import redirect, render
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from anneal.accounts.outbound_hosts import team_secret_names
from anneal.accounts.scope import page_team
from anneal.accounts.selectors import can_write
from anneal.datasets.models import DatasetVersion
from anneal.errors import InputError
from anneal.pages import check_write, get_visible_or_404, writable_team
from anneal.training.models import JobVerifier
from anneal.verifiers.builder import builder_sections
from anneal.verifiers.forms import VerifierForm
from anneal.verifiers.models import Verifier
from anneal.verifiers.selectors import verifier_type_catalogue, verifier_version_diff
from anneal.verifiers.services import (
    verifier_clone,
    verifier_create,
    verifier_delete,
    verifier_test_cases_run,
    verifier_version_create,
)


@require_GET
@login_required
def verifier_list(request):
    team = page_team(request)
    verifiers = (
        Verifier.objects.filter(team=team).prefetch_related("versions") if team else Verifier.objects.none()
    )
    context = {
        "section": "verifiers",
        "verifiers": verifiers,
        "can_write": team is not None and can_write(request.user, team),
    }
    return render(request, "verifiers/list.html", context)


def _suggestions(team) -> dict[str, list[str]]:
    """What a model judge may name in this team: its secrets (names only) and its deployments."""
    from anneal.deployments.models import Deployment

    if team is None:
        return {}
    return {
        "api_key_secret": team_secret_names(team),
        "deployment": list(Deployment.objects.filter(team=team).values_list("name", flat=True)),
    }


def _builder_context(*, request, team, form: VerifierForm, spec: dict | None, verifier=None) -> dict:
    chosen = (form.data.get("type") if form.is_bound else None) or (spec or {}).get("type") or "exact_match"
    versions = (
        DatasetVersion.objects.filter(dataset__team=team)
        .select_related("dataset")
        .order_by("dataset__name", "-number")
    )
    shown = list(versions[:50])
    newest = max(shown, key=lambda v: v.created_at, default=None)
    return {
        "section": "verifiers",
        "form": form,
        "team": team,
        "verifier": verifier,
        # The newest dataset's columns are offered first: the one just uploaded is the one to check.
        "columns_version": newest,
        "dataset_columns": {str(v.pk): v.columns for v in shown},
        "chosen_type": chosen,
        "sections": builder_sections(
            chosen=chosen, spec=spec, errors=form.spec_errors, suggestions=_suggestions(team)
        ),
        "spec_preview": json.dumps(spec or {"type": chosen}, indent=2),
        "catalogue": verifier_type_catalogue(),
        "dataset_versions": shown,
    }


def _save(request, form: VerifierForm, save) -> tuple[object | None, dict | None]:
    """Run `save(spec)` on a valid form; on an InputError show it inline. Returns (saved, the spec tried)."""
    if not form.is_valid():
        return None, None
    spec = None
    try:
        spec = form.built_spec()
        return save(spec), spec
    except InputError as exc:
        form.show_spec_errors(exc)
        return None, spec


@require_http_methods(["GET", "POST"])
@login_required
def verifier_new(request):
    team = writable_team(request)
    form = VerifierForm(request.POST or None)
    spec = None
    if request.method == "POST":
        verifier, spec = _save(
            request,
            form,
            lambda spec: verifier_create(
                team=team, user=request.user, name=form.cleaned_data["name"], spec=spec
            ),
        )
        if verifier is not None:
            messages.success(request, f"Created verifier '{verifier.name}' (version 1).")
            return redirect("verifier-detail", pk=verifier.pk)
    return render(
        request, "verifiers/form.html", _builder_context(request=request, team=team, form=form, spec=spec)
    )


@require_http_methods(["GET", "POST"])
@login_required
def verifier_edit(request, pk: int):
    """A new version of the verifier: the builder filled with the latest spec."""
    verifier = get_visible_or_404(request, Verifier.objects.all(), pk)
    check_write(request, verifier.team)
    latest = verifier.latest_version
    spec = latest.spec if latest else None
    data = request.POST.copy() if request.method == "POST" else None
    form = VerifierForm(
        data, name_required=False, initial={"name": verifier.name, "type": (spec or {}).get("type")}
    )
    if request.method == "POST":
        version, tried = _save(
            request,
            form,
            lambda spec: verifier_version_create(verifier=verifier, user=request.user, spec=spec),
        )
        if version is not None:
            messages.success(request, f"Saved version {version.number}.")
            return redirect("verifier-detail", pk=verifier.pk)
        spec = tried or spec
    context = _builder_context(request=request, team=verifier.team, form=form, spec=spec, verifier=verifier)
    return render(request, "verifiers/form.html", context)


@require_GET
@login_required
def verifier_detail(request, pk: int):
    verifier = get_visible_or_404(request, Verifier.objects.all(), pk)
    versions = [
        {
            "version": version,
            "spec_json": json.dumps(version.spec, indent=2),
            "diff": verifier_version_diff(version=version),
        }
        for version in verifier.versions.select_related("created_by").order_by("-number")
    ]
    uses = (
        JobVerifier.objects.filter(verifier_version__verifier=verifier)
        .select_related("job", "verifier_version")
        .order_by("-job__created_at")
    )
    context = {
        "section": "verifiers",
        "verifier": verifier,
        "latest": versions[0]["version"] if versions else None,
        "versions": versions,
        "uses": uses[:10],
        "in_use": uses.exists(),
        "can_write": can_write(request.user, verifier.team),
        # Flagged rollouts kept as test cases, each scored by the latest version.
        "test_cases": verifier_test_cases_run(version=versions[0]["version"]) if versions else [],
    }
    return render(request, "verifiers/detail.html", context)


@require_POST
@login_required
def verifier_clone_page(request, pk: int):
    verifier = get_visible_or_404(request, Verifier.objects.all(), pk)
    check_write(request, verifier.team)
    name = (request.POST.get("name") or "").strip() or f"{verifier.name} (copy)"
    try:
        clone = verifier_clone(verifier=verifier, user=request.user, name=name)
    except InputError as exc:
        messages.error(request, str(exc))
        return redirect("verifier-detail", pk=verifier.pk)
    messages.success(request, f"Cloned from '{verifier.name}'.")
    return redirect("verifier-detail", pk=clone.pk)


@require_POST
@login_required
def verifier_delete_page(request, pk: int):
    verifier = get_visible_or_404(request, Verifier.objects.all(), pk)
    check_write(request, verifier.team)
    try:
        verifier_delete(verifier=verifier, user=request.user)
    except InputError as exc:
        messages.error(request, str(exc))
        return redirect("verifier-detail", pk=verifier.pk)
    messages.success(request, f"Deleted '{verifier.name}'.")
    return redirect("verifier-list")
