"""Datasets over REST and through the pages: mapping after upload, review (accept / reject), errors as CSV,
versions, paged rows, splits, delete only when no job uses a version, and team scoping.

Named users: owner (owner of Core), teammate (viewer in Core), outsider (owner of Rivals). The ingest runs
in the test (the Celery task only calls the same service).
"""

import csv
import io
import json

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.urls import reverse

from anneal.datasets.models import Dataset, DatasetUpload, DatasetVersion
from anneal.datasets.services import dataset_upload_ingest, dataset_upload_preview
from tests.world import api_client

pytestmark = pytest.mark.django_db

ROWS = [
    {"question": f"{a}+{b}=", "solution": str(a + b), "topic": "add" if a % 2 else "even", "split": s}
    for (a, b), s in zip(
        [(1, 2), (3, 4), (5, 6), (7, 8), (9, 10), (11, 12), (2, 2), (4, 4)], "tttttvvt", strict=True
    )
]


def jsonl(rows) -> bytes:
    return "".join(json.dumps(r) + "\n" for r in rows).encode()


def api_upload(client, name: str, body: bytes, file_name: str = "rows.jsonl", **fields):
    response = client.post(
        "/api/v1/datasets/uploads",
        {"name": name, "file": SimpleUploadedFile(file_name, body), **fields},
        format="multipart",
    )
    return response


def ingested(client, response) -> dict:
    assert response.status_code == 202, response.content
    dataset_upload_ingest(upload_id=response.json()["id"])
    return client.get(f"/api/v1/datasets/uploads/{response.json()['id']}").json()


MAPPING = {"prompt_field": "question", "answer_field": "solution", "domain_field": "topic"}


def test_upload_with_mapping_makes_a_version_with_statistics(world):
    api = api_client(world["owner"])
    upload = ingested(api, api_upload(api, "sums", jsonl(ROWS), **MAPPING))
    assert upload["state"] == "ready" and upload["rows_valid"] == 8 and upload["progress"] == 1.0
    version = api.get(f"/api/v1/datasets/versions/{upload['dataset_version']}").json()
    assert version["stats"]["rows"] == 8
    assert version["stats"]["domains"] == {"add": 6, "even": 2}
    assert version["stats"]["prompt_tokens"] == {"min": 4, "mean": 4.38, "p50": 4, "p95": 6, "max": 6}
    rows = api.get(f"/api/v1/datasets/versions/{version['id']}/rows", {"offset": 6, "limit": 5}).json()
    assert rows["count"] == 8 and [r["prompt"] for r in rows["results"]] == ["2+2=", "4+4="]
    assert rows["results"][0] == {"prompt": "2+2=", "answer": "4", "domain": "even", "split": "v"}


def test_the_browser_flow_maps_columns_after_seeing_the_first_rows(
    world, client, django_capture_on_commit_callbacks
):
    client.force_login(world["owner"])
    body = "question,solution,topic\n1+1=,2,add\n2+2=,4,add\n"
    with django_capture_on_commit_callbacks(execute=False) as queued:
        response = client.post(
            reverse("dataset-upload"),
            {"name": "csv sums", "file": SimpleUploadedFile("sums.csv", body.encode()), "map_later": "on"},
            HTTP_X_REQUESTED_WITH="XMLHttpRequest",
        )
    assert response.status_code == 200 and len(queued) == 1  # only the preview is read before the mapping
    upload = DatasetUpload.objects.get()
    assert response.json() == {"redirect": reverse("upload-detail", args=[upload.pk])}
    waiting = client.get(response.json()["redirect"]).content.decode()
    assert "Reading the first rows" in waiting and "Choose the columns" not in waiting
    dataset_upload_preview(upload_id=upload.pk)  # what the worker's datasets.preview task runs
    page = client.get(response.json()["redirect"]).content.decode()
    assert "Choose the columns" in page and "<th>question</th>" in page and "1+1=" in page
    # The obvious columns are guessed.
    assert '<option value="question" selected>' in page and '<option value="solution" selected>' in page

    mapped = client.post(
        reverse("upload-map", args=[upload.pk]),
        {
            "prompt_field": "question",
            "prompt_format": "auto",
            "answer_field": "solution",
            "domain_field": "topic",
            "tokenizer": "tiny",
        },
    )
    assert mapped.status_code == 302
    upload.refresh_from_db()
    assert upload.state == "pending" and upload.mapping["answer"] == "solution"
    dataset_upload_ingest(upload_id=upload.pk)
    ready = client.get(reverse("upload-detail", args=[upload.pk])).content.decode()
    assert "Ready." in ready and "Rows per domain" in ready and "add: 2" in ready


