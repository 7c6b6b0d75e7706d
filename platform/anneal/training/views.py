"""Pages: jobs and the job page that follows a run live over a websocket (the launch form: launch_views)."""

from urllib.parse import urlencode

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.paginator import Paginator
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_GET, require_POST

from anneal.accounts.scope import page_team
from anneal.accounts.selectors import can_write
from anneal.errors import InputError
from anneal.pages import check_write, get_visible_or_404
from anneal.training.costs import job_spend
from anneal.training.job_page import (
    METRIC_GROUPS,
    empty_evaluation_reason,
    empty_metrics_reason,
    format_metric,
    metric_groups,
)
from anneal.training.models import TERMINAL_STATES, Job, JobState
from anneal.training.selectors import job_live_summary, job_rollouts, job_tampering_summary, queue_state
from anneal.training.services import job_cancel, job_retry
from anneal.training.state import job_pause, job_resume

STATE_FILTERS = [state.value for state in JobState]
ROLLOUTS_PER_PAGE = 50


@require_GET
@login_required
def job_list(request):
    team = page_team(request)
    jobs = Job.objects.filter(team=team) if team else Job.objects.none()
    state = request.GET.get("state", "")
    if state in STATE_FILTERS:
        jobs = jobs.filter(state=state)
    context = {
        "section": "jobs",
        "jobs": jobs.select_related("dataset_version__dataset", "created_by")[:200],
        "state": state,
        "states": STATE_FILTERS,
        "can_write": team is not None and can_write(request.user, team),
    }
    return render(request, "training/job_list.html", context)


@require_GET
@login_required
def job_detail(request, pk: int):
    job = get_visible_or_404(
        request, Job.objects.select_related("dataset_version__dataset", "created_by", "retry_of"), pk
    )
    verifiers = list(job.job_verifiers.select_related("verifier_version__verifier").order_by("name"))
    writer = can_write(request.user, job.team)
    # The first paint comes from the events the stream replays, so the page agrees with itself at once.
    live = job_live_summary(job=job)
    raw_metrics = sorted((key, format_metric(value, "number")) for key, value in live["metrics"].items())
    # What job.js needs to start: it then replays every event from the database over the websocket.
    page_data = {
        "id": job.pk,
        "state": job.state,
        "step": live["step"],
        "max_steps": job.max_steps,
        "error": job.error,
        "ws_path": f"/ws/jobs/{job.pk}/",
        "terminal_states": sorted(TERMINAL_STATES),
        "verifiers": [jv.name for jv in verifiers],
        # For "flag this rollout as a test case of a verifier"; writers only.
        "flag_verifiers": [{"id": jv.verifier_version.verifier_id, "name": jv.name} for jv in verifiers],
        "can_write": writer,
        "metric_groups": METRIC_GROUPS,
        "has_rollouts": live["has_rollouts"],
        # A checkpoint that arrives live links to the deploy form with it chosen (writers only).
        "deploy_url": reverse("deployment-new") + "?checkpoint=" if writer else "",
        "card_url": reverse("checkpoint-card", args=[0]),  # job.js puts the id in place of /0/
        "flag_url": f"/api/v1/jobs/{job.pk}/rollouts/",
        # Every rollout the job reported, filtered on the server (the live list holds only the newest).
        "rollouts_url": reverse("job-rollouts", args=[job.pk]),
    }
    context = {
        "section": "jobs",
        "job": job,
        "spend": job_spend(job),
        "can_pause": job.state in (JobState.QUEUED, JobState.RUNNING),
        "can_resume": job.state == JobState.PAUSED,
        "verifiers": verifiers,
        "checkpoints": job.checkpoints.order_by("-step"),
        "tampering": job_tampering_summary(job=job),
        "can_write": writer,
        "page_data": page_data,
        "step": live["step"],
        "metric_groups": metric_groups(live["metrics"]),
        "live_metric_step": live["metrics"].get("step", ""),
        "raw_metrics": raw_metrics,
        "empty_metrics": empty_metrics_reason(
            state=job.state, step=live["step"], has_rollouts=live["has_rollouts"]
        ),
        "empty_evaluation": empty_evaluation_reason(spec=job.spec),
        "settings": sorted((k, v) for k, v in job.spec.items() if k not in ("verifiers", "dataset_version")),
    }
    return render(request, "training/job_detail.html", context)


