"""What a job costs: an estimate before launch and its spend so far.

Spend = device-hours (the job's run time, summed over its attempts, times its device count) × the price of its
device type (settings.JOB_DEVICE_PRICES) + sandbox hours (the time its verifiers took, reported per step as
``verify_time/<verifier>``) × settings.JOB_SANDBOX_PRICE_PER_HOUR. Prices are in USD.

The estimate times a step from the team's latest finished job on the same model, scaled by the work a step
does; with no such job it uses default rates per unit of work (below). It is a guide, not a quote.

A step's work, in generated-token units (``step_work``), for C = max_completion_length, p the mean prompt
length and k the model's ``kv_read_weight``: completions x (C + PROMPT_TOKEN_WEIGHT x p x (1 + k x p / 2) +
k x C x (p + C / 2)).
- Prefill and training pass: a prompt token is prefilled in one parallel pass and goes through the training
  pass, where a generated token takes one sequential forward each; measured roughly on the tiny model on 2
  loaded CPU cores, a prompt token cost about a twentieth of a generated one (PROMPT_TOKEN_WEIGHT). Its
  attention over the p / 2 prompt tokens before it, on average, adds k x p / 2 to that: quadratic in p.
- KV cache: each generated token reads the cached keys and values of its whole context (the prompt and the
  tokens before it, p + C / 2 on average), k = gpu_jobs.memory.kv_read_weight (2 x layers x hidden /
  parameters) per context token.
Both attention terms are negligible for short prompts and most of a step for long ones: bench/long_context.py
(c) measured the tiny long-context model's step 13.7x slower at 4,096 prompt tokens than at 512, where this
formula says 10.3x (and 2.1x, 5.1x at 1,024 and 2,048 tokens, against 1.8x and 3.9x).
p and k are what the launch measured (``spec["prompt_tokens"]``, after the overflow policy); 0 for jobs
launched before they were measured.
"""

from dataclasses import dataclass

from django.conf import settings
from django.utils import timezone

from anneal.accounts.models import Team
from anneal.training.models import ACTIVE_STATES, Job, JobState

CURRENCY = "USD"
# Seconds per generated token of a step, and fixed seconds per job (model load, evaluation), when the team
# has no finished job on the model to time from. Measured on 2 CPU cores (see FINDINGS.md).
DEFAULT_SECONDS_PER_TOKEN = {"tiny": 0.0006}
DEFAULT_SECONDS_PER_TOKEN_OTHER = 0.08
DEFAULT_OVERHEAD_S = 30.0
DEFAULT_SANDBOX_SECONDS_PER_COMPLETION = 0.002
PROMPT_TOKEN_WEIGHT = 0.05


def usd(amount: float) -> str:
    """An amount for messages: cents above a dollar, else four significant digits (budgets can be tiny)."""
    return f"{amount:.2f}" if abs(amount) >= 1 else f"{amount:.4g}"


def device_price(device_type: str) -> float:
    return float(settings.JOB_DEVICE_PRICES.get(device_type, 0))


def job_run_seconds(job: Job) -> float:
    """Run time so far: finished attempts plus the running one."""
    seconds = job.run_seconds
    if job.state in ACTIVE_STATES and job.attempt_started_at:
        seconds += max(0.0, (timezone.now() - job.attempt_started_at).total_seconds())
    return seconds


def job_spend(job: Job) -> dict:
    run_s = job_run_seconds(job)
    device_hours = run_s / 3600 * job.devices
    sandbox_hours = job.sandbox_seconds / 3600
    device_cost = device_hours * device_price(job.device_type)
    sandbox_cost = sandbox_hours * float(settings.JOB_SANDBOX_PRICE_PER_HOUR)
    budget = float(job.spec.get("budget") or 0)
    return {
        "currency": CURRENCY,
        "run_seconds": round(run_s, 1),
        "device_type": job.device_type,
        "devices": job.devices,
        "device_hours": round(device_hours, 6),
        "device_cost": round(device_cost, 6),
        "sandbox_hours": round(sandbox_hours, 6),
        "sandbox_cost": round(sandbox_cost, 6),
        "total": round(device_cost + sandbox_cost, 6),
        "budget": budget or None,
    }


@dataclass(frozen=True)
class StepTiming:
    step_seconds: float
    overhead_seconds: float
    sandbox_seconds_per_step: float
    basis: str


def mean_prompt_tokens(spec: dict) -> float:
    measured = spec.get("prompt_tokens") or {}
    return float(measured.get("mean") or 0) if isinstance(measured, dict) else 0.0


def kv_weight(spec: dict) -> float:
    measured = spec.get("prompt_tokens") or {}
    return float(measured.get("kv_read_weight") or 0) if isinstance(measured, dict) else 0.0


