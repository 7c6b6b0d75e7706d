"""Writes for deployments: create, stop, switch tier, the regression gate and its override, replica states
(driven by the `serve` worker), API keys, budgets and metered usage. Keyword-only and atomic.

Past 400 lines: the writes of deployments, replicas, keys and budgets; budgets and keys are the next to move
to modules of their own.
"""

import secrets
from decimal import Decimal
from pathlib import Path

from django.conf import settings
from django.contrib.auth.models import User
from django.core.exceptions import PermissionDenied
from django.db import IntegrityError, transaction
from django.db.models import F, Q
from django.utils import timezone

from anneal.accounts.models import Role, Team
from anneal.accounts.selectors import role_in
from anneal.accounts.services import audit
from anneal.deployments.models import (
    Deployment,
    DeploymentKey,
    DeploymentState,
    GateResult,
    Replica,
    ReplicaState,
    TeamBudget,
    Tier,
    UsageRecord,
    key_generate,
    key_hash,
)
from anneal.errors import InputError, without_nul
from anneal.tasks import DEPLOYMENT_PREPARE, REPLICA_SERVE, enqueue
from anneal.training.models import Checkpoint

MAX_REPLICAS = 4
MAX_CONCURRENCY = 64
LIVE_REPLICA_STATES = (ReplicaState.STARTING, ReplicaState.READY)
MAX_REPLACEMENTS_PER_HOUR = 3  # replicas of one deployment lost with their worker and replaced, per hour
MAX_PREPARE_ATTEMPTS = 3  # preparations of one deployment claimed, the last ones lost with their worker
REPLACED = "; replaced"  # how the error of a replica lost with its worker and replaced ends


def _check_shape(*, tier: str, replicas: int, max_concurrency: int) -> None:
    if tier not in Tier.values:
        raise InputError(f"unknown tier {tier!r}: choose one of {', '.join(Tier.values)}", field="tier")
    if not 1 <= replicas <= MAX_REPLICAS:
        raise InputError(f"must be between 1 and {MAX_REPLICAS}, got {replicas}", field="replicas")
    if not 1 <= max_concurrency <= MAX_CONCURRENCY:
        raise InputError(
            f"must be between 1 and {MAX_CONCURRENCY}, got {max_concurrency}", field="max_concurrency"
        )


@transaction.atomic
def deployment_create(
    *,
    team: Team,
    user: User,
    checkpoint_id: int,
    name: str,
    tier: str = Tier.STANDARD,
    replicas: int = 1,
    max_concurrency: int = 4,
) -> Deployment:
    """A pending deployment of one of the team's checkpoints; a worker runs the gate, then starts replicas."""
    checkpoint = Checkpoint.objects.filter(pk=checkpoint_id, job__team=team).select_related("job").first()
    if checkpoint is None:
        raise InputError(f"no checkpoint with id {checkpoint_id} in team '{team.name}'", field="checkpoint")
    if not Path(checkpoint.location).is_dir():
        raise InputError(
            # Named by job and step: the server path is the platform's business (the admin shows it).
            f"the files of checkpoint step {checkpoint.step} of job #{checkpoint.job_id} are gone: "
            "it cannot be served; deploy another checkpoint of the job",
            field="checkpoint",
        )
    if not (name or "").strip():
        job_name = "-".join((checkpoint.job.name or "job").split())[:150]
        name = f"{job_name}-{checkpoint.job_id}-step{checkpoint.step}"
    name = name.strip()
    if len(name) > 200 or any(c.isspace() for c in name):
        raise InputError(
            "use up to 200 characters without spaces: it is the `model` clients send", field="name"
        )
    _check_shape(tier=tier, replicas=replicas, max_concurrency=max_concurrency)
    try:
        with transaction.atomic():
            deployment = Deployment.objects.create(
                team=team,
                checkpoint=checkpoint,
                name=name,
                tier=tier,
                replicas=replicas,
                max_concurrency=max_concurrency,
                created_by=user,
            )
    except IntegrityError:
        raise InputError(
            f"team '{team.name}' already has a deployment named '{name}'", field="name"
        ) from None
    audit(
        team=team, user=user, action="deployment.create", obj=deployment, tier=tier, checkpoint=checkpoint.pk
    )
    enqueue(DEPLOYMENT_PREPARE, deployment.pk)
    return deployment


