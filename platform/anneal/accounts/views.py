"""Pages: the home dashboard, the team switcher and personal API tokens."""

from django import forms
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpResponseRedirect
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.utils.http import url_has_allowed_host_and_scheme
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from anneal.accounts.models import ApiToken
from anneal.accounts.scope import SESSION_KEY, page_team
from anneal.accounts.selectors import can_write, role_in, teams_for
from anneal.accounts.services import api_token_create, api_token_revoke
from anneal.datasets.models import Dataset, DatasetUpload
from anneal.guide import guide_steps
from anneal.pages import writable_team
from anneal.training.models import Job, JobState
from anneal.verifiers.models import Verifier

RECENT = 6


@require_GET
@login_required
def home(request):
    team = page_team(request)
    context = {"section": "home", "team": team}
    if team is not None:
        jobs = Job.objects.filter(team=team).select_related("dataset_version__dataset")
        context.update(
            role=role_in(request.user, team),
            can_write=can_write(request.user, team),
            jobs=jobs[:RECENT],
            running_count=jobs.filter(
                state__in=[JobState.QUEUED, JobState.RUNNING, JobState.CANCELLING]
            ).count(),
            job_count=jobs.count(),
            datasets=Dataset.objects.filter(team=team).prefetch_related("versions")[:RECENT],
            dataset_count=Dataset.objects.filter(team=team).count(),
            verifiers=Verifier.objects.filter(team=team).prefetch_related("versions")[:RECENT],
            verifier_count=Verifier.objects.filter(team=team).count(),
            uploads=DatasetUpload.objects.filter(team=team)[:3],
            guide=guide_steps(team),
        )
        context["guide_done"] = all(step["done"] for step in context["guide"])
    return render(request, "home.html", context)


@require_POST
@login_required
def team_switch(request):
    """Choose the team pages act in (kept in the session); only a team the user belongs to."""
    team_id = request.POST.get("team", "")
    team = teams_for(request.user).filter(pk=int(team_id)).first() if team_id.isdigit() else None
    if team is None:
        raise Http404("No such team")
    request.session[SESSION_KEY] = team.pk
    target = request.POST.get("next", "")
    if not url_has_allowed_host_and_scheme(target, allowed_hosts={request.get_host()}, require_https=False):
        target = reverse("home")
    return HttpResponseRedirect(target)


class TokenForm(forms.Form):
    name = forms.CharField(
        max_length=100,
        help_text="What the token is for, e.g. 'CI pipeline' or 'notebook'. It acts in the current team only.",
    )


@require_http_methods(["GET", "POST"])
@login_required
def token_list(request):
    """GET: the user's tokens. POST: create one in the current team and show its secret, this once only."""
    form = TokenForm()
    if request.method == "POST":
        team = writable_team(request)
        form = TokenForm(request.POST)
        if form.is_valid():
            token, raw = api_token_create(user=request.user, team=team, name=form.cleaned_data["name"])
            # Rendered, not redirected: the secret must never be stored, so this response is its only showing.
            response = render(
                request, "accounts/token_created.html", {"section": "tokens", "token": token, "raw": raw}
            )
            response["Cache-Control"] = "no-store"
            return response
    team = page_team(request)
    tokens = ApiToken.objects.filter(user=request.user).select_related("team").order_by("-created_at")
    context = {
        "section": "tokens",
        "form": form,
        "tokens": tokens,
        "team": team,
        "can_write": team is not None and can_write(request.user, team),
    }
    return render(request, "accounts/tokens.html", context)


@require_POST
@login_required
def token_revoke(request, pk: int):
    """Revoke one of the user's own tokens. Allowed in any role: revoking only ever takes access away."""
    token = get_object_or_404(ApiToken, pk=pk, user=request.user)
    api_token_revoke(token=token, by=request.user)
    messages.success(request, f"Token '{token.name}' ({token.key_hint}…) is revoked: it no longer works.")
    return redirect("token-list")