def test_mapping_a_missing_column_is_named_on_the_form(world, client):
    client.force_login(world["owner"])
    api = api_client(world["owner"])
    upload_id = api_upload(api, "m", b"question\n1+1=\n", "m.csv", map_later=True).json()["id"]
    early = client.post(reverse("upload-map", args=[upload_id]), {"prompt_field": "question"})
    assert early.status_code == 302  # back to the page, which waits for the first rows
    assert api.get(f"/api/v1/datasets/uploads/{upload_id}/preview").json()["ready"] is False
    dataset_upload_preview(upload_id=upload_id)
    assert api.get(f"/api/v1/datasets/uploads/{upload_id}/preview").json()["columns"] == ["question"]
    response = client.post(
        reverse("upload-map", args=[upload_id]),
        {"prompt_field": "nope", "prompt_format": "auto", "tokenizer": "tiny"},
    )
    assert response.status_code == 400
    assert "Select a valid choice. nope is not one of the available choices." in response.content.decode()
    bad_tokenizer = api.post(
        f"/api/v1/datasets/uploads/{upload_id}/mapping", {"prompt_field": "question", "tokenizer": "/nowhere"}
    )
    assert bad_tokenizer.status_code == 400 and bad_tokenizer.json()["errors"][0]["field"] == "tokenizer"


def test_review_lists_bad_rows_then_accept_keeps_only_the_good_ones(world):
    api = api_client(world["owner"])
    body = jsonl(ROWS[:3]) + b"not json\n" + jsonl([{"question": "", "solution": "1", "topic": "x"}, ROWS[0]])
    upload = ingested(api, api_upload(api, "mixed", body, **MAPPING))
    assert upload["state"] == "review" and upload["dataset_version"] is None
    assert upload["rows_valid"] == 3 and upload["duplicate_count"] == 1 and upload["error_count"] == 2
    assert [(e["row"], e["field"]) for e in upload["errors"]] == [(4, "(line)"), (5, "question")]
    assert not Dataset.objects.exists()

    errors = api.get(f"/api/v1/datasets/uploads/{upload['id']}/errors").json()
    assert errors["count"] == 2 and errors["results"][1]["message"] == "prompt is empty"
    download = api.get(f"/api/v1/datasets/uploads/{upload['id']}/errors.csv")
    assert download["Content-Type"] == "text/csv"
    assert 'filename="upload-' in download["Content-Disposition"]
    table = list(csv.reader(io.StringIO(b"".join(download.streaming_content).decode())))
    assert table[0] == ["row", "field", "problem"] and table[2] == ["5", "question", "prompt is empty"]

    assert (
        api_client(world["teammate"]).post(f"/api/v1/datasets/uploads/{upload['id']}/accept").status_code
        == 403
    )
    accepted = api.post(f"/api/v1/datasets/uploads/{upload['id']}/accept")
    assert accepted.status_code == 201 and accepted.json()["row_count"] == 3
    again = api.post(f"/api/v1/datasets/uploads/{upload['id']}/accept")
    assert again.status_code == 400 and "only an upload in review" in again.json()["detail"]