def deployment_claim_prepare(*, deployment_id: int) -> bool:
    """pending -> starting; False when another worker claimed it or it was stopped meanwhile."""
    return (
        Deployment.objects.filter(pk=deployment_id, state=DeploymentState.PENDING).update(
            state=DeploymentState.STARTING,
            error="",
            prepare_heartbeat_at=timezone.now(),
            prepare_attempts=F("prepare_attempts") + 1,
        )
        == 1
    )


def deployment_prepare_heartbeat(*, deployment_id: int) -> None:
    Deployment.objects.filter(pk=deployment_id, state=DeploymentState.STARTING).update(
        prepare_heartbeat_at=timezone.now()
    )


def deployments_reap_stale_prepares(*, timeout_s: int) -> int:
    """Deployments whose preparation was lost with its worker (starting, no replica yet, no heartbeat for
    `timeout_s`; its message is not redelivered before Redis's visibility timeout, and would find it claimed):
    each goes back to pending and is sent again, up to MAX_PREPARE_ATTEMPTS; past that it fails, with why."""
    cutoff = timezone.now() - timezone.timedelta(seconds=timeout_s)
    stale = (
        Deployment.objects.filter(state=DeploymentState.STARTING, replica_set__isnull=True)
        .filter(
            Q(prepare_heartbeat_at__lt=cutoff) | Q(prepare_heartbeat_at__isnull=True, created_at__lt=cutoff)
        )
        .values_list("pk", flat=True)
        .distinct()
    )
    for deployment_id in list(stale):
        deployment_prepare_lost(deployment_id=deployment_id, timeout_s=timeout_s)
    return len(stale)


@transaction.atomic
def deployment_prepare_lost(*, deployment_id: int, timeout_s: int) -> None:
    deployment = Deployment.objects.select_for_update().get(pk=deployment_id)
    if deployment.state != DeploymentState.STARTING or deployment.replica_set.exists():
        return  # it moved on meanwhile
    why = f"its preparation (the regression gate) stopped: no heartbeat from its worker for {timeout_s} s"
    if deployment.prepare_attempts >= MAX_PREPARE_ATTEMPTS:
        deployment_fail(deployment_id=deployment_id, error=f"{why}, {deployment.prepare_attempts} times")
        return
    Deployment.objects.filter(pk=deployment_id).update(
        state=DeploymentState.PENDING, error=f"{why}; started again"
    )
    enqueue(DEPLOYMENT_PREPARE, deployment_id)


@transaction.atomic
def gate_record(
    *, deployment: Deployment, passed: bool, max_drop: float, scores: list[dict], note: str
) -> None:
    GateResult.objects.create(
        deployment=deployment, passed=passed, max_drop=max_drop, scores=scores, note=note
    )
    if not passed:
        lines = "; ".join(
            f"{row['set']} {row['domain']}: {row['base']:.3f} -> {row['candidate']:.3f} (-{row['drop']:.3f})"
            for row in scores
            if row.get("blocked")
        )
        deployment_fail(
            deployment_id=deployment.pk,
            error=f"regression gate: a drop beyond {max_drop:.3f} against the base model ({lines}). "
            "An owner may override it.",
        )


@transaction.atomic
def replicas_spawn(*, deployment: Deployment, count: int, tier: str) -> list[Replica]:
    replicas = [Replica.objects.create(deployment=deployment, tier=tier) for _ in range(count)]
    for replica in replicas:
        enqueue(REPLICA_SERVE, replica.pk)
    return replicas


def deployment_fail(*, deployment_id: int, error: str) -> None:
    Deployment.objects.filter(pk=deployment_id).exclude(state=DeploymentState.STOPPED).update(
        state=DeploymentState.FAILED, error=without_nul(error[-4000:]), stopped_at=timezone.now()
    )


@transaction.atomic
def deployment_stop(*, deployment: Deployment, user: User | None) -> Deployment:
    """Drain every replica; the deployment is stopped once the last one has exited."""
    deployment = Deployment.objects.select_for_update().select_related("team").get(pk=deployment.pk)
    if deployment.state in (DeploymentState.STOPPED, DeploymentState.DRAINING):
        return deployment
    # Replicas no worker has picked up yet have no process to stop.
    deployment.replica_set.filter(state=ReplicaState.STARTING, worker="").update(
        state=ReplicaState.STOPPED, stopped_at=timezone.now()
    )
    live = deployment.replica_set.filter(state__in=LIVE_REPLICA_STATES).update(state=ReplicaState.DRAINING)
    draining = live or deployment.replica_set.filter(state=ReplicaState.DRAINING).exists()
    deployment.state = DeploymentState.DRAINING if draining else DeploymentState.STOPPED
    if not draining:
        deployment.stopped_at = timezone.now()
    deployment.save(update_fields=["state", "stopped_at"])
    audit(team=deployment.team, user=user, action="deployment.stop", obj=deployment)
    return deployment


