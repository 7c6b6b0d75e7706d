"""The long-context path end to end on the CPU: a long-context pack → a job on the tiny long-context model
with max_prompt_length and a length curriculum, trained two steps by the training child's own code →
held-out scores by prompt length on the job page and the dashboard → the checkpoint through the deployment
regression gate, which fits the held-out prompts as training did."""

import json

import pytest

from anneal.datasets.pack_services import long_context_pack_create
from anneal.deployments.gate import gate_decide
from anneal.deployments.models import Deployment
from anneal.deployments.services import deployment_claim_prepare, deployment_create, gate_record
from anneal.training.length_results import curriculum_progress, length_evaluation
from anneal.training.models import Checkpoint
from anneal.training.services import job_claim, job_launch
from tests.unit.test_dashboards import dash_update
from tests.world import page_client

# The reward functions report from worker threads, each with its own database connection: the job's rows
# must be committed for them to see it.
pytestmark = pytest.mark.django_db(transaction=True)

PARAMS = {
    "model": "tiny-long",
    "max_prompt_length": 400,
    "overflow_policy": "truncate_left",
    "length_curriculum": "300:steps=0.5, 600",
    "max_steps": 2,
    "num_generations": 2,
    "prompts_per_step": 2,
    "max_completion_length": 8,
    # The gate then compares two nearly equal models: it passes deterministically.
    "learning_rate": 1e-9,
}


@pytest.fixture
def trained(world, settings, tmp_path):
    from workers.job_child import run

    team, owner = world["core"], world["owner"]
    train = long_context_pack_create(
        team=team, user=owner, name="needles", families=["niah_single"], lengths=[256, 512], size=2
    )
    held_out = long_context_pack_create(
        team=team, user=owner, name="held", families=["niah_single"], lengths=[256, 512], size=2, seed=1
    )
    job = job_launch(
        team=team,
        user=owner,
        name="long",
        dataset_version_id=train.version.pk,
        eval_dataset_version_id=held_out.version.pk,
        verifiers=[{"verifier_version": train.verifiers[0].latest_version.pk, "weight": 1.0}],
        params=PARAMS,
    )
    assert job.spec["prompt_tokens"]["truncated"] == 2 and job.spec["prompt_tokens"]["longest"] == 400
    assert job_claim(job_id=job.pk, worker="test") == 1
    run(job.pk)  # what `python -m workers.job_child` runs: the job's events and checkpoints in the database
    return job


def test_pack_to_job_to_evaluation_by_length_to_the_deploy_gate(trained, world, tmp_path):
    job = trained
    # The curriculum started in stage 1 and moved to stage 2 after its share (1 of 2 steps).
    curriculum = curriculum_progress(job=job)
    assert [s["rows"] for s in curriculum["stages"]] == [2, 2]
    assert curriculum["current"] == 2 and curriculum["moves"][0]["step"] == 1
    stages = [
        p["curriculum/stage"]
        for p in job.events.filter(payload__has_key="curriculum/stage").values_list("payload", flat=True)
    ]
    assert stages == [1.0, 2.0]
    # Held-out scores by length: the curriculum's buckets (300 tokens, then up to the longest), base and end.
    evaluation = length_evaluation(job=job)
    assert evaluation["bounds"] == [300, 600] and evaluation["rows"] == [2, 2]
    assert evaluation["steps"] == [0, 2] and evaluation["domains"] == ["mean", "niah_single"]
    assert all(0 <= v <= 1 for row in evaluation["scores"]["mean"] for v in row)

    page = page_client(world["owner"]).get(f"/jobs/{job.pk}/").content.decode()
    assert (
        "Length curriculum" in page and "stage 2 of 2" in page and "Held-out score by prompt length" in page
    )
    data = json.loads(page.split('id="job-length-data" type="application/json">')[1].split("</script>")[0])
    assert data["evaluation"]["bounds"] == [300, 600]
    # Another team sees none of it.
    assert page_client(world["outsider"]).get(f"/jobs/{job.pk}/").status_code == 404

    # The evaluation dashboard draws the same buckets, base against the last evaluation, for the team only.
    inputs = [
        {"id": "job", "property": "value", "value": job.pk},
        {"id": "domain", "property": "value", "value": "niah_single"},
    ]
    figure = dash_update(page_client(world["owner"]), "EvaluationByLength", "by-length.figure", inputs)
    traces = figure["by-length"]["figure"]["data"]
    assert [t["name"] for t in traces] == ["base (step 0)", "step 2"] and traces[0]["x"] == ["≤ 300", "≤ 600"]
    hidden = dash_update(page_client(world["outsider"]), "EvaluationByLength", "by-length.figure", inputs)
    assert hidden["by-length"]["figure"]["data"] == []

    from workers.deploy_gate import run as gate_run

    checkpoint = Checkpoint.objects.filter(job=job).order_by("-step").first()
    assert checkpoint.step == 2
    deployment = deployment_create(
        team=world["core"], user=world["owner"], checkpoint_id=checkpoint.pk, name="long"
    )
    assert deployment_claim_prepare(deployment_id=deployment.pk)
    out = tmp_path / "gate.json"
    gate_run(deployment.pk, out)
    outcome = json.loads(out.read_text())
    passed, scores = gate_decide(outcome["scores"], max_drop=0.05)
    gate_record(deployment=deployment, passed=passed, max_drop=0.05, scores=scores, note=outcome["note"])
    assert passed
    assert {(row["set"], row["domain"]) for row in scores} >= {
        ("held-out", "niah_single"),
        ("general", "addition"),
    }
    assert Deployment.objects.get(pk=deployment.pk).gate_results.get().passed is True