def test_reject_stores_nothing(world, tmp_path):
    api = api_client(world["owner"])
    upload = ingested(api, api_upload(api, "mixed", jsonl(ROWS[:2]) + b"[1]\n", **MAPPING))
    assert upload["state"] == "review"
    rejected = api.post(f"/api/v1/datasets/uploads/{upload['id']}/reject").json()
    assert rejected["state"] == "rejected"
    assert not Dataset.objects.exists()
    assert [p for p in (tmp_path / "datasets").rglob("*") if p.is_file()] == []


def test_split_by_seed_and_by_column_make_a_train_and_eval_pair(world):
    api = api_client(world["owner"])
    upload = ingested(api, api_upload(api, "sums", jsonl(ROWS), **MAPPING))
    parent = upload["dataset_version"]
    by_seed = api.post(
        f"/api/v1/datasets/versions/{parent}/split",
        {"method": "seed", "eval_fraction": 0.25, "seed": 3},
        format="json",
    )
    assert by_seed.status_code == 201, by_seed.content
    train, held_out = by_seed.json()
    assert train["split_role"] == "train" and held_out["split_role"] == "eval"
    assert train["row_count"] + held_out["row_count"] == 8 and held_out["row_count"] >= 1
    assert train["split"] == {
        "method": "seed",
        "seed": 3,
        "eval_fraction": 0.25,
        "parent": parent,
        "pair": held_out["id"],
    }
    # The same seed gives the same split: a job on the train version can be reproduced.
    again = api.post(
        f"/api/v1/datasets/versions/{parent}/split",
        {"method": "seed", "eval_fraction": 0.25, "seed": 3},
        format="json",
    ).json()
    assert again[0]["sha256"] == train["sha256"] and again[0]["number"] > held_out["number"]

    by_column = api.post(
        f"/api/v1/datasets/versions/{parent}/split",
        {"method": "column", "column": "split", "eval_values": ["v"]},
        format="json",
    )
    train, held_out = by_column.json()
    rows = api.get(f"/api/v1/datasets/versions/{held_out['id']}/rows").json()["results"]
    assert [r["prompt"] for r in rows] == ["11+12=", "2+2="] and train["row_count"] == 6
    assert held_out["stats"]["rows"] == 2

    empty = api.post(
        f"/api/v1/datasets/versions/{parent}/split",
        {"method": "column", "column": "split", "eval_values": ["nothing"]},
        format="json",
    )
    assert empty.status_code == 400 and empty.json()["errors"][0]["field"] == "eval_values"
    assert "eval split would be empty" in empty.json()["detail"]
    missing = api.post(
        f"/api/v1/datasets/versions/{parent}/split", {"method": "column", "column": "colour"}, format="json"
    )
    assert missing.status_code == 400 and missing.json()["errors"][0]["field"] == "column"


def test_a_version_a_job_uses_cannot_be_deleted(world, launch):
    api = api_client(world["owner"])
    first = ingested(api, api_upload(api, "sums", jsonl(ROWS), **MAPPING))["dataset_version"]
    second = ingested(api, api_upload(api, "sums", jsonl(ROWS[:4]), **MAPPING))["dataset_version"]
    job = launch(version=DatasetVersion.objects.get(pk=first), max_steps=1)
    refused = api.delete(f"/api/v1/datasets/versions/{first}")
    assert refused.status_code == 409
    assert refused.json()["detail"] == (
        f"version: job #{job.pk} 'run' uses sums v1: a version a job used is kept so the job can be reproduced"
    )
    dataset_id = DatasetVersion.objects.get(pk=first).dataset_id
    assert api.delete(f"/api/v1/datasets/{dataset_id}").status_code == 409
    assert api_client(world["teammate"]).delete(f"/api/v1/datasets/versions/{second}").status_code == 403
    assert api.delete(f"/api/v1/datasets/versions/{second}").status_code == 204
    assert [v["number"] for v in api.get(f"/api/v1/datasets/{dataset_id}/versions").json()] == [1]


