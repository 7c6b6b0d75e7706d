"""The job spec at launch, through REST and the launch form: several dataset versions with domain weights,
verifiers routed by domain, the model store, and every bad spec refused with its field named.

Named users: owner (owner of team Core), outsider (owner of team Rivals).
"""

import json
import os
from pathlib import Path

import pytest
from django.urls import reverse

from anneal.datasets.services import dataset_version_create_from_rows
from anneal.training.limits import LIMIT_FIELDS
from anneal.training.models import Job, JobDataset
from anneal.verifiers.services import verifier_create
from gpu_jobs.spec import SETTING_NAMES
from tests.world import api_client

pytestmark = pytest.mark.django_db

MODEL_STORE = Path(os.environ.get("ANNEAL_TEST_MODEL_STORE", "/tmp/anneal-test-models"))

SUMS = [{"prompt": f"{a}+{b}=", "answer": str(a + b), "domain": "add"} for a, b in [(1, 2), (3, 4)] * 4]
DIFFS = [{"prompt": f"{a}-{b}=", "answer": str(a - b), "domain": "sub"} for a, b in [(9, 2), (7, 4)] * 4]
PLAIN = [{"prompt": f"{a}*{b}=", "answer": str(a * b)} for a, b in [(2, 2), (3, 3)] * 4]


@pytest.fixture
def world(world, settings, tmp_path) -> dict:
    """The shared world (tests/world.py) with Core's versions sums (domain add), diffs (sub) and plain (no
    domain), its verifiers exact and numeric, and a version and verifier of Rivals; verifiers by version id."""
    settings.MODEL_STORE = tmp_path / "models"
    settings.MODEL_ALLOW_HUB = False
    core, owner, rivals, outsider = world["core"], world["owner"], world["rivals"], world["outsider"]

    def version(team, user, name, rows):
        return dataset_version_create_from_rows(team=team, user=user, name=name, rows=rows)

    def verifier(team, user, name):
        made = verifier_create(team=team, user=user, name=name, spec={"type": "exact_match"})
        return made.latest_version.id

    return {
        **world,
        "sums": version(core, owner, "sums", SUMS),
        "diffs": version(core, owner, "diffs", DIFFS),
        "plain": version(core, owner, "plain", PLAIN),
        "exact": verifier(core, owner, "exact"),
        "numeric": verifier(core, owner, "numeric"),
        "rival_verifier": verifier(rivals, outsider, "theirs"),
        "rival_version": version(rivals, outsider, "theirs", SUMS),
    }


def post_job(world, **overrides):
    """POST /api/v1/jobs as the owner: the mix of sums and diffs, with ``overrides``."""
    body = {
        "name": "mix",
        "dataset_versions": [world["sums"].id, world["diffs"].id],
        "domain_weights": {"add": 0.7, "sub": 0.3},
        "verifiers": [
            {"verifier_version": world["exact"], "weight": 1, "domains": ["add"]},
            {"verifier_version": world["numeric"], "weight": 1, "domains": ["sub"]},
        ],
        "params": {"max_steps": 2, "prompts_per_step": 2, "num_generations": 2},
    }
    body.update(overrides)
    return api_client(world["owner"]).post("/api/v1/jobs", body, format="json")


def error_fields(response) -> list[str]:
    assert response.status_code == 400, response.json()
    return [error["field"] for error in response.json()["errors"]]


def test_a_job_mixes_versions_with_domain_weights_and_routed_verifiers(world):
    response = post_job(world)
    assert response.status_code == 201, response.json()
    job = Job.objects.get(pk=response.json()["id"])
    assert job.spec["dataset_versions"] == [world["sums"].id, world["diffs"].id]
    assert job.spec["domain_weights"] == {"add": 0.7, "sub": 0.3}
    assert job.spec["domain_rows"] == {"add": 8, "sub": 8}
    assert [v.get("domains") for v in job.spec["verifiers"]] == [["add"], ["sub"]]
    uses = list(JobDataset.objects.filter(job=job).order_by("position"))
    assert [u.dataset_version_id for u in uses] == [world["sums"].id, world["diffs"].id]
    assert job.dataset_version_id == world["sums"].id
    # Every version the job mixes is kept for reproducibility: deleting the second answers 409.
    deleted = api_client(world["owner"]).delete(f"/api/v1/datasets/versions/{world['diffs'].id}")
    assert deleted.status_code == 409


def test_the_training_process_reads_every_version_of_the_job_in_order(world):
    from workers.job_child import _train_rows

    job = Job.objects.get(pk=post_job(world).json()["id"])
    rows = _train_rows(job)
    assert [row["prompt"] for row in rows] == [r["prompt"] for r in SUMS + DIFFS]


