"""The verifier REST API: create, versions with diffs, probes and flags, preview, validate, clone, delete.

Named users: owner (owner of team Core), teammate (viewer in Core), outsider (owner of team Rivals).
"""

import pytest

from anneal.verifiers.models import Verifier
from gpu_jobs.rewards import VERIFIER_TYPES
from tests.world import api_client

pytestmark = pytest.mark.django_db


def create(client, name: str, spec: dict):
    return client.post("/api/v1/verifiers", {"name": name, "spec": spec}, format="json")


def test_create_normalises_runs_probes_and_lists_versions_with_diffs(world):
    owner = api_client(world["owner"])
    created = create(owner, "numbers", {"type": "numeric", "extract": "tag"})
    assert created.status_code == 201, created.json()
    body = created.json()
    version = body["versions"][0]
    assert version["spec"]["abs_tol"] == 0 and version["flagged"] is False and version["probe_flags"] == []
    assert {p["name"] for p in version["probe_results"]} >= {"empty", "prompt_echo", "very_long", "os_exit"}
    second = owner.post(
        f"/api/v1/verifiers/{body['id']}/versions", {"spec": {"type": "numeric", "abs_tol": 1}}, format="json"
    )
    assert second.status_code == 201 and second.json()["number"] == 2
    assert '-  "abs_tol": 0' in second.json()["diff"] and '+  "abs_tol": 1' in second.json()["diff"]
    versions = owner.get(f"/api/v1/verifiers/{body['id']}/versions").json()
    assert [v["number"] for v in versions] == [2, 1] and versions[1]["diff"] == ""


def test_a_verifier_that_scores_a_probe_high_is_flagged(world):
    owner = api_client(world["owner"])
    body = create(owner, "contains", {"type": "keywords", "required_field": "answer"}).json()
    assert body["flagged"] is True
    assert any("listing many guesses" in flag for flag in body["versions"][0]["probe_flags"])
    listed = owner.get("/api/v1/verifiers").json()
    assert listed[0]["flagged"] is True


def test_a_nul_in_what_the_verifiers_own_code_returns_is_saved_as_the_replacement_character(world):
    # PostgreSQL's jsonb refuses \u0000; a probe's reason quotes what the user's code returned.
    code = "def score(row, completion):\n    return (0.0, 'one' + chr(0) + 'two')\n"
    created = create(api_client(world["owner"]), "nul", {"type": "custom_python", "code": code})
    assert created.status_code == 201, created.content
    reasons = [p["reason"] for p in created.json()["versions"][0]["probe_results"]]
    assert "one\ufffdtwo" in reasons and not any("\x00" in reason for reason in reasons)


@pytest.mark.parametrize(
    ("spec", "field"),
    [
        ({"type": "telepathy"}, "spec.type"),
        ({"type": "numeric", "rel_tol": -1}, "spec.rel_tol"),
        ({"type": "regex", "pattern": "("}, "spec.pattern"),
        (
            {"type": "composite", "parts": [{"name": "a", "spec": {"type": "exact_match", "extract": "x"}}]},
            "spec.parts[0].spec.extract",
        ),
        ("not an object", "spec"),
    ],
)
def test_a_bad_spec_is_a_400_naming_the_field(world, spec, field):
    response = create(api_client(world["owner"]), "bad", spec)
    assert response.status_code == 400
    assert response.json()["errors"][0]["field"] == field
    assert not Verifier.objects.exists()


def test_preview_scores_samples_in_order_without_saving(world):
    samples = [
        {"row": {"prompt": "12+45=", "answer": "57"}, "completion": "<answer>57</answer>"},
        {"row": {"prompt": "12+45=", "answer": "57"}, "completion": "<answer>58</answer>"},
        {"row": {"prompt": "12+45=", "answer": "57"}, "completion": "57"},
    ]
    spec = {
        "type": "composite",
        "mode": "formula",
        "formula": "correct * (0.5 + 0.5 * tagged)",
        "parts": [
            {"name": "correct", "spec": {"type": "numeric"}, "weight": 1},
            {"name": "tagged", "spec": {"type": "regex", "pattern": "<answer>.*</answer>"}, "weight": 0},
        ],
    }
    response = api_client(world["owner"]).post(
        "/api/v1/verifiers/preview", {"spec": spec, "samples": samples}, format="json"
    )
    assert response.status_code == 200, response.json()
    results = response.json()["results"]
    assert [r["score"] for r in results] == [1.0, 0.0, 0.5]
    assert results[2]["parts"] == {"correct": 1.0, "tagged": 0.0}
    assert "tagged:" in results[2]["reason"]
    assert not Verifier.objects.exists()


