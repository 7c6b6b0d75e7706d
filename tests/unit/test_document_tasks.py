"""Anneal's own document tasks beside the reasoning-gym packs: report_tables (a prose shipping report, its
shipments as a table) is offered, made into a dataset and a table verifier in one request, and scores partial
credit for a partly right table."""

import pytest

from anneal.datasets.models import DatasetVersion
from anneal.datasets.pack_catalogue import offered_tasks
from anneal.datasets.storage import read_rows
from anneal.verifiers.models import Verifier
from gpu_jobs.document_tasks import MAX_DIFFICULTY, document_rows
from gpu_jobs.rewards import build_scorer
from tests.world import api_client


def test_rows_are_a_function_of_seed_index_and_difficulty_and_grow_with_it():
    first = document_rows(task="report_tables", size=4, seed=3, difficulty=2)
    assert first == document_rows(task="report_tables", size=4, seed=3, difficulty=2)
    assert first != document_rows(task="report_tables", size=4, seed=4, difficulty=2)
    easy, hard = (
        document_rows(task="report_tables", size=1, seed=0, difficulty=d)[0] for d in (0, MAX_DIFFICULTY)
    )
    assert len(easy["table"]) == 2 and list(easy["table"][0]) == ["goods", "count", "cost"]
    assert list(hard["table"][0]) == ["day", "goods", "count", "cost"] and "that left" in hard["prompt"]
    for row in first:
        # Every row the question asks for is in the report, with its numbers as written.
        for shipment in row["table"]:
            assert str(shipment["count"]) in row["prompt"] and str(shipment["cost"]) in row["prompt"]


def test_the_table_verifier_gives_partial_credit_and_nothing_for_the_report_echoed():
    row = document_rows(task="report_tables", size=1, seed=1, difficulty=1)[0]
    scorer = build_scorer({"type": "table", "reference_field": "table", "row_order": "strict"})
    assert scorer.score(row, row["answer"]).score == 1.0
    header, first, *rest = row["answer"].splitlines()
    half = scorer.score(row, "\n".join([header, first]))
    assert 0.0 < half.score < 1.0 and "rows missing" in half.reason
    assert scorer.score(row, row["prompt"]).score == 0.0


@pytest.mark.django_db
def test_a_pack_of_report_tables_makes_a_version_and_a_table_verifier(world):
    api = api_client(world["owner"])
    listed = api.get("/api/v1/datasets/packs").json()
    assert "report_tables" in [t["task"] for t in listed["tasks"]]
    assert "report_tables" in {check.task for check in offered_tasks()}
    made = api.post(
        "/api/v1/datasets/packs/create",
        {
            "name": "docs",
            "tasks": ["report_tables", "basic_arithmetic"],
            "size": 5,
            "seed": 2,
            "difficulty": 3,
        },
        format="json",
    )
    assert made.status_code == 201, made.content
    version = DatasetVersion.objects.get(pk=made.json()["dataset_version"]["id"])
    assert version.stats["domains"] == {"report_tables": 5, "basic_arithmetic": 5}
    verifier = Verifier.objects.get(name="docs/report_tables")
    assert verifier.latest_version.spec["type"] == "table"
    scorer = build_scorer(verifier.latest_version.spec)
    tables = [row for row in read_rows(version.rows_path) if row["domain"] == "report_tables"]
    assert all(scorer.score(row, row["answer"]).score == 1.0 for row in tables)
    assert all(scorer.score(row, "I cannot tell.").score == 0.0 for row in tables)


def test_every_sql_question_s_reference_scores_1_through_the_sandbox_and_a_wrong_query_0():
    from gpu_jobs.document_tasks import TASKS
    from sandboxes.client import SandboxClient

    rows = [
        row
        for d in range(MAX_DIFFICULTY + 1)
        for row in document_rows(task="sql_queries", size=2, seed=5, difficulty=d)
    ]
    assert {"CREATE TABLE customers" in row["prompt"] and "INSERT INTO" in row["schema"] for row in rows} == {
        True
    }
    assert "INSERT INTO" not in rows[0]["prompt"]  # the rows are the database's, not the prompt's
    scorer = build_scorer(TASKS["sql_queries"].spec, sandbox=SandboxClient())
    right = scorer.score_batch(rows, [f"```sql\n{row['answer']};\n```" for row in rows])
    assert [r.score for r in right] == [1.0] * len(rows), [r.reason for r in right]
    wrong = scorer.score_batch(rows, ["SELECT 42"] * len(rows))
    assert max(r.score for r in wrong) == 0.0


@pytest.mark.django_db
def test_a_sql_pack_is_offered_and_makes_a_sql_result_verifier(world):
    api = api_client(world["owner"])
    made = api.post(
        "/api/v1/datasets/packs/create",
        {"name": "shop", "tasks": ["sql_queries"], "size": 4, "seed": 1, "difficulty": 4},
        format="json",
    )
    assert made.status_code == 201, made.content
    assert Verifier.objects.get(name="shop/sql_queries").latest_version.spec["type"] == "sql_result"
    version = DatasetVersion.objects.get(pk=made.json()["dataset_version"]["id"])
    assert version.row_count == 4 and all("schema" in row for row in read_rows(version.rows_path))