@pytest.mark.parametrize(
    ("overrides", "field", "words"),
    [
        ({"domain_weights": {"add": 0.7, "sub": 0.7}}, "domain_weights", "sum to 1"),
        ({"domain_weights": {"add": 1.5, "sub": -0.5}}, "domain_weights.sub", ">= 0"),
        ({"domain_weights": {"add": 0.5, "sub": 0.25, "mul": 0.25}}, "domain_weights.mul", "no row"),
        ({"domain_weights": {"add": 1.0}}, "domain_weights", "sub"),
        ({"params": {"model": "no-such-model"}}, "params.model", "available: tiny"),
        ({"params": {"model": "HuggingFaceTB/SmolLM2-135M"}}, "params.model", "ANNEAL_ALLOW_HUB"),
        ({"params": {"num_generations": 4, "batch_size": 6}}, "params.batch_size", "multiple of 4"),
        ({"params": {"algorithm": "ppo"}}, "params.algorithm", "grpo, rloo"),
        ({"params": {"lr_scheduler_type": "step"}}, "params.lr_scheduler_type", "cosine"),
        ({"params": {"lora_dropout": 1.0}}, "params.lora_dropout", "below 1"),
        ({"dataset_versions": [10**6]}, "dataset_versions[0]", "no dataset version"),
        # Past a 32-bit column: was a database error (a 500), from the API and the launch form alike.
        ({"params": {"max_steps": 10**30}}, "params.max_steps", "at most 2147483647"),
        ({"verifiers": [{"verifier_version": "exact", "weight": 1}]}, "verifiers[0].verifier_version", "id"),
    ],
)
def test_bad_specs_are_refused_with_the_field_named(world, overrides, field, words):
    response = post_job(world, **overrides)
    assert field in error_fields(response)
    assert words in response.content.decode()
    assert not Job.objects.exists()


WRONG_VALUES = [None, "x", "", -1, 1.5, 10**30, -(10**30), 1e308, True, [], {}, [1, "a"], {"a": None}]


def test_no_wrong_value_in_any_setting_or_verifier_choice_is_a_server_error(world):
    # Every setting the launch takes, and each key of a verifier choice, given values of the wrong type or
    # size: each is accepted (a value the setting allows) or refused with a 400 naming its field, never a 500.
    client = api_client(world["owner"])
    client.raise_request_exception = False
    base = {
        "dataset_version": world["sums"].id,
        "verifiers": [{"verifier_version": world["exact"], "weight": 1}],
        "params": {"max_steps": 2},
    }
    refused = 0
    for where in [
        *(("params", name) for name in (*SETTING_NAMES, *LIMIT_FIELDS)),
        *(("verifier", key) for key in ("verifier_version", "weight", "domains")),
    ]:
        for value in WRONG_VALUES:
            body = json.loads(json.dumps(base))
            (body["params"] if where[0] == "params" else body["verifiers"][0])[where[1]] = value
            response = client.post("/api/v1/jobs/estimate", body, format="json")
            assert response.status_code in (200, 400), (where, value, response.status_code)
            if response.status_code == 400:
                refused += 1
                assert response.json()["errors"][0]["field"], (where, value)
    assert refused > 300


def test_a_verifier_or_version_of_another_team_is_refused(world):
    theirs = {"verifier_version": world["rival_verifier"], "weight": 1}
    response = post_job(world, verifiers=[theirs])
    assert error_fields(response) == ["verifiers[0].verifier_version"]
    response = post_job(world, dataset_versions=[world["sums"].id, world["rival_version"].id])
    assert error_fields(response) == ["dataset_versions[1]"]
    assert not Job.objects.exists()


def test_a_domain_without_a_verifier_is_refused(world):
    only_add = [{"verifier_version": world["exact"], "weight": 1, "domains": ["add"]}]
    response = post_job(world, verifiers=only_add)
    assert error_fields(response) == ["verifiers"]
    assert "sub" in response.json()["errors"][0]["message"]
    # A verifier routed to a domain no row has is named too.
    wrong = [{"verifier_version": world["exact"], "weight": 1, "domains": ["add", "mull"]}]
    response = post_job(world, verifiers=wrong + [{"verifier_version": world["numeric"], "weight": 1}])
    assert error_fields(response) == ["verifiers[0].domains"]


def test_rows_without_a_domain_are_the_all_domain(world):
    response = post_job(
        world,
        dataset_versions=[world["sums"].id, world["plain"].id],
        domain_weights={"add": 0.5, "all": 0.5},
        verifiers=[{"verifier_version": world["exact"], "weight": 1}],
    )
    assert response.status_code == 201, response.json()
    assert Job.objects.get().spec["domain_rows"] == {"add": 8, "all": 8}


def test_hub_ids_are_accepted_only_where_the_host_reaches_a_hub(world, settings):
    settings.MODEL_ALLOW_HUB = True
    response = post_job(world, params={"model": "HuggingFaceTB/SmolLM2-135M", "max_steps": 1})
    assert response.status_code == 201, response.json()


