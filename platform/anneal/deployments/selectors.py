"""Reads for deployments: key look-up, routing candidates, spend, usage series and measured speed."""

from datetime import datetime, timedelta
from decimal import ROUND_HALF_UP, Decimal

from django.conf import settings
from django.db.models import Count, QuerySet, Sum
from django.db.models.functions import TruncHour
from django.utils import timezone

from anneal.accounts.models import Team
from anneal.deployments.models import (
    KEY_PREFIX,
    Deployment,
    DeploymentKey,
    DeploymentState,
    Replica,
    ReplicaState,
    TeamBudget,
    Tier,
    UsageRecord,
    key_hash,
)
from gpu_jobs.serving.chat_template import folder_has_chat_template


def key_lookup(raw: str) -> DeploymentKey | None:
    """The key for a raw secret, active or revoked (the caller tells them apart); None if unknown."""
    if not raw.startswith(KEY_PREFIX):
        return None
    return DeploymentKey.objects.select_related("team", "deployment").filter(key_hash=key_hash(raw)).first()


def deployments_for_key(key: DeploymentKey) -> QuerySet[Deployment]:
    deployments = Deployment.objects.filter(team_id=key.team_id)
    if key.deployment_id is not None:
        deployments = deployments.filter(pk=key.deployment_id)
    return deployments


def ready_replicas(deployment: Deployment) -> list[Replica]:
    return list(deployment.replica_set.filter(state=ReplicaState.READY, port__isnull=False).order_by("id"))


def month_start(now: datetime | None = None) -> datetime:
    now = now or timezone.now()
    return now.replace(day=1, hour=0, minute=0, second=0, microsecond=0)


def team_spend_month(team_id: int) -> Decimal:
    total = UsageRecord.objects.filter(team_id=team_id, created_at__gte=month_start()).aggregate(
        s=Sum("cost_usd")
    )["s"]
    return total or Decimal(0)


CAP_STEP = Decimal("0.000001")  # a cap has six decimals (TeamBudget.monthly_cap_usd), as the pages show spend


def budget_reached(spent: Decimal, cap: Decimal | None) -> bool:
    """Whether `spent` reaches `cap`, compared at the cap's precision: a cap set to the spend a page shows
    (rounded to six decimals) stops calls, as its owner meant."""
    return cap is not None and spent.quantize(CAP_STEP, rounding=ROUND_HALF_UP) >= cap


def team_budget_cap(team_id: int) -> Decimal | None:
    """The team's monthly cap in USD, or None for no cap (its own setting, else ANNEAL_TEAM_BUDGET_USD)."""
    budget = TeamBudget.objects.filter(team_id=team_id).first()
    if budget is not None:
        return budget.monthly_cap_usd
    default = settings.DEPLOY_TEAM_BUDGET_USD
    return default if default > 0 else None


def usage_totals(records: QuerySet[UsageRecord]) -> dict:
    totals = records.aggregate(
        requests=Count("id"),
        prompt_tokens=Sum("prompt_tokens"),
        completion_tokens=Sum("completion_tokens"),
        cost_usd=Sum("cost_usd"),
    )
    return {
        "requests": totals["requests"] or 0,
        "prompt_tokens": totals["prompt_tokens"] or 0,
        "completion_tokens": totals["completion_tokens"] or 0,
        "cost_usd": str((totals["cost_usd"] or Decimal(0)).quantize(Decimal("0.000001"))),
    }


def team_usage(team: Team) -> dict:
    cap = team_budget_cap(team.pk)
    month = usage_totals(UsageRecord.objects.filter(team=team, created_at__gte=month_start()))
    return {
        "month": month,
        "all_time": usage_totals(UsageRecord.objects.filter(team=team)),
        "monthly_cap_usd": None if cap is None else str(cap),
        "spend_month_usd": month["cost_usd"],
        # Shown before any request is made: a cap reached (a cap of $0 at once) refuses every call.
        "cap_reached": cap is not None and budget_reached(team_spend_month(team.pk), cap),
    }


def deployment_usage(deployment: Deployment) -> dict:
    records = UsageRecord.objects.filter(deployment=deployment)
    per_key = [
        {
            "key": row["key"],
            "key_name": row["key__name"] or "playground",
            "requests": row["requests"],
            "prompt_tokens": row["prompt_tokens"] or 0,
            "completion_tokens": row["completion_tokens"] or 0,
            "cost_usd": str((row["cost"] or Decimal(0)).quantize(Decimal("0.000001"))),
        }
        for row in records.values("key", "key__name")
        .annotate(
            requests=Count("id"),
            prompt_tokens=Sum("prompt_tokens"),
            completion_tokens=Sum("completion_tokens"),
            cost=Sum("cost_usd"),
        )
        .order_by("key")
    ]
    return {
        "deployment": deployment.pk,
        "totals": usage_totals(records),
        "per_key": per_key,
        "per_tier": {tier: usage_totals(records.filter(tier=tier)) for tier in Tier.values},
    }


