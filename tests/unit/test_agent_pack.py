"""The repo-fix task pack becomes a dataset version that an environment job accepts as its rows."""

import pytest

from anneal.datasets.ingest import read_rows
from anneal.datasets.models import DatasetVersion
from gpu_jobs.agent.taskpack import TASKS
from gpu_jobs.config import GRPOJobConfig
from tests.world import api_client


@pytest.fixture
def api(world):
    return api_client(world["owner"])


@pytest.mark.django_db
def test_the_pack_becomes_a_version_whose_rows_start_episodes(api, tmp_path):
    made = api.post("/api/v1/datasets/packs/agent", {"name": "repo-fix"}, format="json")
    assert made.status_code == 201, made.content
    version = DatasetVersion.objects.get(pk=made.json()["dataset_version"]["id"])
    assert version.row_count == len(TASKS) >= 30
    assert version.pack["pack"] == "repo_fix" and len(version.pack["tasks"]) == len(TASKS)
    rows = list(read_rows(version.rows_path))
    assert {"prompt", "files", "test_files", "solution", "fix_diff"} <= set(rows[0])
    config = GRPOJobConfig(
        model_store=str(tmp_path), output_dir=str(tmp_path), rows=rows, verifiers=[], environment={}
    )
    assert config.environment["name"] == "repo_tests"


@pytest.mark.django_db
def test_a_bad_request_names_the_field(api):
    too_many = api.post("/api/v1/datasets/packs/agent", {"name": "p", "limit": 500}, format="json")
    assert too_many.status_code == 400 and too_many.json()["errors"][0]["field"] == "limit"
    unnamed = api.post("/api/v1/datasets/packs/agent", {"name": " "}, format="json")
    assert unnamed.status_code == 400
    past = api.post("/api/v1/datasets/packs/agent", {"name": "p", "offset": len(TASKS)}, format="json")
    assert past.status_code == 400 and past.json()["errors"][0]["field"] == "offset"
    over = api.post("/api/v1/datasets/packs/agent", {"name": "p", "offset": 30, "limit": 10}, format="json")
    assert over.status_code == 400 and over.json()["errors"][0]["field"] == "limit"
    assert f"between 1 and {len(TASKS) - 30}" in over.json()["errors"][0]["message"]


@pytest.mark.django_db
def test_an_agent_job_is_judged_on_held_out_repositories(api):
    from anneal.accounts.models import Team
    from anneal.datasets.services import dataset_version_create_from_rows
    from anneal.training.models import Job

    def pack(**body):
        made = api.post("/api/v1/datasets/packs/agent", body, format="json")
        assert made.status_code == 201, made.content
        return made.json()["dataset_version"]["id"]

    train, held = pack(name="train", limit=4), pack(name="held-out", offset=4, limit=3)
    tasks = [DatasetVersion.objects.get(pk=i).pack["tasks"] for i in (train, held)]
    assert len(tasks[0]) == 4 and tasks[1] == [task.name for task in TASKS[4:7]]
    params = {"max_steps": 2, "prompts_per_step": 2, "num_generations": 2, "environment": {}, "eval_steps": 1}
    body = {"name": "agent", "dataset_version": train, "eval_dataset_version": held, "params": params}
    response = api.post("/api/v1/jobs", body, format="json")
    assert response.status_code == 201, response.json()
    assert Job.objects.get(pk=response.json()["id"]).spec["eval_dataset_version"] == held
    # Held-out rows that are not repositories are refused by name.
    plain = dataset_version_create_from_rows(
        team=Team.objects.get(name="Core"), user=None, name="sums", rows=[{"prompt": "1+1=", "answer": "2"}]
    )
    refused = api.post("/api/v1/jobs", {**body, "eval_dataset_version": plain.id}, format="json")
    assert refused.status_code == 400
    assert refused.json()["errors"][0]["field"] == "eval_dataset_version"
    assert "files" in refused.json()["errors"][0]["message"]


def test_a_job_with_an_environment_names_rows_that_cannot_start_an_episode(tmp_path):
    rows = [{"prompt": "fix it", "files": {"a.py": "x = 1\n"}, "test_files": ["tests/test_a.py"]}]
    with pytest.raises(ValueError, match=r"rows\[0\]\.test_files"):
        GRPOJobConfig(model_store=str(tmp_path), output_dir=str(tmp_path), rows=rows, verifiers=[], environment={},
                      prompts_per_step=1)  # fmt: skip
    with pytest.raises(ValueError, match=r"environment\.max_turns"):
        GRPOJobConfig(model_store=str(tmp_path), output_dir=str(tmp_path), rows=rows, verifiers=[],
                      environment={"max_turns": 0}, prompts_per_step=1)  # fmt: skip


