"""Uploads and dataset versions in an S3-compatible store through django-storages.

The store is moto's S3 server, started as its own process on 127.0.0.1: the platform talks to it over HTTP
with boto3 exactly as it would to AWS S3 or MinIO. The local folders stay empty, each host (here: each
cache folder) reads a version through its own download, and deleting a version removes the object.
Named users: owner (owner of Core).
"""

import subprocess
import sys
import time
from pathlib import Path

import boto3
import httpx
import pytest
from django.core.files.uploadedfile import SimpleUploadedFile

from anneal.datasets.models import DatasetUpload, DatasetVersion
from anneal.datasets.services import dataset_upload_ingest, dataset_version_create_from_rows
from anneal.datasets.storage import StoredFileMissing, local_copy
from tests.stack import free_port, jsonl
from tests.world import api_client

pytestmark = pytest.mark.django_db(transaction=True)

BUCKET = "anneal-test"
MAPPING = {"prompt_field": "question", "answer_field": "solution"}


@pytest.fixture(scope="module")
def s3_endpoint():
    port = free_port()
    moto = Path(sys.executable).with_name("moto_server")
    server = subprocess.Popen(
        [str(moto), "-H", "127.0.0.1", "-p", str(port)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    endpoint = f"http://127.0.0.1:{port}"
    try:
        for _ in range(200):
            try:
                httpx.get(endpoint, timeout=1)
                break
            except httpx.HTTPError:
                time.sleep(0.05)
        else:
            pytest.fail("moto's S3 server did not answer on 127.0.0.1 within 10 s")
        yield endpoint
    finally:
        server.terminate()
        server.wait(timeout=10)


@pytest.fixture
def bucket(s3_endpoint, settings, tmp_path, monkeypatch):
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "test")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "test")
    client = boto3.client("s3", endpoint_url=s3_endpoint, region_name="us-east-1")
    client.create_bucket(Bucket=BUCKET)
    settings.UPLOAD_DIR = tmp_path / "uploads"
    settings.DATASET_DIR = tmp_path / "datasets"
    settings.DATASET_CACHE_DIR = tmp_path / "cache-web"
    settings.S3_BUCKET = BUCKET
    settings.STORAGES = {
        **settings.STORAGES,
        "datasets": {
            "BACKEND": "storages.backends.s3.S3Storage",
            "OPTIONS": {
                "bucket_name": BUCKET,
                "location": "anneal",
                "endpoint_url": s3_endpoint,
                "region_name": "us-east-1",
                "access_key": "test",
                "secret_key": "test",
                "file_overwrite": False,
                "default_acl": None,
            },
        },
    }
    yield client
    for item in client.list_objects_v2(Bucket=BUCKET).get("Contents", []):
        client.delete_object(Bucket=BUCKET, Key=item["Key"])
    client.delete_bucket(Bucket=BUCKET)


def keys(client) -> list[str]:
    return sorted(item["Key"] for item in client.list_objects_v2(Bucket=BUCKET).get("Contents", []))


def local_files(settings) -> list[Path]:
    return [
        p
        for folder in (settings.UPLOAD_DIR, settings.DATASET_DIR)
        if folder.exists()
        for p in folder.rglob("*")
    ]


@pytest.fixture
def owner_api(world):
    return api_client(world["owner"]), world["core"]


def upload(api, body: bytes, name: str = "rows.jsonl", **fields) -> dict:
    response = api.post(
        "/api/v1/datasets/uploads",
        {"name": "sums", "file": SimpleUploadedFile(name, body), **MAPPING, **fields},
        format="multipart",
    )
    assert response.status_code == 202, response.content
    return response.json()


ROWS = [{"question": f"{a}+{a}=", "solution": str(2 * a)} for a in range(20)]


def test_an_upload_is_streamed_to_the_bucket_and_frozen_there(bucket, owner_api, settings):
    api, _ = owner_api
    sent = upload(api, jsonl(ROWS))
    stored = DatasetUpload.objects.get(pk=sent["id"])
    assert stored.file_path.startswith(f"s3://{BUCKET}/anneal/uploads/")
    assert keys(bucket) == [stored.file_path.removeprefix(f"s3://{BUCKET}/")]

    settings.DATASET_CACHE_DIR = settings.DATASET_CACHE_DIR.with_name("cache-worker")  # another host
    dataset_upload_ingest(upload_id=sent["id"])
    version = DatasetVersion.objects.get()
    assert version.rows_path.startswith(f"s3://{BUCKET}/anneal/datasets/")
    # The upload itself is gone once its rows are frozen; only the version's object stays.
    assert keys(bucket) == [version.rows_path.removeprefix(f"s3://{BUCKET}/")]
    assert local_files(settings) == []

    settings.DATASET_CACHE_DIR = settings.DATASET_CACHE_DIR.with_name("cache-fresh")  # a third host
    rows = api.get(f"/api/v1/datasets/versions/{version.pk}/rows", {"offset": 18, "limit": 5}).json()
    assert [r["prompt"] for r in rows["results"]] == ["18+18=", "19+19="]
    assert local_copy(version.rows_path).is_relative_to(settings.DATASET_CACHE_DIR)


