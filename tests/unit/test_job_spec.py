"""The job spec has one owner: gpu_jobs.spec.TrainingSettings. It is checked at launch without rows or paths,
the form, the spec endpoint and the OpenAPI schema are generated from it, the job stores it once, and the
training child reads it back from the job alone.

Named users (tests/world.py): owner (owner of team Core).
"""

import dataclasses

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

from anneal.training.forms import LaunchForm
from anneal.training.launch_layout import PLAIN_HELP
from anneal.training.models import Job
from gpu_jobs.config import GRPOJobConfig
from gpu_jobs.spec import SETTING_NAMES, TrainingSettings, setting_fields
from tests.world import api_client


def test_the_settings_are_checked_alone_and_frozen():
    with pytest.raises(ValueError, match="^max_steps: must be >= 1"):
        TrainingSettings(max_steps=0)
    with pytest.raises(ValueError, match=r"^environment\.max_turns:"):
        TrainingSettings(environment={"max_turns": 0})
    settings = TrainingSettings(batch_size=12, num_generations=4, environment={})
    assert settings.prompts_per_step == 3  # what the run will do is what is stored
    assert settings.environment["name"] == "repo_tests"  # the option with its defaults filled in
    with pytest.raises(dataclasses.FrozenInstanceError):
        settings.max_steps = 5
    # The rows a job trains on are checked against the settings when the job has them.
    with pytest.raises(ValueError, match="^rows: has 2 rows but prompts_per_step is 3"):
        settings.check_row_count(2)


def test_a_run_is_the_settings_and_the_inputs_together(tmp_path):
    settings = TrainingSettings(max_steps=3, prompts_per_step=2, num_generations=2)
    rows = [{"prompt": "1+1=", "answer": "2"}, {"prompt": "2+2=", "answer": "4"}]
    verifiers = [{"name": "exact", "spec": {"type": "exact_match"}, "weight": 1.0}]
    config = GRPOJobConfig(**settings.to_dict(), model_store=str(tmp_path), output_dir=str(tmp_path), rows=rows,
                           verifiers=verifiers)  # fmt: skip
    assert TrainingSettings.from_spec(config.to_dict()) == settings
    with pytest.raises(ValueError, match="^rows: has 2 rows but prompts_per_step is 4"):
        dataclasses.replace(config, prompts_per_step=4)


def test_form_spec_endpoint_and_schema_are_generated_from_the_settings(world):
    fields = {entry["name"]: entry for entry in setting_fields()}
    assert list(fields) == list(SETTING_NAMES) == [f.name for f in dataclasses.fields(TrainingSettings)]
    listed = api_client(world["owner"]).get("/api/v1/jobs/spec").json()["params"]
    assert listed == setting_fields()
    form = LaunchForm(team=world["core"])
    for name, entry in fields.items():
        # The form says it in plain words where the engine's help is jargon (anneal.training.launch_layout).
        assert form.fields[f"p_{name}"].help_text == PLAIN_HELP.get(name, entry["help"]) != ""
    schema = api_client(world["owner"]).get("/api/schema/?format=json").json()
    params = schema["components"]["schemas"]["JobLaunchInput"]["properties"]["params"]["properties"]
    for name, entry in fields.items():
        assert params[name]["description"] == entry["help"]
        assert params[name].get("enum") == entry.get("choices")
    assert params["max_steps"]["type"] == "integer" and params["max_steps"]["default"] == 20
    assert "priority" in params and "budget" in params  # the run limits are listed beside them


def test_a_launch_stores_the_settings_once_and_the_child_reads_them_from_the_job(
    launch, settings, monkeypatch, tmp_path
):
    import workers.job_child as job_child

    job = launch("once", max_steps=3, num_generations=2, batch_size=4, priority=5)
    job.refresh_from_db()
    assert "max_steps" not in {f.name for f in Job._meta.get_fields()}  # no second copy in a column
    assert job.max_steps == 3 and job.spec["max_steps"] == 3 and job.spec["prompts_per_step"] == 2
    assert TrainingSettings.from_spec(job.spec) == TrainingSettings(
        max_steps=3, num_generations=2, batch_size=4
    )
    got = api_client(job.created_by).get(f"/api/v1/jobs/{job.pk}").json()
    assert got["max_steps"] == 3 and got["spec"]["max_steps"] == 3

    # The trainer is the edge: the child hands it the run it built from the job's id alone.
    seen = {}

    class Handed(Exception):
        pass

    def trainer(config, **kwargs):
        seen["config"] = config
        raise Handed

    monkeypatch.setattr(job_child, "grpo_main", trainer)
    settings.MODEL_STORE = tmp_path / "models"
    with pytest.raises(Handed):
        job_child.run(job.pk)
    config = seen["config"]
    assert TrainingSettings.from_spec(config.to_dict()) == TrainingSettings.from_spec(job.spec)
    assert len(config.rows) == 8 and [v["name"] for v in config.verifiers] == ["exact"]
    assert config.model_store == str(tmp_path / "models")


@pytest.mark.django_db(transaction=True)
def test_the_migration_keeps_the_step_count_of_jobs_whose_spec_lacked_it(launch):
    job = launch("old", max_steps=2)
    executor = MigrationExecutor(connection)
    before, after = (
        [("training", "0005_job_eval_dataset_version")],
        [("training", "0006_job_max_steps_in_spec")],
    )
    try:
        executor.migrate(before)
        old_job = executor.loader.project_state(before).apps.get_model("training", "Job")
        assert old_job.objects.get(pk=job.pk).max_steps == 2  # the column came back from the spec
        old_job.objects.filter(pk=job.pk).update(spec={"model": "tiny"}, max_steps=7)
        executor = MigrationExecutor(connection)
        executor.migrate(after)
    finally:
        MigrationExecutor(connection).migrate(executor.loader.graph.leaf_nodes())
    assert Job.objects.get(pk=job.pk).spec == {"model": "tiny", "max_steps": 7}
    assert Job.objects.get(pk=job.pk).max_steps == 7
