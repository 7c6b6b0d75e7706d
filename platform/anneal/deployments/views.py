"""Pages: deployments of the team, the deploy form, a deployment's page (tiers, gate, keys, usage), the
playground that chats with a deployment (streamed), and the team's budget."""

from decimal import Decimal, InvalidOperation

from asgiref.sync import sync_to_async
from django import forms
from django.conf import settings
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.http import HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from anneal.accounts.models import Role
from anneal.accounts.scope import page_team
from anneal.accounts.selectors import can_write, role_in, teams_for
from anneal.deployments.models import Deployment, DeploymentKey, Tier
from anneal.deployments.openai_shape import CHAT, COMPLETIONS, OpenAIError, check_request, parse_body
from anneal.deployments.proxy import admit, forward
from anneal.deployments.selectors import (
    deployment_has_chat_template,
    deployment_usage,
    replica_counts,
    team_usage,
    tier_cards,
)
from anneal.deployments.services import (
    MAX_CONCURRENCY,
    MAX_REPLICAS,
    deployment_create,
    deployment_gate_override,
    deployment_key_create,
    deployment_key_revoke,
    deployment_stop,
    deployment_switch_tier,
    team_budget_set,
)
from anneal.errors import InputError
from anneal.pages import check_write, form_show_errors, get_visible_or_404, writable_team
from anneal.training.models import Checkpoint


