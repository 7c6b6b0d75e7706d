"""Domain packs: reasoning-gym tasks are offered only when checked; one request makes a dataset version and
a verifier per task whose scorer is the generator's own score_answer."""

import json

import pytest
from django.urls import reverse

from anneal.datasets.ingest import read_rows
from anneal.datasets.models import DatasetVersion
from anneal.datasets.pack_catalogue import CHECKS_FILE, check_task, offered_tasks, task_checks
from anneal.verifiers.models import Verifier
from gpu_jobs.rewards import build_scorer
from tests.world import api_client

# FINDINGS.md: these score 0 on their own reference answers.
KNOWN_BAD = {"boxnet", "graph_color", "propositional_logic", "rubiks_cube", "rush_hour"}


def test_at_least_fifty_tasks_are_offered_and_the_known_bad_ones_are_not():
    checks = task_checks()
    offered = {check.task for check in offered_tasks()}
    assert len(offered) >= 50
    assert KNOWN_BAD <= set(checks) and not KNOWN_BAD & offered
    assert json.loads(CHECKS_FILE.read_text())["reasoning_gym"] == "0.1.25"


@pytest.mark.parametrize(
    "task", ["basic_arithmetic", "spell_backward", "leg_counting", "rubiks_cube", "boxnet"]
)
def test_the_committed_check_results_hold_when_run_again(task):
    assert check_task(task).ok == task_checks()[task].ok


@pytest.fixture
def owner(world):
    return world["owner"], api_client(world["owner"])


@pytest.mark.django_db
def test_one_request_makes_a_version_and_a_verifier_per_domain(owner):
    _, api = owner
    listed = api.get("/api/v1/datasets/packs").json()
    assert len(listed["tasks"]) >= 50
    made = api.post(
        "/api/v1/datasets/packs/create",
        {
            "name": "gym",
            "tasks": ["basic_arithmetic", "spell_backward"],
            "size": 6,
            "seed": 7,
            "difficulty": 1,
        },
        format="json",
    )
    assert made.status_code == 201, made.content
    body = made.json()
    version = DatasetVersion.objects.get(pk=body["dataset_version"]["id"])
    assert version.row_count == 12 and version.stats["domains"] == {
        "basic_arithmetic": 6,
        "spell_backward": 6,
    }
    assert version.pack["tasks"] == ["basic_arithmetic", "spell_backward"] and version.pack["seed"] == 7
    assert [v["name"] for v in body["verifiers"]] == ["gym/basic_arithmetic", "gym/spell_backward"]
    specs = {v.name.split("/")[1]: v.latest_version.spec for v in Verifier.objects.all()}
    for row in read_rows(version.rows_path):
        scorer = build_scorer(specs[row["domain"]])
        assert scorer.score(row, row["answer"]).score == 1.0
        assert scorer.score(row, "certainly not the answer").score < 1.0
    # The same request again is refused by name: the verifiers exist.
    again = api.post(
        "/api/v1/datasets/packs/create", {"name": "gym", "tasks": ["basic_arithmetic"]}, format="json"
    )
    assert again.status_code == 400 and again.json()["errors"][0]["field"] == "name"


@pytest.mark.django_db
def test_tasks_that_failed_their_check_or_do_not_exist_are_refused(owner):
    _, api = owner
    bad = api.post("/api/v1/datasets/packs/create", {"name": "p", "tasks": ["rubiks_cube"]}, format="json")
    assert bad.status_code == 400 and "failed its check" in bad.json()["detail"]
    unknown = api.post("/api/v1/datasets/packs/create", {"name": "p", "tasks": ["telepathy"]}, format="json")
    assert unknown.status_code == 400 and "no such reasoning-gym or document task" in unknown.json()["detail"]
    huge = api.post(
        "/api/v1/datasets/packs/create",
        {"name": "p", "tasks": ["basic_arithmetic"], "size": 10**6},
        format="json",
    )
    assert huge.status_code == 400 and huge.json()["errors"][0]["field"] == "size"
    assert not DatasetVersion.objects.exists() and not Verifier.objects.exists()


@pytest.mark.django_db
def test_the_pack_page_makes_a_pack_in_one_click(owner, client):
    user, _ = owner
    client.force_login(user)
    page = client.get(reverse("pack-new")).content.decode()
    assert 'value="basic_arithmetic"' in page and 'value="rubiks_cube"' not in page
    response = client.post(
        reverse("pack-new"), {"name": "gym", "tasks": ["chain_sum"], "size": 3, "seed": 0, "difficulty": ""}
    )
    assert response.status_code == 302
    detail = client.get(response.url).content.decode()
    assert "Domain pack: tasks chain_sum" in detail and "chain_sum: 3" in detail
    assert 'value="report_tables"' in page and 'value="sql_queries"' in page