def test_another_team_sees_nothing(world):
    api, outsider = api_client(world["owner"]), api_client(world["outsider"])
    upload = ingested(api, api_upload(api, "sums", jsonl(ROWS), **MAPPING))
    version = upload["dataset_version"]
    for path in (
        f"/api/v1/datasets/uploads/{upload['id']}",
        f"/api/v1/datasets/uploads/{upload['id']}/errors.csv",
        f"/api/v1/datasets/uploads/{upload['id']}/preview",
        f"/api/v1/datasets/versions/{version}",
        f"/api/v1/datasets/versions/{version}/rows",
    ):
        assert outsider.get(path).status_code == 404, path
    assert outsider.post(f"/api/v1/datasets/versions/{version}/split", {"method": "seed"}).status_code == 404
    assert outsider.delete(f"/api/v1/datasets/versions/{version}").status_code == 404
    assert outsider.get("/api/v1/datasets").json() == []


def test_an_oversized_file_is_refused(world, settings, client):
    settings.UPLOAD_MAX_BYTES = 1000
    response = api_upload(api_client(world["owner"]), "big", b"x" * 5000)
    assert response.status_code == 413
    assert "the file is 5000 bytes, over the limit of 1000 bytes" in response.json()["detail"]
    # A body far over the limit is refused from its Content-Length, before it is read
    # (tests/security/test_upload_limits.py: while it streams in, too).
    huge = api_upload(api_client(world["owner"]), "big", b"x" * (2 * 2**20))
    assert huge.status_code == 413 and "larger than the limit of 1000 bytes" in huge.json()["detail"]
    client.force_login(world["owner"])
    page = client.post(
        reverse("dataset-upload"),
        {"name": "big", "file": SimpleUploadedFile("big.jsonl", b"x" * (2 * 2**20))},
        HTTP_X_REQUESTED_WITH="XMLHttpRequest",
    )
    assert (
        page.status_code == 413 and "larger than the limit of 1000 bytes" in page.json()["errors"]["file"][0]
    )
    assert not DatasetUpload.objects.exists()


def test_statistics_can_count_with_a_model_in_the_model_store(world, settings, tmp_path):
    from gpu_jobs.tiny_model import build_char_tokenizer

    settings.MODEL_STORE = tmp_path / "models"
    (settings.MODEL_STORE / "char").mkdir(parents=True)
    build_char_tokenizer().backend_tokenizer.save(str(settings.MODEL_STORE / "char" / "tokenizer.json"))
    api = api_client(world["owner"])
    upload = ingested(api, api_upload(api, "sums", jsonl(ROWS[:2]), **MAPPING, tokenizer="char"))
    version = api.get(f"/api/v1/datasets/versions/{upload['dataset_version']}").json()
    assert version["stats"]["tokenizer"].endswith("/models/char")
    assert version["stats"]["prompt_tokens"]["max"] == 4
    outside = api_upload(api, "sums", jsonl(ROWS[:2]), **MAPPING, tokenizer="../../etc")
    assert outside.status_code == 400 and outside.json()["errors"][0]["field"] == "tokenizer"


def test_an_openai_chat_jsonl_uploads_over_the_api_with_no_mapping_fields(world):
    api = api_client(world["owner"])
    records = [
        {"messages": [{"role": "user", "content": f"{a}+{a}="}], "reference_answer": str(2 * a)}
        for a in range(4)
    ]
    upload = ingested(api, api_upload(api, "chat", jsonl(records), file_name="train.jsonl"))
    assert upload["state"] == "ready" and upload["rows_valid"] == 4, upload
    rows = api.get(f"/api/v1/datasets/versions/{upload['dataset_version']}/rows").json()["results"]
    assert rows[1]["prompt"] == [{"role": "user", "content": "1+1="}]
    assert rows[1]["answer"] == "2" and rows[1]["reference_answer"] == "2"
