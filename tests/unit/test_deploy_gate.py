"""The regression gate's evaluation on real models: the tiny model against itself passes; a checkpoint whose
weights were scrambled is blocked, with the numbers for each set. And the beat reaper fails a replica whose
worker went silent."""

import os
from pathlib import Path

import pytest

from anneal.deployments.gate import gate_decide
from gpu_jobs.addition import addition_rows
from gpu_jobs.tiny_model import ensure_tiny_model

MODEL_STORE = Path(os.environ.get("ANNEAL_TEST_MODEL_STORE", "/tmp/anneal-test-models"))


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    base = ensure_tiny_model(MODEL_STORE)
    broken = tmp_path_factory.mktemp("broken")
    model = AutoModelForCausalLM.from_pretrained(base)
    torch.manual_seed(0)
    with torch.no_grad():
        for parameter in model.parameters():
            parameter.copy_(torch.randn_like(parameter) * 0.02)
    model.save_pretrained(broken)
    AutoTokenizer.from_pretrained(base).save_pretrained(broken)
    return {"base": str(base), "broken": str(broken)}


def scores(models, candidate: str) -> list[dict]:
    from workers.deploy_gate import evaluate_model

    inputs = {
        "held_out": [{**row, "domain": "sums"} for row in addition_rows(n=16, seed=3, split="test")],
        "verifiers": [{"name": "exact", "spec": {"type": "exact_match"}, "weight": 1.0}],
        "general": addition_rows(n=24, seed=7, split="test"),
        "max_new_tokens": 4,
    }
    base = evaluate_model(models["base"], inputs, sandbox=None)
    other = evaluate_model(models[candidate], inputs, sandbox=None)
    return [
        {"set": s, "domain": d, "base": base[(s, d)], "candidate": other[(s, d)], "rows": 0} for s, d in base
    ]


def test_the_base_model_against_itself_passes(models):
    passed, rows = gate_decide(scores(models, "base"), max_drop=0.05)
    assert passed and {(r["set"], r["domain"]) for r in rows} == {
        ("held-out", "sums"),
        ("held-out", "mean"),
        ("general", "addition"),
    }
    assert all(r["drop"] == 0 for r in rows)
    assert next(r for r in rows if r["set"] == "general")["base"] > 0.2  # the tiny model knows some sums


def test_a_scrambled_checkpoint_is_blocked_with_its_numbers(models):
    passed, rows = gate_decide(scores(models, "broken"), max_drop=0.05)
    general = next(r for r in rows if r["set"] == "general")
    assert not passed and general["blocked"] and general["candidate"] == 0
    assert general["drop"] == pytest.approx(general["base"], abs=1e-6)


@pytest.mark.django_db
def test_the_reaper_replaces_a_replica_whose_worker_went_silent_then_fails_a_crash_loop(world, tmp_path):
    from django.utils import timezone

    from anneal.deployments.models import Deployment, Replica
    from anneal.deployments.services import MAX_REPLACEMENTS_PER_HOUR, replicas_reap_stale
    from tests.world import checkpoint_create

    checkpoint = checkpoint_create(team=world["core"], location=tmp_path / "ckpt", step=1)
    deployment = Deployment.objects.create(team=world["core"], checkpoint=checkpoint, name="d", state="ready")
    long_ago = timezone.now() - timezone.timedelta(hours=1)
    silent = Replica.objects.create(
        deployment=deployment, tier="standard", state="ready", heartbeat_at=long_ago
    )
    assert replicas_reap_stale(timeout_s=60) == 1
    silent.refresh_from_db()
    deployment.refresh_from_db()
    assert (
        silent.state == "failed" and silent.error == "no heartbeat from its serving worker for 60 s; replaced"
    )
    assert deployment.state == "ready", "the deployment failed although a restarted worker can serve it"
    (replacement,) = deployment.replica_set.filter(state="starting")
    assert replacement.tier == "standard" and replacement.worker == ""
    # Each replacement's worker dies in turn: after MAX_REPLACEMENTS_PER_HOUR the deployment fails, with why.
    for _ in range(MAX_REPLACEMENTS_PER_HOUR):
        deployment.replica_set.filter(state="starting").update(state="ready", heartbeat_at=long_ago)
        replicas_reap_stale(timeout_s=60)
    deployment.refresh_from_db()
    assert deployment.state == "failed"
    assert (
        "no heartbeat" in deployment.error
        and f"({MAX_REPLACEMENTS_PER_HOUR} replicas replaced" in deployment.error
    )
    assert not deployment.replica_set.filter(state__in=("starting", "ready")).exists()


