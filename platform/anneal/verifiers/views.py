"""Pages: verifiers, the form builder that writes their spec, and their versions."""

import json

from django.contrib.auth.decorators import login_required
from django.shortcuts import redirect, render
from django.views.decorators.http import require_GET, require_http_methods

from anneal.accounts.scope import page_team
from anneal.accounts.selectors import can_write
from anneal.errors import InputError
from anneal.pages import form_show_errors, get_visible_or_404, writable_team
from anneal.training.models import JobVerifier
from anneal.verifiers.forms import VerifierForm
from anneal.verifiers.models import Verifier
from anneal.verifiers.services import verifier_create


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


@require_http_methods(["GET", "POST"])
@login_required
def verifier_new(request):
    team = writable_team(request)
    form = VerifierForm()
    if request.method == "POST":
        form = VerifierForm(request.POST)
        if form.is_valid():
            try:
                verifier = verifier_create(
                    team=team, user=request.user, name=form.cleaned_data["name"], spec=form.spec()
                )
            except InputError as exc:
                form_show_errors(form, exc, fields=form.service_fields())
            else:
                return redirect("verifier-detail", pk=verifier.pk)
    context = {
        "section": "verifiers",
        "form": form,
        "team": team,
        "spec_preview": json.dumps(form.preview(), indent=2),
        "type_fields": VerifierForm.TYPE_FIELDS,
    }
    return render(request, "verifiers/form.html", context)


@require_GET
@login_required
def verifier_detail(request, pk: int):
    verifier = get_visible_or_404(request, Verifier.objects.all(), pk)
    versions = [
        {"version": version, "spec_json": json.dumps(version.spec, indent=2)}
        for version in verifier.versions.select_related("created_by").order_by("-number")
    ]
    uses = (
        JobVerifier.objects.filter(verifier_version__verifier=verifier)
        .select_related("job", "verifier_version")
        .order_by("-job__created_at")[:10]
    )
    context = {
        "section": "verifiers",
        "verifier": verifier,
        "versions": versions,
        "uses": uses,
        "can_write": can_write(request.user, verifier.team),
    }
    return render(request, "verifiers/detail.html", context)
