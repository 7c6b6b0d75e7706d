"""The team settings page: the team's secrets (names only; values are write-only) and the hosts its verifiers
may call (owners change those). The same services as the REST API (anneal.accounts.api)."""

from django import forms
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.shortcuts import redirect, render
from django.views.decorators.http import require_http_methods, require_POST

from anneal.accounts.models import OutboundHost, Role, TeamSecret
from anneal.accounts.outbound_hosts import installation_hosts
from anneal.accounts.scope import page_team
from anneal.accounts.selectors import can_write, role_in
from anneal.accounts.services import (
    SECRET_MAX_BYTES,
    outbound_host_add,
    outbound_host_remove,
    team_secret_delete,
    team_secret_set,
)
from anneal.errors import InputError
from anneal.pages import form_show_errors, writable_team


class SecretForm(forms.Form):
    name = forms.CharField(max_length=100, help_text="Letters, digits, _ . - ; e.g. OPENAI_KEY.")
    value = forms.CharField(
        max_length=SECRET_MAX_BYTES,
        strip=False,
        # render_value=False: a value sent back with an error is not written into the page again.
        widget=forms.PasswordInput(render_value=False),
        help_text="Encrypted at rest; never shown again, to anyone.",
    )
    replace = forms.BooleanField(required=False, help_text="Replace the value of an existing secret.")


class HostForm(forms.Form):
    host = forms.CharField(
        max_length=300,
        help_text="api.example.com, api.example.com:443, *.example.com, 10.0.0.5:8000 or [::1].",
    )
    note = forms.CharField(max_length=200, required=False, help_text="What it is for.")


@require_http_methods(["GET", "POST"])
@login_required
def team_settings(request):
    team = page_team(request)
    secret_form, host_form = SecretForm(), HostForm()
    if request.method == "POST":
        team = writable_team(request)
        if request.POST.get("form") == "host":
            host_form = HostForm(request.POST)
            if host_form.is_valid():
                try:
                    allowed = outbound_host_add(team=team, user=request.user, **host_form.cleaned_data)
                except InputError as exc:
                    form_show_errors(host_form, exc)
                else:
                    messages.success(request, f"The team's verifiers may now call {allowed.host}.")
                    return redirect("team-settings")
        else:
            secret_form = SecretForm(request.POST)
            if secret_form.is_valid():
                try:
                    secret = team_secret_set(team=team, user=request.user, **secret_form.cleaned_data)
                except InputError as exc:
                    form_show_errors(secret_form, exc)
                else:
                    messages.success(
                        request, f"Secret '{secret.name}' is stored. Judges name it in api_key_secret."
                    )
                    return redirect("team-settings")
    role = role_in(request.user, team) if team is not None else None
    context = {
        "section": "team",
        "team": team,
        "can_write": team is not None and can_write(request.user, team),
        "is_owner": role == Role.OWNER,
        "secrets": TeamSecret.objects.filter(team=team, managed=False).select_related("updated_by"),
        "hosts": OutboundHost.objects.filter(team=team).select_related("created_by"),
        "installation_hosts": [str(entry) for entry in installation_hosts()],
        "secret_form": secret_form,
        "host_form": host_form,
    }
    return render(request, "accounts/team_settings.html", context)


@require_POST
@login_required
def team_secret_delete_view(request, pk: int):
    team = writable_team(request)
    secret = TeamSecret.objects.filter(team=team, pk=pk, managed=False).first()
    if secret is None:
        raise PermissionDenied("No such secret in the current team.")
    team_secret_delete(secret=secret, user=request.user)
    messages.success(
        request, f"Secret '{secret.name}' is deleted: judges naming it now score 0 with the reason."
    )
    return redirect("team-settings")


@require_POST
@login_required
def outbound_host_remove_view(request, pk: int):
    team = writable_team(request)
    allowed = OutboundHost.objects.filter(team=team, pk=pk).first()
    if allowed is None:
        raise PermissionDenied("No such allowed host in the current team.")
    outbound_host_remove(allowed=allowed, user=request.user)
    messages.success(request, f"{allowed.host} is no longer allowed: judges calling it are refused.")
    return redirect("team-settings")