def test_models_and_spec_fields_are_listed(world):
    client = api_client(world["owner"])
    models = client.get("/api/v1/models").json()
    names = [m["name"] for m in models["results"]]
    assert names[:3] == ["tiny", "tiny-long", "smollm2-135m-instruct"] and models["hub_ids_allowed"] is False
    spec = client.get("/api/v1/jobs/spec").json()
    by_name = {f["name"]: f for f in spec["params"]}
    assert by_name["algorithm"]["choices"] == ["grpo", "rloo"]
    assert by_name["loss_type"]["choices"][:3] == ["grpo", "dr_grpo", "dapo"]
    assert by_name["lr_scheduler_type"]["choices"] == ["constant", "linear", "cosine"]
    for name in ("lora_rank", "batch_size", "warmup_steps", "profile_k", "adaptive_sampling", "eval_steps"):
        assert by_name[name]["help"], name
    assert "domain_weights" not in by_name  # a top-level field of the launch, not a setting


def test_the_launch_form_mixes_versions_and_names_bad_fields(
    client, world, django_capture_on_commit_callbacks
):
    client.force_login(world["owner"])
    page = client.get(reverse("job-new")).content.decode()
    for name in ("extra_dataset_versions", "domain_weights", f"domains_{world['exact']}", "p_algorithm"):
        assert f'name="{name}"' in page, name
    assert 'value="smollm2-135m-instruct"' in page and 'value="rloo"' in page
    fields = {
        "name": "mixed from the page",
        "dataset_version": world["sums"].pk,
        "extra_dataset_versions": [world["diffs"].pk],
        "domain_weights": "add = 0.5\nsub = 0.6",
        f"use_{world['exact']}": "on",
        f"weight_{world['exact']}": "1",
        f"domains_{world['exact']}": "add",
        "p_max_steps": 2,
    }
    bad = client.post(reverse("job-new"), fields)
    assert bad.status_code == 200 and not Job.objects.exists()
    page = bad.content.decode()
    weights = page[page.index('id="field-domain_weights"') :]
    assert "sum to 1" in weights[: weights.index("</div>")]
    fields["domain_weights"] = "add = 0.5\nsub = 0.5"
    bad = client.post(reverse("job-new"), fields)
    assert bad.status_code == 200 and "sub" in bad.content.decode() and not Job.objects.exists()
    fields[f"use_{world['numeric']}"] = "on"
    fields[f"domains_{world['numeric']}"] = "sub"
    with django_capture_on_commit_callbacks(execute=False):
        response = client.post(reverse("job-new"), fields)
    assert response.status_code == 302, response.content.decode()[:2000]
    job = Job.objects.get()
    assert job.spec["dataset_versions"] == [world["sums"].pk, world["diffs"].pk]
    assert job.spec["domain_weights"] == {"add": 0.5, "sub": 0.5}
    assert {v["name"]: v.get("domains") for v in job.spec["verifiers"]} == {
        "exact": ["add"],
        "numeric": ["sub"],
    }


def test_a_batch_size_freezes_the_prompts_per_step_it_means(world):
    response = post_job(
        world, params={"num_generations": 4, "batch_size": 8, "algorithm": "rloo", "lora_rank": 4}
    )
    assert response.status_code == 201, response.json()
    spec = Job.objects.get().spec
    assert spec["prompts_per_step"] == 2 and spec["batch_size"] == 8
    assert spec["algorithm"] == "rloo" and spec["lora_rank"] == 4 and spec["lr_scheduler_type"] == "constant"


@pytest.mark.django_db(transaction=True)
def test_the_training_process_runs_a_mixed_job_as_launched(world, settings, tmp_path):
    """The frozen spec reaches the engine: rows of both versions, verifiers routed by domain, the weights."""
    from anneal.training.models import JobEvent
    from anneal.training.services import job_claim
    from workers.job_child import run

    settings.MODEL_STORE = MODEL_STORE
    settings.DATA_DIR = tmp_path  # the job's working folder: fresh, so nothing is resumed from another run
    settings.CHECKPOINT_DIR = tmp_path / "checkpoints"
    response = post_job(world, params={"max_steps": 1, "prompts_per_step": 4, "num_generations": 2})
    job = Job.objects.get(pk=response.json()["id"])
    assert job_claim(job_id=job.id, worker="test-worker") is not None  # as the gpu worker does
    run(job.id)
    metrics = [e.payload for e in JobEvent.objects.filter(job=job, kind="metric")]
    step = next(m for m in metrics if m.get("step") == 1 and "reward" in m)
    assert step["domain_weight/add"] == pytest.approx(0.7) and step["domain_weight/sub"] == pytest.approx(0.3)
    rollouts = [e.payload for e in JobEvent.objects.filter(job=job, kind="rollout")]
    assert rollouts
    for rollout in rollouts:
        assert set(rollout["parts"]) == {"add": {"exact"}, "sub": {"numeric"}}[rollout["domain"]]