def test_preview_runs_code_in_the_sandbox_and_a_crash_scores_zero(world):
    samples = [
        {"row": {"tests": ["assert result == 57"]}, "completion": "```python\n12 + 45\n```"},
        {"row": {"tests": ["assert result == 57"]}, "completion": "import os\nos._exit(0)"},
        {"row": {"tests": ["assert result == 57"]}, "completion": "x = [0] * (10 ** 10)"},
    ]
    response = api_client(world["owner"]).post(
        "/api/v1/verifiers/preview", {"spec": {"type": "python_tests"}, "samples": samples}, format="json"
    )
    results = response.json()["results"]
    assert [r["score"] for r in results] == [1.0, 0.0, 0.0]
    assert "exited before" in results[1]["reason"]
    assert results[2]["reason"]


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"spec": {"type": "exact_match"}, "samples": []}, "samples"),
        ({"spec": {"type": "exact_match"}, "samples": [{"row": "x", "completion": "1"}]}, "samples[0].row"),
        ({"spec": {"type": "exact_match"}, "samples": [{"row": {}}]}, "samples[0].completion"),
        (
            {"spec": {"type": "exact_match", "extract": "nope"}, "samples": [{"row": {}, "completion": ""}]},
            "spec.extract",
        ),
    ],
)
def test_preview_input_errors_name_the_field(world, body, field):
    response = api_client(world["owner"]).post("/api/v1/verifiers/preview", body, format="json")
    assert response.status_code == 400
    assert response.json()["errors"][0]["field"] == field


def test_validate_answers_as_the_user_types(world):
    client = api_client(world["owner"])
    ok = client.post("/api/v1/verifiers/validate", {"spec": {"type": "format"}}, format="json").json()
    assert ok["ok"] is True and ok["spec"]["think_tag"] == "think"
    bad = client.post(
        "/api/v1/verifiers/validate", {"spec": {"type": "format", "max_chars": "ten"}}, format="json"
    )
    assert bad.status_code == 200
    assert bad.json()["errors"][0]["field"] == "spec.max_chars"


def test_the_type_catalogue_describes_every_field(world):
    catalogue = api_client(world["owner"]).get("/api/v1/verifiers/types").json()
    assert [entry["type"] for entry in catalogue] == list(VERIFIER_TYPES)
    numeric = next(entry for entry in catalogue if entry["type"] == "numeric")
    assert {"name", "help", "default", "choices", "required", "kinds"} <= set(numeric["fields"][0])
    assert all(field["help"] for entry in catalogue for field in entry["fields"])


def test_the_openapi_schema_has_an_example_spec_per_type(world):
    schema = api_client(world["owner"]).get("/api/schema/?format=json")
    if schema.status_code == 404:
        schema = api_client(world["owner"]).get("/api/v1/schema?format=json")
    assert schema.status_code == 200
    text = schema.content.decode()
    for name in VERIFIER_TYPES:
        assert f'"type": "{name}"' in text or f'"type":"{name}"' in text, name
    assert "/api/v1/verifiers/preview" in text


def test_clone_copies_the_latest_spec(world):
    owner = api_client(world["owner"])
    body = create(owner, "original", {"type": "exact_match", "ignore_punctuation": True}).json()
    clone = owner.post(f"/api/v1/verifiers/{body['id']}/clone", {"name": "copy"}, format="json")
    assert clone.status_code == 201
    assert clone.json()["versions"][0]["spec"] == body["versions"][0]["spec"]
    again = owner.post(f"/api/v1/verifiers/{body['id']}/clone", {"name": "copy"}, format="json")
    assert again.status_code == 400 and again.json()["errors"][0]["field"] == "name"


def test_delete_only_when_no_job_used_it(world, launch):
    owner = api_client(world["owner"])
    unused = create(owner, "unused", {"type": "exact_match"}).json()
    used = create(owner, "used", {"type": "exact_match"}).json()
    job = launch(verifier=Verifier.objects.get(pk=used["id"]), max_steps=1)
    refused = owner.delete(f"/api/v1/verifiers/{used['id']}")
    assert refused.status_code == 409
    assert f"#{job.id}" in refused.json()["detail"] and "cannot be deleted" in refused.json()["detail"]
    assert owner.delete(f"/api/v1/verifiers/{unused['id']}").status_code == 204
    assert list(Verifier.objects.values_list("name", flat=True)) == ["used"]


def test_viewers_and_outsiders_cannot_change_verifiers(world):
    body = create(api_client(world["owner"]), "mine", {"type": "exact_match"}).json()
    assert api_client(world["teammate"]).delete(f"/api/v1/verifiers/{body['id']}").status_code == 403
    assert api_client(world["outsider"]).delete(f"/api/v1/verifiers/{body['id']}").status_code == 404
    assert (
        api_client(world["outsider"])
        .post(f"/api/v1/verifiers/{body['id']}/clone", {"name": "x"}, format="json")
        .status_code
        == 404
    )
