"""POST /api/v1/verifiers/import and the chat-format JSONL upload: OpenAI fine-tuning users' files, unchanged.

Named users: owner (owner of team Core), teammate (viewer in Core), outsider (owner of team Rivals).
"""

import json

import pytest

from anneal.datasets.ingest import ingest_file
from anneal.datasets.mapping import Mapping
from anneal.datasets.readers import ReadLimits
from anneal.datasets.tokens import token_counter
from anneal.verifiers.models import Verifier
from gpu_jobs.rewards import build_scorer
from tests.world import api_client, checkpoint_create, page_client

pytestmark = pytest.mark.django_db

EXACT = {
    "type": "string_check",
    "name": "exact answer",
    "input": "{{sample.output_text}}",
    "reference": "{{item.reference_answer}}",
    "operation": "eq",
}


def post_import(client, body: dict):
    return client.post("/api/v1/verifiers/import", body, format="json")


def test_an_imported_grader_is_a_team_verifier_only_its_team_sees(world):
    owner = api_client(world["owner"])
    created = post_import(owner, {"grader": EXACT})
    assert created.status_code == 201, created.json()
    body = created.json()
    assert body["name"] == "exact answer" and body["notes"] == []
    spec = body["versions"][0]["spec"]
    assert (spec["type"], spec["reference_field"], spec["case_sensitive"]) == (
        "exact_match",
        "reference_answer",
        True,
    )
    verifier = Verifier.objects.get(pk=body["id"])
    assert verifier.team == world["core"]
    scorer = build_scorer(verifier.latest_version.spec)
    assert [r.score for r in scorer.score_batch([{"reference_answer": "Paris"}] * 2, ["Paris", "paris"])] == [
        1,
        0,
    ]

    outsider = api_client(world["outsider"])
    assert outsider.get(f"/api/v1/verifiers/{body['id']}").status_code == 404
    assert all(v["id"] != body["id"] for v in outsider.get("/api/v1/verifiers").json())
    assert (
        outsider.post(f"/api/v1/verifiers/{body['id']}/versions", {"spec": spec}, format="json").status_code
        == 404
    )
    # A viewer looks; importing writes.
    assert post_import(api_client(world["teammate"]), {"grader": EXACT, "name": "x"}).status_code == 403


def test_a_grader_that_cannot_be_carried_over_is_refused_naming_its_path(world):
    owner = api_client(world["owner"])
    multi = {
        "type": "multi",
        "graders": {"close": {**EXACT, "type": "text_similarity", "evaluation_metric": "meteor"}},
        "calculate_output": "close",
    }
    multi["graders"]["close"].pop("operation")
    refused = post_import(owner, {"grader": multi, "name": "m"})
    assert refused.status_code == 400
    assert refused.json()["errors"][0]["field"] == "grader.graders.close.evaluation_metric"
    assert "meteor" in refused.json()["errors"][0]["message"]
    assert post_import(owner, {"grader": "not json"}).json()["errors"][0]["field"].startswith("grader")
    nameless = post_import(owner, {"grader": {k: v for k, v in EXACT.items() if k != "name"}})
    assert nameless.status_code == 400 and nameless.json()["errors"][0]["field"] == "name"
    assert not Verifier.objects.exists()


def test_a_score_model_judges_with_a_team_deployment_or_an_allowed_endpoint(world, tmp_path):
    from anneal.deployments.models import Deployment

    owner = api_client(world["owner"])
    judge = {
        "type": "score_model",
        "name": "judge",
        "model": "grader-model",
        "input": [
            {"role": "user", "content": "Ref {{item.reference_answer}}. Grade: {{sample.output_text}}"}
        ],
        "range": [0, 5],
    }
    missing = post_import(owner, {"grader": judge})
    assert missing.status_code == 400 and missing.json()["errors"][0]["field"] == "grader.model"
    blocked = post_import(owner, {"grader": judge, "judge_endpoint": "https://judge.example.com/v1"})
    assert blocked.status_code == 400 and blocked.json()["errors"][0]["field"] == "judge_endpoint"

    rivals = checkpoint_create(team=world["rivals"], location=tmp_path / "rivals")
    Deployment.objects.create(team=world["rivals"], checkpoint=rivals, name="grader-model", state="ready")
    assert post_import(owner, {"grader": judge}).json()["errors"][0]["field"] == "grader.model"  # not Core's

    mine = checkpoint_create(team=world["core"], location=tmp_path / "core")
    Deployment.objects.create(team=world["core"], checkpoint=mine, name="grader-model", state="ready")
    created = post_import(owner, {"grader": judge})
    assert created.status_code == 201, created.json()
    spec = created.json()["versions"][0]["spec"]
    assert (spec["deployment"], spec["reference_field"], spec["max_score"]) == (
        "grader-model",
        "reference_answer",
        5,
    )
    assert spec["messages"][0]["content"] == "Ref {reference}. Grade: {completion}"
    assert any("range" in note for note in created.json()["notes"])