@pytest.mark.django_db
def test_the_reaper_fails_a_silent_replica_of_a_deployment_no_longer_serving(world, tmp_path):
    from django.utils import timezone

    from anneal.deployments.models import Deployment, Replica
    from anneal.deployments.services import replicas_reap_stale
    from tests.world import checkpoint_create

    checkpoint = checkpoint_create(team=world["core"], location=tmp_path / "ckpt", step=1)
    deployment = Deployment.objects.create(
        team=world["core"], checkpoint=checkpoint, name="d", state="draining"
    )
    silent = Replica.objects.create(
        deployment=deployment,
        tier="standard",
        state="draining",
        heartbeat_at=timezone.now() - timezone.timedelta(hours=1),
    )
    assert replicas_reap_stale(timeout_s=60) == 1
    silent.refresh_from_db()
    deployment.refresh_from_db()
    assert silent.state == "stopped" and deployment.state == "stopped"
    assert not deployment.replica_set.filter(state="starting").exists()


@pytest.mark.django_db
def test_a_preparation_lost_with_its_worker_is_started_again_then_fails_with_why(
    world, tmp_path, django_capture_on_commit_callbacks
):
    from django.utils import timezone

    from anneal.deployments.models import Deployment, Replica
    from anneal.deployments.services import (
        MAX_PREPARE_ATTEMPTS,
        deployment_claim_prepare,
        deployments_reap_stale_prepares,
    )
    from tests.world import checkpoint_create

    checkpoint = checkpoint_create(team=world["core"], location=tmp_path / "ckpt", step=1)
    lost = Deployment.objects.create(team=world["core"], checkpoint=checkpoint, name="lost")
    alive = Deployment.objects.create(team=world["core"], checkpoint=checkpoint, name="alive")
    serving = Deployment.objects.create(team=world["core"], checkpoint=checkpoint, name="serving")
    for deployment in (lost, alive, serving):
        assert deployment_claim_prepare(deployment_id=deployment.pk)
    Replica.objects.create(deployment=serving, tier="standard", state="starting")
    long_ago = timezone.now() - timezone.timedelta(hours=1)
    Deployment.objects.filter(pk__in=(lost.pk, serving.pk)).update(prepare_heartbeat_at=long_ago)

    with django_capture_on_commit_callbacks() as sent:
        assert deployments_reap_stale_prepares(timeout_s=60) == 1
    lost.refresh_from_db()
    assert lost.state == "pending" and lost.prepare_attempts == 1 and len(sent) == 1
    assert lost.error == (
        "its preparation (the regression gate) stopped: no heartbeat from its worker for 60 s; started again"
    )
    assert Deployment.objects.get(pk=alive.pk).state == "starting", "a preparation heart-beating was touched"
    assert Deployment.objects.get(pk=serving.pk).state == "starting", "a deployment with replicas was touched"
    # Each new preparation's worker dies in turn: after MAX_PREPARE_ATTEMPTS the deployment fails, with why.
    for _ in range(2, MAX_PREPARE_ATTEMPTS + 1):
        assert deployment_claim_prepare(deployment_id=lost.pk)
        Deployment.objects.filter(pk=lost.pk).update(prepare_heartbeat_at=long_ago)
        with django_capture_on_commit_callbacks() as sent:
            deployments_reap_stale_prepares(timeout_s=60)
    lost.refresh_from_db()
    assert lost.prepare_attempts == MAX_PREPARE_ATTEMPTS and not sent
    assert lost.state == "failed" and lost.error.endswith(f"for 60 s, {MAX_PREPARE_ATTEMPTS} times")