def usage_series(*, deployment: Deployment | None = None, team: Team | None = None, hours: int = 48) -> list:
    """Tokens and cost per hour over the last ``hours``, oldest first (hours without requests are left out)."""
    records = UsageRecord.objects.filter(created_at__gte=timezone.now() - timedelta(hours=hours))
    if deployment is not None:
        records = records.filter(deployment=deployment)
    if team is not None:
        records = records.filter(team=team)
    rows = (
        records.annotate(hour=TruncHour("created_at"))
        .values("hour")
        .annotate(
            requests=Count("id"),
            prompt_tokens=Sum("prompt_tokens"),
            completion_tokens=Sum("completion_tokens"),
            cost=Sum("cost_usd"),
        )
        .order_by("hour")
    )
    return [
        {
            "hour": row["hour"].isoformat(),
            "requests": row["requests"],
            "prompt_tokens": row["prompt_tokens"] or 0,
            "completion_tokens": row["completion_tokens"] or 0,
            "cost_usd": float(row["cost"] or 0),
        }
        for row in rows
    ]


def tier_speeds(deployment: Deployment) -> dict[str, float | None]:
    """Measured completion tokens per second of each tier on this deployment (its last 200 successful
    requests at that tier with output): None where none was measured yet."""
    speeds: dict[str, float | None] = {}
    for tier in Tier.values:
        rows = list(
            UsageRecord.objects.filter(
                deployment=deployment, tier=tier, status_code=200, completion_tokens__gt=0, latency_ms__gt=0
            )
            .exclude(batch__isnull=False)
            .values_list("completion_tokens", "latency_ms")[:200]
        )
        tokens, ms = sum(r[0] for r in rows), sum(r[1] for r in rows)
        speeds[tier] = round(tokens / (ms / 1000), 1) if ms else None
    return speeds


def tier_cards(deployment: Deployment) -> list[dict]:
    speeds = tier_speeds(deployment)
    blurbs = {
        Tier.BATCH: "Bulk jobs: large batches, results in a file later. Cheapest per token.",
        Tier.STANDARD: "Interactive use: plain generation.",
        Tier.TURBO: "Latency-critical use: speculative (prompt-lookup) decoding.",
    }
    return [
        {
            "tier": tier,
            "price_per_mtok": settings.DEPLOY_PRICE_PER_MTOK[tier],
            "rate_limit_rpm": settings.DEPLOY_RATE_LIMIT_RPM[tier],
            "tokens_per_s": speeds[tier],
            "blurb": blurbs[tier],
            "current": tier == deployment.tier,
        }
        for tier in Tier.values
    ]


def deployments_active_count(team: Team) -> int:
    return Deployment.objects.filter(
        team=team, state__in=[DeploymentState.PENDING, DeploymentState.STARTING, DeploymentState.READY]
    ).count()


def replica_counts(deployment: Deployment) -> dict[str, int]:
    rows = deployment.replica_set.values("state").annotate(n=Count("id"))
    return {row["state"]: row["n"] for row in rows} | {"total": deployment.replica_set.count()}


def deployment_has_chat_template(deployment: Deployment) -> bool | None:
    """Whether the deployed checkpoint's tokenizer has a chat template (None: neither its files nor its base
    model's are on this host). Without one, a chat of one user message is sent as its bare text
    (gpu_jobs.serving.chat_template). Training keeps the base model's tokenizer, so the base model answers
    for a checkpoint whose files live on another host; the tiny family has none."""
    from gpu_jobs.memory import model_folder
    from gpu_jobs.model_store import TINY, TINY_LONG

    found = folder_has_chat_template(deployment.checkpoint.location)
    if found is not None:
        return found
    checkpoint = deployment.checkpoint
    base = (checkpoint.lineage or {}).get("base_model") or (checkpoint.job.spec or {}).get("model")
    if base in (TINY, TINY_LONG):
        return False
    folder = model_folder(base, store=settings.MODEL_STORE) if isinstance(base, str) and base else None
    return folder_has_chat_template(folder) if folder is not None else None