def test_the_paste_box_imports_a_grader_and_shows_refusals_by_field(world):
    owner = page_client(world["owner"])
    assert 'id="openai-import-link"' in owner.get("/verifiers/").content.decode()
    bad = owner.post("/verifiers/import/", {"grader": '{"type": "string_check",'})
    assert bad.status_code == 400 and "not valid JSON" in bad.content.decode()
    refused = owner.post("/verifiers/import/", {"grader": json.dumps({**EXACT, "operation": "regex"})})
    assert refused.status_code == 400 and "grader.operation" in refused.content.decode()
    multi = {
        "type": "multi",
        "name": "blend",
        "graders": {
            "exact": EXACT,
            "close": {**EXACT, "type": "text_similarity", "evaluation_metric": "rouge_l"},
        },
        "calculate_output": "0.7 * exact + 0.3 * close^2",
    }
    del multi["graders"]["close"]["operation"]
    done = owner.post("/verifiers/import/", {"grader": json.dumps(multi), "name": "pasted"}, follow=True)
    verifier = Verifier.objects.get(name="pasted")
    assert done.redirect_chain[-1][0] == f"/verifiers/{verifier.pk}/"
    assert verifier.latest_version.spec["formula"] == "0.7 * exact + 0.3 * close**2"
    assert page_client(world["outsider"]).get(f"/verifiers/{verifier.pk}/").status_code == 404
    assert page_client(world["teammate"]).get("/verifiers/import/").status_code == 403


# --- chat-format JSONL (OpenAI's fine-tuning dataset format) ----------------------------------------------


def ingest(tmp_path, records: list, mapping: Mapping | None = None):
    path = tmp_path / "train.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    target = tmp_path / "rows.jsonl"
    report = ingest_file(
        path=path,
        file_name="train.jsonl",
        mapping=mapping or Mapping(answer="answer"),  # what the API sends when no mapping is chosen
        target=target,
        limits=ReadLimits(),
        tokens=token_counter("tiny"),
    )
    rows = [json.loads(line) for line in target.read_text().splitlines()] if target.exists() else []
    return report, rows


def chat(*turns, **fields):
    roles = ["system", "user"] if len(turns) == 2 else ["user"]
    return {"messages": [{"role": r, "content": t} for r, t in zip(roles, turns, strict=False)], **fields}


def test_chat_jsonl_uploads_without_a_mapping_and_keeps_the_reference_fields(world, tmp_path):
    records = [
        chat("Answer in one word.", "Capital of France?", reference_answer="Paris", topic="geo"),
        chat("2+2?", reference_answer=4, meta={"source": "gsm"}),
        {
            "messages": [
                {"role": "developer", "content": "Be brief."},
                {"role": "user", "content": [{"type": "text", "text": "Hello"}]},
            ],
            "reference_answer": {"greeting": "hi"},
        },
    ]
    report, rows = ingest(tmp_path, records)
    assert report.error_count == 0 and report.rows == 3, report.errors
    assert rows[0]["prompt"] == records[0]["messages"] and rows[0]["answer"] == "Paris"
    assert (rows[0]["reference_answer"], rows[0]["topic"]) == ("Paris", "geo")
    assert rows[1]["answer"] == "4" and rows[1]["meta"] == {"source": "gsm"}
    assert rows[2]["prompt"] == [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "Hello"},
    ]
    assert "answer" not in rows[2] and rows[2]["reference_answer"] == {"greeting": "hi"}
    # The imported grader reads the row the upload made.
    post_import(api_client(world["owner"]), {"grader": EXACT})
    scorer = build_scorer(Verifier.objects.get().latest_version.spec)
    assert scorer.score(rows[0], "Paris").score == 1.0 and scorer.score(rows[1], "4").score == 1.0


def test_chat_jsonl_errors_name_the_row_and_the_message_field(tmp_path):
    records = [
        chat("fine", reference_answer="ok"),
        {"messages": [{"role": "user"}], "reference_answer": "x"},
        {"messages": [{"role": "user", "content": "q"}, {"role": "assistant", "content": "a"}]},
        {"messages": [{"role": "user", "content": "q"}, {"role": "wizard", "content": "a"}]},
        {"messages": [], "reference_answer": "x"},
        {"messages": [{"role": "user", "content": [{"type": "image_url", "image_url": {"url": "x"}}]}]},
        {"prompt": "no messages here"},
    ]
    report, rows = ingest(tmp_path, records)
    assert len(rows) == 1
    found = {(e["row"], e["field"]): e["message"] for e in report.errors}
    assert "no content" in found[(2, "messages[0].content")]
    assert "assistant" in found[(3, "messages[1].role")]
    assert "wizard" in found[(4, "messages[1].role")]
    assert "no messages" in found[(5, "messages")]
    assert "image_url" in found[(6, "messages[0].content[0]")]
    assert "messages" in found[(7, "messages")]


def test_a_file_with_a_prompt_column_keeps_its_mapping(tmp_path):
    report, rows = ingest(tmp_path, [{"prompt": "1+1=", "answer": "2", "messages": "not chat"}])
    assert report.rows == 1 and rows[0] == {"prompt": "1+1=", "answer": "2", "messages": "not chat"}