@require_GET
@login_required
def job_rollouts_view(request, pk: int):
    """Every rollout the job reported, newest first, filtered: ``tampering=1`` keeps those that tried to
    tamper with a verifier (what the reward_tampering alarm links to), ``held_out=1`` an agent job's held-out
    evaluation episodes, ``step`` one step's."""
    job = get_visible_or_404(request, Job.objects.all(), pk)
    tampering = request.GET.get("tampering", "") in ("1", "true", "on")
    held_out = request.GET.get("held_out", "") in ("1", "true", "on")
    step_text = request.GET.get("step", "").strip()
    step, error = None, ""
    if step_text:
        if step_text.isdigit():
            step = int(step_text)
        else:
            error = f"step must be a whole number, 0 or more; got {step_text!r}"
    found = job_rollouts(
        job=job, tampering=True if tampering else None, step=step, held_out=True if held_out else None
    ).order_by("-seq")
    page = Paginator(found, ROLLOUTS_PER_PAGE).get_page(request.GET.get("page"))
    filters: dict[str, object] = {"tampering": 1} if tampering else {}
    if held_out:
        filters["held_out"] = 1
    if step is not None:
        filters["step"] = step
    context = {
        "section": "jobs",
        "job": job,
        "page": page,
        "tampering": tampering,
        "held_out": held_out,
        "step": "" if step is None else step,
        "error": error,
        "query": urlencode(filters),  # kept by the page links
    }
    return render(request, "training/job_rollouts.html", context, status=400 if error else 200)


@require_POST
@login_required
def job_cancel_view(request, pk: int):
    job = get_visible_or_404(request, Job.objects.all(), pk)
    check_write(request, job.team)
    if job.is_finished:
        messages.info(request, f"Job #{job.pk} had already finished ({job.state}).")
    else:
        job = job_cancel(job=job, user=request.user)
        messages.success(request, f"Job #{job.pk} is {job.state}.")
    return redirect("job-detail", pk=job.pk)


@require_POST
@login_required
def job_pause_view(request, pk: int):
    job = get_visible_or_404(request, Job.objects.all(), pk)
    check_write(request, job.team)
    try:
        job = job_pause(job=job, user=request.user)
    except InputError as exc:
        messages.error(request, str(exc))
    else:
        messages.success(request, f"Job #{job.pk} is {job.state}: it checkpoints and frees its devices.")
    return redirect("job-detail", pk=job.pk)


@require_POST
@login_required
def job_resume_view(request, pk: int):
    job = get_visible_or_404(request, Job.objects.all(), pk)
    check_write(request, job.team)
    budget = request.POST.get("budget", "").strip()
    try:
        try:
            new_budget = float(budget) if budget else None
        except ValueError:
            raise InputError(f"budget must be a number, got {budget!r}", field="budget") from None
        job = job_resume(job=job, user=request.user, budget=new_budget)
    except InputError as exc:
        messages.error(request, str(exc))
    else:
        messages.success(request, f"Job #{job.pk} is queued again and resumes from its latest checkpoint.")
    return redirect("job-detail", pk=job.pk)


@require_GET
@login_required
def job_queue(request):
    """Waiting jobs in the order they start, with position and estimated start; running jobs and their end."""
    team = page_team(request)
    state = queue_state(teams=[team] if team else [])
    return render(request, "training/queue.html", {"section": "jobs", "queue": state, "team": team})


@require_POST
@login_required
def job_retry_view(request, pk: int):
    job = get_visible_or_404(request, Job.objects.all(), pk)
    check_write(request, job.team)
    try:
        new = job_retry(job=job, user=request.user)
    except InputError as exc:
        messages.error(request, str(exc))
        return redirect("job-detail", pk=job.pk)
    messages.success(request, f"Job #{new.pk} runs job #{job.pk}'s spec again.")
    return redirect("job-detail", pk=new.pk)


@login_required
def dashboards(request):
    """The Dash dashboards: runs compared by metric, and held-out evaluation per domain and checkpoint."""
    return render(request, "training/dashboards.html")