@transaction.atomic
def deployment_switch_tier(*, deployment: Deployment, tier: str, user: User) -> Deployment:
    """Start replicas at the new tier; the old ones keep serving until a new one is ready, then drain."""
    deployment = Deployment.objects.select_for_update().select_related("team").get(pk=deployment.pk)
    _check_shape(tier=tier, replicas=deployment.replicas, max_concurrency=deployment.max_concurrency)
    if deployment.state not in (DeploymentState.READY, DeploymentState.STARTING):
        raise InputError(
            f"the deployment is {deployment.state}: only a starting or ready deployment switches tier",
            field="tier",
        )
    if tier == deployment.tier:
        raise InputError(f"the deployment already runs at the {tier} tier", field="tier")
    previous = deployment.tier
    deployment.tier = tier
    deployment.save(update_fields=["tier"])
    # Replicas of the old tier that never got going are not worth waiting for.
    deployment.replica_set.filter(state=ReplicaState.STARTING).exclude(tier=tier).update(
        state=ReplicaState.DRAINING
    )
    replicas_spawn(deployment=deployment, count=deployment.replicas, tier=tier)
    audit(
        team=deployment.team,
        user=user,
        action="deployment.switch_tier",
        obj=deployment,
        tier=tier,
        previous=previous,
    )
    return deployment


@transaction.atomic
def deployment_gate_override(*, deployment: Deployment, user: User, reason: str = "") -> Deployment:
    """An owner lets a deployment the gate blocked start anyway; audited with the numbers it overrode."""
    deployment = Deployment.objects.select_for_update().select_related("team").get(pk=deployment.pk)
    if role_in(user, deployment.team) != Role.OWNER:
        raise InputError("only an owner of the team may override the regression gate", field="override")
    gate = deployment.gate_results.first()
    if gate is None or gate.passed or gate.overridden_at is not None:
        raise InputError(
            "the regression gate did not block this deployment: nothing to override", field="override"
        )
    if deployment.state != DeploymentState.FAILED:
        raise InputError(f"the deployment is {deployment.state}, not blocked", field="override")
    gate.overridden_by, gate.overridden_at = user, timezone.now()
    gate.save(update_fields=["overridden_by", "overridden_at"])
    deployment.gate_overridden = True
    deployment.state, deployment.error, deployment.stopped_at = DeploymentState.PENDING, "", None
    deployment.save(update_fields=["gate_overridden", "state", "error", "stopped_at"])
    audit(
        team=deployment.team,
        user=user,
        action="deployment.gate_override",
        obj=deployment,
        reason=reason,
        max_drop=gate.max_drop,
        blocked=gate.blocking,
    )
    enqueue(DEPLOYMENT_PREPARE, deployment.pk)
    return deployment


# --- replica states, driven by workers/deploy.py ---------------------------------------------------------


def replica_claim(*, replica_id: int, worker: str) -> bool:
    return (
        Replica.objects.filter(pk=replica_id, state=ReplicaState.STARTING, worker="").update(
            worker=worker, heartbeat_at=timezone.now()
        )
        == 1
    )


def replica_credential_issue(*, replica_id: int) -> str:
    """A fresh credential for the replica's process, which it is handed at start; the platform derives the
    same one from the row whenever it calls the replica."""
    Replica.objects.filter(pk=replica_id).update(credential_salt=secrets.token_hex(32))
    return Replica.objects.get(pk=replica_id).credential


def replica_started(*, replica_id: int, host: str, port: int, pid: int) -> None:
    Replica.objects.filter(pk=replica_id).update(host=host, port=port, pid=pid, heartbeat_at=timezone.now())