class DeployForm(forms.Form):
    checkpoint = forms.ModelChoiceField(queryset=Checkpoint.objects.none())
    name = forms.CharField(
        max_length=200,
        required=False,
        help_text="The `model` name clients send; no spaces. Empty: one is made from the job and step.",
    )
    tier = forms.ChoiceField(choices=Tier.choices, initial=Tier.STANDARD)
    replicas = forms.IntegerField(min_value=1, max_value=MAX_REPLICAS, initial=1)
    max_concurrency = forms.IntegerField(
        min_value=1, max_value=MAX_CONCURRENCY, initial=4, help_text="Requests one replica generates at once."
    )

    def __init__(self, *args, team, **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["checkpoint"].queryset = Checkpoint.objects.filter(job__team=team).select_related("job")
        self.fields["checkpoint"].label_from_instance = lambda c: (
            f"job #{c.job_id} {c.job.name} · step {c.step}"
        )


@require_GET
@login_required
def deployment_list(request):
    team = page_team(request)
    deployments = Deployment.objects.filter(team=team).select_related("checkpoint__job") if team else []
    context = {
        "section": "deployments",
        "team": team,
        "deployments": deployments,
        "usage": team_usage(team) if team else None,
        "can_write": team is not None and can_write(request.user, team),
        "is_owner": team is not None and role_in(request.user, team) == Role.OWNER,
        "prices": settings.DEPLOY_PRICE_PER_MTOK,
    }
    return render(request, "deployments/list.html", context)


@require_http_methods(["GET", "POST"])
@login_required
def deployment_new(request):
    team = writable_team(request)
    if request.method == "POST":
        form = DeployForm(request.POST, team=team)
        if form.is_valid():
            data = form.cleaned_data
            try:
                deployment = deployment_create(
                    team=team,
                    user=request.user,
                    checkpoint_id=data["checkpoint"].pk,
                    name=data["name"],
                    tier=data["tier"],
                    replicas=data["replicas"],
                    max_concurrency=data["max_concurrency"],
                )
            except InputError as exc:
                form_show_errors(form, exc)
            else:
                messages.success(
                    request,
                    f"Deploying '{deployment.name}': the regression gate runs first, then its replicas start.",
                )
                return redirect("deployment-detail", pk=deployment.pk)
    else:
        form = DeployForm(team=team, initial={"checkpoint": request.GET.get("checkpoint")})
    context = {"section": "deployments", "form": form, "team": team, "tiers": _tier_table()}
    return render(request, "deployments/new.html", context)


def _tier_table() -> list[dict]:
    return [
        {
            "tier": tier,
            "price_per_mtok": settings.DEPLOY_PRICE_PER_MTOK[tier],
            "rate_limit_rpm": settings.DEPLOY_RATE_LIMIT_RPM[tier],
        }
        for tier in Tier.values
    ]


@require_GET
@login_required
def deployment_detail(request, pk: int):
    deployment = get_visible_or_404(
        request, Deployment.objects.select_related("checkpoint__job", "team", "created_by"), pk
    )
    chat_template = deployment_has_chat_template(deployment)
    context = {
        "section": "deployments",
        "deployment": deployment,
        "replicas": deployment.replica_set.order_by("-id")[:20],
        "replica_counts": replica_counts(deployment),
        "gate": deployment.gate_results.select_related("overridden_by").first(),
        "tiers": tier_cards(deployment),
        "keys": deployment.keys.order_by("-created_at"),
        "usage": deployment_usage(deployment),
        "team_usage": team_usage(deployment.team),
        "can_write": can_write(request.user, deployment.team),
        "is_owner": role_in(request.user, deployment.team) == Role.OWNER,
        "base_url": f"{settings.BASE_URL.rstrip('/')}/v1",
        "chat_template": chat_template,
        "chat_template_missing": chat_template is False,
        "page_data": {
            "id": deployment.pk,
            "state": deployment.state,
            "usage_url": f"/api/v1/deployments/{pk}/usage",
        },
    }
    return render(request, "deployments/detail.html", context)


def _writable_deployment(request, pk: int) -> Deployment:
    deployment = get_visible_or_404(request, Deployment.objects.select_related("team"), pk)
    check_write(request, deployment.team)
    return deployment


@require_POST
@login_required
def deployment_stop_view(request, pk: int):
    deployment = deployment_stop(deployment=_writable_deployment(request, pk), user=request.user)
    messages.success(request, f"Deployment '{deployment.name}' is {deployment.state}.")
    return redirect("deployment-detail", pk=pk)


@require_POST
@login_required
def deployment_tier_view(request, pk: int):
    deployment = _writable_deployment(request, pk)
    try:
        deployment_switch_tier(deployment=deployment, tier=request.POST.get("tier", ""), user=request.user)
    except InputError as exc:
        messages.error(request, str(exc))
    else:
        messages.success(
            request,
            f"Switching to the {deployment.tier} tier: the current replicas serve until a new one is ready.",
        )
    return redirect("deployment-detail", pk=pk)


@require_POST
@login_required
def deployment_override_view(request, pk: int):
    deployment = _writable_deployment(request, pk)
    try:
        deployment_gate_override(
            deployment=deployment, user=request.user, reason=request.POST.get("reason", "")
        )
    except InputError as exc:
        messages.error(request, str(exc))
    else:
        messages.success(request, "Gate overridden (recorded in the audit log): the deployment starts.")
    return redirect("deployment-detail", pk=pk)


NEW_KEY_SESSION = "deployment-new-key"


@require_http_methods(["GET", "POST"])
@login_required
def deployment_key_create_view(request, pk: int):
    """POST creates the key and redirects here; the GET shows its secret once, from the session (a reload,
    or a second tab, finds it gone and goes back to the deployment's page with a note)."""
    deployment = _writable_deployment(request, pk)
    if request.method == "POST":
        try:
            key, raw = deployment_key_create(
                team=deployment.team,
                user=request.user,
                name=request.POST.get("name", ""),
                deployment=deployment,
            )
        except InputError as exc:
            messages.error(request, str(exc))
            return redirect("deployment-detail", pk=pk)
        request.session[NEW_KEY_SESSION] = {"key": key.pk, "raw": raw}
        return redirect("deployment-key-create", pk=pk)
    shown = request.session.pop(NEW_KEY_SESSION, None)
    key = (
        DeploymentKey.objects.filter(pk=shown["key"], deployment=deployment).first()
        if isinstance(shown, dict)
        else None
    )
    if key is None:
        messages.info(
            request,
            "A key's secret is shown only once, right after it is created. If it was not copied, revoke "
            "that key and create another.",
        )
        return redirect("deployment-detail", pk=pk)
    context = {
        "section": "deployments",
        "deployment": deployment,
        "key": key,
        "raw": shown["raw"],
        "base_url": f"{settings.BASE_URL.rstrip('/')}/v1",
        "chat_template_missing": deployment_has_chat_template(deployment) is False,
    }
    response = render(request, "deployments/key_created.html", context)
    response["Cache-Control"] = "no-store"
    return response


@require_POST
@login_required
def deployment_key_revoke_view(request, pk: int):
    key = get_visible_or_404(request, DeploymentKey.objects.select_related("team"), pk)
    check_write(request, key.team)
    deployment_key_revoke(key=key, user=request.user)
    messages.success(request, f"Key '{key.name}' ({key.key_hint}…) is revoked: calls with it now get 401.")
    return (
        redirect("deployment-detail", pk=key.deployment_id)
        if key.deployment_id
        else redirect("deployment-list")
    )


@require_POST
@login_required
def team_budget_view(request):
    team = writable_team(request)
    if role_in(request.user, team) != Role.OWNER:
        raise PermissionDenied(f"Only an owner of team '{team.name}' sets its monthly spending cap.")
    raw = request.POST.get("monthly_cap_usd", "").strip()
    try:
        cap = Decimal(raw) if raw else None
        if cap is not None and (not cap.is_finite() or cap < 0):
            raise InvalidOperation
        team_budget_set(team=team, user=request.user, monthly_cap_usd=cap)
    except InvalidOperation:
        messages.error(request, f"Budget: {raw!r} is not an amount in USD of 0 or more (empty: no cap).")
    except InputError as exc:
        messages.error(request, f"Budget: {raw!r}: {exc.errors[0]['message']}.")
    else:
        messages.success(request, f"Monthly budget cap: {'$' + str(cap) if cap is not None else 'none'}.")
    return redirect("deployment-list")


@require_GET
@login_required
def playground(request, pk: int):
    deployment = get_visible_or_404(request, Deployment.objects.select_related("team"), pk)
    context = {
        "section": "deployments",
        "deployment": deployment,
        "chat_template": deployment_has_chat_template(deployment),
        "team_usage": team_usage(deployment.team),
        "page_data": {
            "chat_url": f"/deployments/{pk}/playground/chat",
            "budget_url": reverse("deployment-list") + "#budget",
            "model": deployment.name,
            "state": deployment.state,
            "max_tokens": min(256, settings.DEPLOY_MAX_TOKENS),
        },
    }
    return render(request, "deployments/playground.html", context)


def _playground_admission(user, pk: int):
    deployment = Deployment.objects.select_related("team").filter(pk=pk, team__in=teams_for(user)).first()
    if deployment is None:
        raise OpenAIError(404, f"No deployment with id {pk}.", code="model_not_found")
    if not can_write(user, deployment.team):
        raise OpenAIError(
            403, "Your role is viewer: the playground spends the team's budget.", code="forbidden"
        )
    return admit(deployment=deployment, key=None, limiter=f"user{user.pk}")


async def playground_chat(request, pk: int) -> HttpResponse:
    """The playground's chat (or raw completion): the session's user instead of a key, metered to the team
    like any call."""
    if request.method != "POST":
        return OpenAIError(405, "Use POST.", code="method_not_allowed").response()
    user = await request.auser()
    if not user.is_authenticated:
        return OpenAIError(401, "Sign in to use the playground.", code="not_signed_in").response()
    try:
        body = parse_body(request)
        admission = await sync_to_async(_playground_admission)(user, pk)
        body["model"] = admission.deployment.name
        # A prompt instead of messages: a raw completion, for models that were never taught to chat.
        kind = COMPLETIONS if "prompt" in body and "messages" not in body else CHAT
        check_request(body, kind)
        return await forward(admission, body, kind)
    except OpenAIError as exc:
        return exc.response()