def step_work(spec: dict) -> float:
    """A step's work in generated-token units: generation, its reads of the KV cache, and the prompts'
    prefill and training pass."""
    completions = int(spec["prompts_per_step"]) * int(spec["num_generations"])
    completion, prompt = int(spec["max_completion_length"]), mean_prompt_tokens(spec)
    k = kv_weight(spec)
    prefill = PROMPT_TOKEN_WEIGHT * prompt * (1 + k * prompt / 2)
    kv_reads = k * completion * (prompt + completion / 2)
    return completions * (completion + prefill + kv_reads)


def step_timing(*, spec: dict, team: Team) -> StepTiming:
    """How long one step of ``spec`` should take: from the team's latest finished job on the same model (one
    on the same dataset version first: the closest measurement), else from default rates."""
    model = spec.get("model", "tiny")
    measured = Job.objects.filter(
        team=team, state=JobState.SUCCEEDED, spec__model=model, step__gt=0, run_seconds__gt=0
    ).order_by("-finished_at")
    previous = (
        measured.filter(dataset_version_id=spec.get("dataset_version")).first() or measured.first()
        if spec.get("dataset_version")
        else measured.first()
    )
    tokens = max(1.0, step_work(spec))
    if previous is not None:
        try:
            ratio = tokens / max(1.0, step_work(previous.spec))
        except (KeyError, TypeError, ValueError):
            ratio = 1.0
        per_step = previous.run_seconds / previous.step
        sandbox = previous.sandbox_seconds / previous.step
        same_data = previous.dataset_version_id == spec.get("dataset_version")
        return StepTiming(
            step_seconds=per_step * ratio,
            overhead_seconds=0.0,  # already inside the measured per-step time
            sandbox_seconds_per_step=sandbox * ratio,
            basis=f"timed from job #{previous.pk} “{previous.name}” on the same model ({model}"
            f"{', same dataset' if same_data else ', another dataset'}): {previous.step} steps in "
            f"{previous.run_seconds:.0f} s, {per_step:.3g} s a step, scaled to this job's tokens per step",
        )
    rate = DEFAULT_SECONDS_PER_TOKEN.get(model, DEFAULT_SECONDS_PER_TOKEN_OTHER)
    completions = int(spec["prompts_per_step"]) * int(spec["num_generations"])
    return StepTiming(
        step_seconds=rate * tokens,
        overhead_seconds=DEFAULT_OVERHEAD_S,
        sandbox_seconds_per_step=DEFAULT_SANDBOX_SECONDS_PER_COMPLETION * completions,
        basis=f"no measured job yet: a default rate for {model} ({rate:g} s per generated token, measured on "
        f"2 CPU cores) plus {DEFAULT_OVERHEAD_S:.0f} s to start; it learns from this team's first finished "
        "job on the model",
    )


def job_estimate(*, spec: dict, team: Team, steps: int | None = None) -> dict:
    """Estimated run time and cost of ``steps`` (default: all) steps of a job with ``spec``."""
    timing = step_timing(spec=spec, team=team)
    steps = int(spec["max_steps"]) if steps is None else steps
    seconds = timing.overhead_seconds + timing.step_seconds * steps
    devices = int(spec.get("devices", 1))
    device_type = spec.get("device_type", "cpu")
    device_hours = seconds / 3600 * devices
    sandbox_hours = timing.sandbox_seconds_per_step * steps / 3600
    device_cost = device_hours * device_price(device_type)
    sandbox_cost = sandbox_hours * float(settings.JOB_SANDBOX_PRICE_PER_HOUR)
    budget = float(spec.get("budget") or 0)
    total = device_cost + sandbox_cost
    return {
        "currency": CURRENCY,
        "seconds": round(seconds, 1),
        "device_type": device_type,
        "devices": devices,
        "price_per_device_hour": device_price(device_type),
        "device_hours": round(device_hours, 6),
        "device_cost": round(device_cost, 6),
        "sandbox_hours": round(sandbox_hours, 6),
        "sandbox_price_per_hour": float(settings.JOB_SANDBOX_PRICE_PER_HOUR),
        "sandbox_cost": round(sandbox_cost, 6),
        "total": round(total, 6),
        "budget": budget or None,
        "over_budget": bool(budget and total > budget),
        "basis": timing.basis,
    }


def job_remaining_seconds(job: Job) -> float:
    """Estimated run time left: from the job's own pace once it has done steps, else from the estimate."""
    left_steps = max(0, job.max_steps - job.step)
    if job.step > 0 and job_run_seconds(job) > 0:
        return job_run_seconds(job) / job.step * left_steps
    try:
        return job_estimate(spec=job.spec, team=job.team, steps=left_steps)["seconds"]
    except (KeyError, TypeError, ValueError):
        return 0.0