@transaction.atomic
def replica_ready(*, replica_id: int) -> bool:
    """starting -> ready; the deployment turns ready and replicas of an older tier start draining."""
    now = timezone.now()
    if not Replica.objects.filter(pk=replica_id, state=ReplicaState.STARTING).update(
        state=ReplicaState.READY, ready_at=now, heartbeat_at=now
    ):
        return False
    replica = Replica.objects.select_related("deployment").get(pk=replica_id)
    deployment = replica.deployment
    Deployment.objects.filter(pk=deployment.pk, state=DeploymentState.STARTING).update(
        state=DeploymentState.READY, ready_at=now
    )
    if replica.tier == deployment.tier:
        deployment.replica_set.filter(state__in=LIVE_REPLICA_STATES).exclude(tier=deployment.tier).update(
            state=ReplicaState.DRAINING
        )
    return True


def replica_heartbeat(*, replica_id: int) -> None:
    Replica.objects.filter(pk=replica_id).update(heartbeat_at=timezone.now())


@transaction.atomic
def replica_finish(*, replica_id: int, error: str = "") -> None:
    """The replica's process is gone: stopped when asked to drain, failed (with why) otherwise. The
    deployment follows when no replica of it is left: stopped after a stop, failed after a crash."""
    replica = Replica.objects.select_for_update().select_related("deployment").get(pk=replica_id)
    failed = replica.state != ReplicaState.DRAINING
    replica.state = ReplicaState.FAILED if failed else ReplicaState.STOPPED
    replica.error = without_nul(error[-4000:]) if failed else ""  # a log tail: any byte
    replica.stopped_at = timezone.now()
    replica.save(update_fields=["state", "error", "stopped_at"])
    deployment = Deployment.objects.select_for_update().get(pk=replica.deployment_id)
    left = deployment.replica_set.filter(state__in=(*LIVE_REPLICA_STATES, ReplicaState.DRAINING)).exists()
    if left:
        return
    if deployment.state == DeploymentState.DRAINING:
        deployment.state, deployment.stopped_at = DeploymentState.STOPPED, timezone.now()
        deployment.save(update_fields=["state", "stopped_at"])
    elif failed and deployment.state in (DeploymentState.STARTING, DeploymentState.READY):
        deployment_fail(deployment_id=deployment.pk, error=f"replica {replica.pk} failed: {replica.error}")


@transaction.atomic
def replica_handover(*, replica_id: int) -> None:
    """The replica's worker is shutting down: the replica stops, and a replacement is queued for another
    `serve` worker while its deployment is still meant to serve."""
    replica = Replica.objects.select_for_update().select_related("deployment").get(pk=replica_id)
    deployment = replica.deployment
    replace = replica.state in LIVE_REPLICA_STATES and deployment.state in (
        DeploymentState.STARTING,
        DeploymentState.READY,
    )
    if replace:
        replicas_spawn(deployment=deployment, count=1, tier=replica.tier)
    Replica.objects.filter(pk=replica_id).update(state=ReplicaState.DRAINING)
    replica_finish(replica_id=replica_id)
    Replica.objects.filter(pk=replica_id).update(
        error="its serving worker shut down; replaced" if replace else ""
    )


def replicas_reap_stale(*, timeout_s: int) -> int:
    """Replicas whose supervising worker stopped heart-beating (it died, and its replica with it): each is
    replaced while its deployment is meant to serve (a restarted worker takes the replacement), failed
    otherwise."""
    cutoff = timezone.now() - timezone.timedelta(seconds=timeout_s)
    stale = Replica.objects.filter(
        state__in=(*LIVE_REPLICA_STATES, ReplicaState.DRAINING), heartbeat_at__lt=cutoff
    ).values_list("pk", flat=True)
    for replica_id in list(stale):
        replica_lost(replica_id=replica_id, why=f"no heartbeat from its serving worker for {timeout_s} s")
    return len(stale)


@transaction.atomic
def replica_lost(*, replica_id: int, why: str) -> None:
    """The replica's worker died with it. While its deployment is meant to serve, the replica fails and a
    replacement is queued for the next `serve` worker, up to MAX_REPLACEMENTS_PER_HOUR; past that (a worker
    that dies each time it serves this deployment) the deployment fails, with why."""
    replica = Replica.objects.select_for_update().select_related("deployment").get(pk=replica_id)
    deployment = replica.deployment
    recent = deployment.replica_set.filter(
        error__endswith=REPLACED, stopped_at__gte=timezone.now() - timezone.timedelta(hours=1)
    ).count()
    serving = deployment.state in (DeploymentState.STARTING, DeploymentState.READY)
    if replica.state not in LIVE_REPLICA_STATES or not serving or recent >= MAX_REPLACEMENTS_PER_HOUR:
        more = f" ({recent} replicas replaced in the last hour)" if serving and recent else ""
        replica_finish(replica_id=replica_id, error=why + more)
        return
    replicas_spawn(deployment=deployment, count=1, tier=replica.tier)
    Replica.objects.filter(pk=replica_id).update(
        state=ReplicaState.FAILED, error=f"{why}{REPLACED}", stopped_at=timezone.now()
    )