def test_bad_rows_are_reviewed_from_the_bucket_and_the_error_file_downloads(bucket, owner_api, settings):
    api, _ = owner_api
    body = jsonl([*ROWS[:3], {"question": "", "solution": "1"}, {"solution": "2"}])
    sent = upload(api, body)
    dataset_upload_ingest(upload_id=sent["id"])
    review = api.get(f"/api/v1/datasets/uploads/{sent['id']}").json()
    assert review["state"] == "review" and review["rows_valid"] == 3 and review["error_count"] == 2
    stored = DatasetUpload.objects.get(pk=sent["id"])
    assert stored.errors_path.startswith(f"s3://{BUCKET}/") and stored.staged_path.startswith(
        f"s3://{BUCKET}/"
    )

    settings.DATASET_CACHE_DIR = settings.DATASET_CACHE_DIR.with_name("cache-other")
    download = api.get(f"/api/v1/datasets/uploads/{sent['id']}/errors.csv")
    lines = b"".join(download.streaming_content).decode().splitlines()
    assert lines[0] == "row,field,problem" and len(lines) == 3
    assert local_copy(stored.errors_path).is_relative_to(settings.DATASET_CACHE_DIR)  # read from the bucket

    assert api.post(f"/api/v1/datasets/uploads/{sent['id']}/accept").status_code == 201
    version = DatasetVersion.objects.get()
    assert version.rows_path == stored.staged_path and version.row_count == 3
    assert local_files(settings) == []


def test_a_split_and_a_delete_work_on_stored_versions(bucket, owner_api, settings):
    api, team = owner_api
    version = dataset_version_create_from_rows(
        team=team, user=None, name="made", rows=[{"prompt": f"{i}?", "answer": str(i)} for i in range(40)]
    )
    assert version.rows_path.startswith(f"s3://{BUCKET}/")
    response = api.post(
        f"/api/v1/datasets/versions/{version.pk}/split",
        {"method": "seed", "eval_fraction": 0.25, "seed": 3},
        format="json",
    )
    assert response.status_code == 201, response.content
    parts = DatasetVersion.objects.filter(parent=version)
    assert sum(p.row_count for p in parts) == 40 and all(p.rows_path.startswith("s3://") for p in parts)
    assert len(keys(bucket)) == 3

    eval_part = parts.get(split_role="eval")
    assert api.delete(f"/api/v1/datasets/versions/{eval_part.pk}").status_code == 204
    assert eval_part.rows_path.removeprefix(f"s3://{BUCKET}/") not in keys(bucket)
    with pytest.raises(StoredFileMissing):
        local_copy(eval_part.rows_path)
    assert len(keys(bucket)) == 2


def test_a_rejected_upload_leaves_only_its_error_list_in_the_bucket(bucket, owner_api, settings):
    api, _ = owner_api
    sent = upload(api, jsonl(ROWS[:2]) + b"[1]\n")
    dataset_upload_ingest(upload_id=sent["id"])
    assert api.get(f"/api/v1/datasets/uploads/{sent['id']}").json()["state"] == "review"
    assert api.post(f"/api/v1/datasets/uploads/{sent['id']}/reject").json()["state"] == "rejected"
    stored = DatasetUpload.objects.get(pk=sent["id"])
    assert keys(bucket) == [stored.errors_path.removeprefix(f"s3://{BUCKET}/")]


def test_a_file_that_cannot_be_read_leaves_only_its_error_list(bucket, owner_api, settings):
    api, _ = owner_api
    sent = upload(api, b"\x1f\x8b not really gzip", name="rows.jsonl.gz")
    dataset_upload_ingest(upload_id=sent["id"])
    failed = api.get(f"/api/v1/datasets/uploads/{sent['id']}").json()
    assert failed["state"] == "failed" and "cannot read the file" in failed["errors"][0]["message"]
    assert [k for k in keys(bucket) if "-errors-" not in k] == []