@pytest.mark.django_db
def test_an_agent_job_launches_with_an_environment_and_no_verifier(api):
    from anneal.training.models import Job

    made = api.post("/api/v1/datasets/packs/agent", {"name": "repo-fix", "limit": 4}, format="json")
    version_id = made.json()["dataset_version"]["id"]
    params = {"max_steps": 2, "prompts_per_step": 2, "num_generations": 2, "environment": {"max_turns": 3}}
    body = {"name": "agent", "dataset_version": version_id, "params": params}
    response = api.post("/api/v1/jobs", body, format="json")
    assert response.status_code == 201, response.json()
    job = Job.objects.get(pk=response.json()["id"])
    assert job.spec["environment"]["max_turns"] == 3 and job.spec["environment"]["name"] == "repo_tests"
    assert job.spec["verifiers"] == []

    bad = api.post(
        "/api/v1/jobs", {**body, "params": {**params, "environment": {"max_turns": 0}}}, format="json"
    )
    assert bad.status_code == 400
    assert bad.json()["errors"][0]["field"] == "params.environment"
    assert "environment.max_turns" in bad.json()["errors"][0]["message"]


@pytest.mark.django_db
def test_an_agent_job_refuses_data_that_is_not_repositories_and_a_plain_job_still_needs_a_verifier(api):
    from anneal.accounts.models import Team
    from anneal.datasets.services import dataset_version_create_from_rows

    team = Team.objects.get(name="Core")
    plain = dataset_version_create_from_rows(
        team=team, user=None, name="sums", rows=[{"prompt": "1+1=", "answer": "2"}] * 4
    )
    params = {"max_steps": 1, "prompts_per_step": 2, "num_generations": 2}
    agent = api.post(
        "/api/v1/jobs",
        {"dataset_version": plain.id, "params": {**params, "environment": {}}},
        format="json",
    )
    assert agent.status_code == 400 and "files" in agent.json()["errors"][0]["message"]
    single = api.post("/api/v1/jobs", {"dataset_version": plain.id, "params": params}, format="json")
    assert single.status_code == 400 and single.json()["errors"][0]["field"] == "verifiers"


@pytest.mark.django_db
def test_an_agent_step_past_the_devices_memory_is_refused_naming_the_episode_settings(api, settings):
    from decimal import Decimal

    from gpu_jobs.smollm import SMOLLM2_NAME

    # SmolLM2 on the CPU, 8 episodes of up to 1,024 tokens: ~15.9 GiB a step without activation
    # checkpointing (such a job peaked at 21.7 GB and was OOM-killed), ~7.7 GiB with it.
    settings.JOB_DEVICE_MEMORY_GIB = {"cpu": Decimal("12")}
    made = api.post("/api/v1/datasets/packs/agent", {"name": "repo-fix", "limit": 4}, format="json")
    params = {"model": SMOLLM2_NAME, "lora_rank": 16, "max_steps": 2, "prompts_per_step": 2,
              "num_generations": 4, "environment": {"context_tokens": 1024}}  # fmt: skip
    body = {"name": "agent", "dataset_version": made.json()["dataset_version"]["id"], "params": params}
    refused = api.post("/api/v1/jobs", body, format="json")
    assert refused.status_code == 400, refused.json()
    error = refused.json()["errors"][0]
    assert error["field"] == "params.device_type"
    assert error["message"].startswith("a training step needs about 15.")
    assert (
        "8 sequences of 1024 tokens" in error["message"]
        and "more than the 12 GiB of a cpu" in error["message"]
    )
    assert "environment.context_tokens" in error["message"] and "activation_checkpointing" in error["message"]
    assert "max_prompt_length" not in error["message"] and "use LoRA" not in error["message"]
    for fix in ({"activation_checkpointing": "on"}, {"environment": {"context_tokens": 512}}):
        fixed = api.post("/api/v1/jobs", {**body, "params": {**params, **fix}}, format="json")
        assert fixed.status_code == 201, fixed.json()