# --- keys, budgets and usage -------------------------------------------------------------------------------


@transaction.atomic
def deployment_key_create(
    *, team: Team, user: User, name: str, deployment: Deployment | None = None
) -> tuple[DeploymentKey, str]:
    """A new key (returned raw this once; only its hash is kept) for one deployment or the whole team."""
    name = (name or "").strip()
    if not name or len(name) > 100:
        raise InputError("give the key a name of 1 to 100 characters, e.g. 'backend'", field="name")
    if deployment is not None and deployment.team_id != team.pk:
        raise InputError("the deployment belongs to another team", field="deployment")
    raw = key_generate()
    key = DeploymentKey.objects.create(
        team=team,
        deployment=deployment,
        name=name,
        key_hash=key_hash(raw),
        key_hint=raw[:14],
        created_by=user,
    )
    audit(team=team, user=user, action="deployment_key.create", obj=key, name=name)
    return key, raw


@transaction.atomic
def deployment_key_revoke(*, key: DeploymentKey, user: User) -> DeploymentKey:
    if key.revoked_at is None:
        key.revoked_at = timezone.now()
        key.save(update_fields=["revoked_at"])
        audit(team=key.team, user=user, action="deployment_key.revoke", obj=key)
    return key


@transaction.atomic
def team_budget_set(*, team: Team, user: User, monthly_cap_usd: Decimal | None) -> TeamBudget:
    """Set the team's monthly spending cap. Owners only (PermissionDenied, a 403 in API and pages alike):
    the cap is what keeps an expert's or a leaked key's calls from spending without bound."""
    role = role_in(user, team)
    if role != Role.OWNER:
        raise PermissionDenied(
            f"Only an owner of team '{team.name}' sets its monthly spending cap; your role is "
            f"{role or 'none'}. Ask an owner to change it."
        )
    if monthly_cap_usd is not None and monthly_cap_usd < 0:
        raise InputError("must be 0 or more (empty: no cap)", field="monthly_cap_usd")
    column = TeamBudget._meta.get_field("monthly_cap_usd")
    largest = Decimal(10) ** (column.max_digits - column.decimal_places)
    if monthly_cap_usd is not None and monthly_cap_usd >= largest:
        raise InputError(f"must be below {largest:,} USD (empty: no cap)", field="monthly_cap_usd")
    budget, _ = TeamBudget.objects.update_or_create(team=team, defaults={"monthly_cap_usd": monthly_cap_usd})
    audit(
        team=team,
        user=user,
        action="deployment.budget_set",
        obj=budget,
        monthly_cap_usd=None if monthly_cap_usd is None else str(monthly_cap_usd),
    )
    return budget


def price_per_mtok(tier: str) -> Decimal:
    return settings.DEPLOY_PRICE_PER_MTOK[tier]


def usage_cost(*, tier: str, prompt_tokens: int, completion_tokens: int) -> Decimal:
    return price_per_mtok(tier) * Decimal(prompt_tokens + completion_tokens) / Decimal(1_000_000)


def usage_record(
    *,
    deployment: Deployment,
    key: DeploymentKey | None,
    tier: str,
    endpoint: str,
    stream: bool,
    prompt_tokens: int,
    completion_tokens: int,
    latency_ms: int,
    status_code: int = 200,
    batch_id: int | None = None,
) -> UsageRecord:
    record = UsageRecord.objects.create(
        team_id=deployment.team_id,
        deployment=deployment,
        key=key,
        batch_id=batch_id,
        tier=tier,
        endpoint=endpoint,
        stream=stream,
        prompt_tokens=max(0, int(prompt_tokens)),
        completion_tokens=max(0, int(completion_tokens)),
        cost_usd=usage_cost(tier=tier, prompt_tokens=prompt_tokens, completion_tokens=completion_tokens),
        latency_ms=max(0, int(latency_ms)),
        status_code=status_code,
    )
    if key is not None:
        DeploymentKey.objects.filter(pk=key.pk).update(last_used_at=timezone.now())
    return record
