"""Size limits on every way a body or a file comes in, and Parquet read within bounds off the web process.

- Each upload path (the datasets API, the upload page, /v1/files) and every other request refuses a body over
  its limit with a 413 naming the limit, before a view reads it; through the ASGI application a body with no
  Content-Length is cut off as it streams in (the bytes taken from the client are counted).
- A Parquet file of a few kilobytes that decodes to gigabytes is refused with the limit named, and the process
  reading it does not grow by the bomb's size; a cell over the limit is a row error naming row and column;
  too many columns are refused from the footer; a valid file (nested chat messages too) still ingests.
- The preview of an upload is read by the worker's task (queued by name on the default queue), never by the
  page or the API.

Named users: owner (owner of team Core).
"""

import asyncio
import io
import json
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.test import Client
from django.urls import reverse

from anneal.datasets.models import Dataset, DatasetUpload, DatasetVersion, UploadState
from anneal.datasets.services import dataset_upload_create, dataset_upload_ingest, dataset_upload_preview
from tests.world import api_client, page_client

pytestmark = [pytest.mark.security, pytest.mark.usefixtures("data_dirs")]

REPO = Path(__file__).resolve().parents[2]
MB = 1024 * 1024


@pytest.fixture
def owner(world):
    return world["owner"], world["core"]


def parquet(table: pa.Table, **options) -> bytes:
    sink = io.BytesIO()
    pq.write_table(table, sink, **options)
    return sink.getvalue()


def dictionary_bomb(*, rows: int, cell_mb: int) -> bytes:
    """One string of ``cell_mb`` MB stored once as a dictionary entry that every row points to: the file is
    a few kilobytes, its footer says about ``cell_mb`` MB, and the rows decode to ``rows * cell_mb`` MB."""
    text = pa.array(["a" * (cell_mb * MB)])
    prompt = pa.DictionaryArray.from_arrays(pa.array([0] * rows, pa.int32()), text)
    return parquet(pa.table({"prompt": prompt, "answer": ["2"] * rows}), compression="zstd")


def ingest(owner, name: str, body: bytes, mapping=None) -> DatasetUpload:
    user, team = owner
    upload = dataset_upload_create(
        team=team,
        user=user,
        name="limits",
        uploaded_file=SimpleUploadedFile(name, body),
        mapping=mapping or {"prompt": "prompt", "answer": "answer"},
    )
    return dataset_upload_ingest(upload_id=upload.id)


def assert_nothing_stored(data_dirs) -> None:
    assert not Dataset.objects.exists() and not DatasetVersion.objects.exists()
    kept = list((data_dirs / "datasets").rglob("*")) if (data_dirs / "datasets").exists() else []
    assert [p for p in kept if p.is_file()] == []
    assert not any((data_dirs / "uploads").glob("*.upload"))


# --- every path refuses an oversized body with a 413 naming the limit -----------------------------------


def test_each_upload_path_refuses_an_oversized_body_with_413_naming_the_limit(owner, settings):
    settings.UPLOAD_MAX_BYTES = 1 * MB
    big = b"x" * (3 * MB)  # over the file limit and the 1 MB the form's other fields may add
    user, _ = owner
    response = api_client(user).post(
        "/api/v1/datasets/uploads",
        {"name": "big", "file": SimpleUploadedFile("big.jsonl", big)},
        format="multipart",
    )
    assert response.status_code == 413
    assert response.json()["errors"] == [
        {
            "field": "file",
            "message": "the file is larger than the limit of 1 MB (ANNEAL_UPLOAD_MAX_MB): "
            "split it into smaller files, or compress it with gzip",
        }
    ]

    page = page_client(user)
    form = {"name": "big", "file": SimpleUploadedFile("big.jsonl", big)}
    xhr = page.post(reverse("dataset-upload"), form, HTTP_X_REQUESTED_WITH="XMLHttpRequest")
    assert xhr.status_code == 413
    assert "larger than the limit of 1 MB" in xhr.json()["errors"]["file"][0]
    form = {"name": "big", "file": SimpleUploadedFile("big.jsonl", big)}
    plain = page.post(reverse("dataset-upload"), form)  # a browser without JavaScript gets a page
    assert plain.status_code == 413 and plain["Content-Type"].startswith("text/html")
    assert "larger than the limit of 1 MB (ANNEAL_UPLOAD_MAX_MB)" in plain.content.decode()

    files = Client().post("/v1/files", {"file": SimpleUploadedFile("batch.jsonl", big), "purpose": "batch"})
    assert files.status_code == 413
    error = files.json()["error"]
    assert error["code"] == "request_too_large" and error["param"] == "file"
    assert "larger than the limit of 1 MB (ANNEAL_UPLOAD_MAX_MB)" in error["message"]
    assert not DatasetUpload.objects.exists()


def test_a_file_just_over_the_limit_is_refused_with_its_size_and_413(owner, settings):
    # Within the form's room the body passes; the file itself is then measured and refused.
    settings.UPLOAD_MAX_BYTES = 1 * MB
    api = api_client(owner[0])
    body = b'{"prompt": "1+1=", "answer": "2"}\n' * (MB // 34 + 100)
    response = api.post(
        "/api/v1/datasets/uploads",
        {"name": "big", "file": SimpleUploadedFile("big.jsonl", body)},
        format="multipart",
    )
    assert response.status_code == 413
    assert f"the file is {len(body)} bytes, over the limit of 1 MB" in response.json()["detail"]
    assert not DatasetUpload.objects.exists()


def test_other_requests_have_their_own_limits(owner, settings):
    settings.REQUEST_MAX_BYTES = 4096
    api = api_client(owner[0])
    response = api.post("/api/v1/jobs", {"name": "x" * 10_000}, format="json")
    assert response.status_code == 413
    assert response.json()["errors"][0]["message"] == (
        "the request body is larger than the limit of 4096 bytes (ANNEAL_REQUEST_MAX_MB)"
    )
    settings.DEPLOY_MAX_REQUEST_KB = 1
    chat = Client().post("/v1/chat/completions", {"messages": "x" * 5000}, content_type="application/json")
    assert chat.status_code == 413 and chat.json()["error"]["code"] == "request_too_large"
    assert "(ANNEAL_V1_MAX_REQUEST_KB=1)" in chat.json()["error"]["message"]


# --- through the ASGI application the body is cut off while it streams in ------------------------------


def asgi_post(path: str, *, chunk: int, chunks: int, content_length: int | None = None) -> dict:
    """POST ``chunks`` pieces of ``chunk`` bytes to the ASGI application as a client that streams them (no
    Content-Length unless given); returns the status, the body and how many bytes the server took."""
    from anneal.asgi import application

    headers = [(b"host", b"127.0.0.1"), (b"content-type", b"multipart/form-data; boundary=xyz")]
    if content_length is not None:
        headers.append((b"content-length", str(content_length).encode()))
    scope = {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": "POST",
        "scheme": "http",
        "path": path,
        "raw_path": path.encode(),
        "root_path": "",
        "query_string": b"",
        "headers": headers,
        "client": ("127.0.0.1", 40000),
        "server": ("127.0.0.1", 8000),
    }
    state = {"taken": 0, "sent": 0, "messages": []}

    async def receive() -> dict:
        if state["sent"] >= chunks:
            await asyncio.Event().wait()  # the whole body is sent: a client then waits for the answer
        state["sent"] += 1
        state["taken"] += chunk
        return {"type": "http.request", "body": b"x" * chunk, "more_body": state["sent"] < chunks}

    async def send(message: dict) -> None:
        state["messages"].append(message)

    async def run() -> None:
        await asyncio.wait_for(application(scope, receive, send), timeout=60)

    asyncio.run(run())
    start = next(m for m in state["messages"] if m["type"] == "http.response.start")
    body = b"".join(m.get("body", b"") for m in state["messages"] if m["type"] == "http.response.body")
    return {"status": start["status"], "body": body, "taken": state["taken"]}


def test_a_streamed_body_over_the_limit_is_cut_off_early(settings):
    settings.UPLOAD_MAX_BYTES = 1 * MB  # the body may hold 2 MB with the form's room
    chunk = 64 * 1024
    streamed = asgi_post("/api/v1/datasets/uploads", chunk=chunk, chunks=160)  # 10 MB offered
    assert streamed["status"] == 413
    assert "larger than the limit of 1 MB (ANNEAL_UPLOAD_MAX_MB)" in json.loads(streamed["body"])["detail"]
    assert streamed["taken"] <= 2 * MB + chunk  # stopped at the limit, not at the end of the 10 MB

    declared = asgi_post("/v1/files", chunk=chunk, chunks=160, content_length=160 * chunk)
    assert declared["status"] == 413 and declared["taken"] == 0  # refused from its Content-Length alone
    assert json.loads(declared["body"])["error"]["code"] == "request_too_large"

    # Under the limit the same stream is read to its end (and refused for want of a login, not its size).
    small = asgi_post("/api/v1/datasets/uploads", chunk=chunk, chunks=8)
    assert small["status"] in (401, 403) and small["taken"] == 8 * chunk


# --- Parquet: bounded reading -------------------------------------------------------------------------


def test_a_parquet_dictionary_bomb_is_refused_naming_the_limit(owner, data_dirs):
    bomb = dictionary_bomb(rows=4096, cell_mb=1)  # 4 GB of rows
    assert len(bomb) < 16 * 1024
    upload = ingest(owner, "bomb.parquet", bomb)
    assert upload.state == UploadState.FAILED
    message = upload.errors[-1]["message"]
    assert message.startswith("the file decompresses to more than the limit of 2097152000 bytes")
    assert "(ANNEAL_UPLOAD_MAX_DECOMPRESSED_MB)" in message
    assert_nothing_stored(data_dirs)


def test_the_bomb_is_refused_without_the_reader_allocating_it(tmp_path):
    # In a process of its own, so its peak memory is the reader's: the bomb would need 4 GB expanded.
    (tmp_path / "bomb.parquet").write_bytes(dictionary_bomb(rows=4096, cell_mb=1))
    program = """
import resource, sys
from pathlib import Path
from anneal.datasets.readers import FileRefused, ReadLimits, open_records
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
try:
    with open_records(path=Path(sys.argv[1]), file_name="bomb.parquet", limits=ReadLimits()) as source:
        rows = sum(1 for _ in source)
    print("read", rows)
except FileRefused as exc:
    grown = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before
    print("refused", grown // 1024, exc.message)
"""
    result = subprocess.run(
        [sys.executable, "-c", program, str(tmp_path / "bomb.parquet")],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=REPO,
        env={"PYTHONPATH": str(REPO / "platform"), "PATH": "/usr/bin:/bin"},
    )
    assert result.returncode == 0, result.stderr
    verdict, grown_mb, message = result.stdout.strip().split(" ", 2)
    assert verdict == "refused" and "decompresses to more than the limit" in message
    assert int(grown_mb) < 100, f"the reader grew by {grown_mb} MB"


def test_a_footer_that_declares_too_much_is_refused_before_any_row_is_read(owner, data_dirs, settings):
    settings.UPLOAD_MAX_DECOMPRESSED_BYTES = 8 * MB
    rows = ["b" * MB] * 64  # 64 MB of text, plainly encoded: zstd makes it a few kilobytes
    body = parquet(pa.table({"prompt": rows, "answer": ["2"] * 64}), compression="zstd", use_dictionary=False)
    assert len(body) < 64 * 1024
    upload = ingest(owner, "wide.parquet", body)
    assert upload.state == UploadState.FAILED and upload.rows_seen == 0
    message = upload.errors[-1]["message"]
    assert message.startswith("the file decompresses to more than the limit of 8388608 bytes")
    assert "row group(s) hold" in message
    assert_nothing_stored(data_dirs)


def test_too_many_columns_are_refused_from_the_footer(owner, data_dirs, settings):
    settings.PARQUET_MAX_COLUMNS = 10
    columns = {"prompt": ["1+1="], "answer": ["2"], **{f"extra{i}": [i] for i in range(18)}}
    upload = ingest(owner, "columns.parquet", parquet(pa.table(columns)))
    assert upload.state == UploadState.FAILED
    assert upload.errors[-1]["message"] == (
        "the file has 20 columns, over the limit of 10 (ANNEAL_PARQUET_MAX_COLUMNS): "
        "keep only the columns the dataset needs"
    )
    assert_nothing_stored(data_dirs)


def test_an_oversized_cell_is_a_row_error_naming_row_and_column(owner, settings):
    settings.DATASET_MAX_LINE_BYTES = MB
    huge = "c" * (2 * MB)
    table = pa.table(
        {
            "prompt": ["1+1=", "2+2=", "3+3=", "4+4="],
            "answer": ["2", huge, "6", "8"],
            "messages": [[{"role": "user", "content": "hi"}], [], [{"role": "user", "content": huge}], []],
        }
    )
    upload = ingest(owner, "cells.parquet", parquet(table))
    assert upload.state == UploadState.REVIEW and upload.rows_valid == 2
    assert [(e["row"], e["field"]) for e in upload.errors] == [(2, "answer"), (3, "messages")]
    assert upload.errors[0]["message"] == (
        f"column 'answer' holds {2 * MB + 8} bytes in this row, over the limit of {MB} bytes for one cell "
        "(ANNEAL_DATASET_MAX_LINE_KB)"
    )


def test_a_valid_parquet_file_still_ingests(owner):
    table = pa.table(
        {
            "prompt": pa.array(["1+1=", "2+2=", "3+3="]).dictionary_encode(),
            "answer": ["2", "4", "6"],
            "messages": [[{"role": "user", "content": "hi"}], [], None],
            "difficulty": [1, 2, None],
        }
    )
    upload = ingest(owner, "ok.parquet", parquet(table, compression="zstd"))
    assert upload.state == UploadState.READY and upload.rows_valid == 3
    from anneal.datasets.storage import read_rows

    rows = read_rows(DatasetVersion.objects.get().rows_path)
    assert [r["prompt"] for r in rows] == ["1+1=", "2+2=", "3+3="]
    assert rows[0]["messages"] == [{"role": "user", "content": "hi"}]


# --- the preview is read by the worker, never by the web ----------------------------------------------


@pytest.mark.django_db(transaction=True)
def test_the_preview_is_queued_for_the_worker_by_name_and_the_page_reads_no_file(settings, owner):
    import redis

    user, team = owner
    broker = redis.Redis.from_url(settings.CELERY_BROKER_URL)
    broker.delete("default")
    bomb = dictionary_bomb(rows=4096, cell_mb=1)
    upload = dataset_upload_create(
        team=team, user=user, name="b", uploaded_file=SimpleUploadedFile("b.parquet", bomb), mapping=None
    )
    queued = [json.loads(m) for m in broker.lrange("default", 0, -1)]
    broker.delete("default")
    assert [(m["headers"]["task"], json.loads(_body(m))[0]) for m in queued] == [
        ("datasets.preview", [upload.pk])
    ]
    # The page and the API only show what the worker stored: with the file gone they still answer.
    stored = Path(upload.file_path)
    kept = stored.read_bytes()
    stored.unlink()
    page = page_client(user)
    assert "Reading the first rows" in page.get(reverse("upload-detail", args=[upload.pk])).content.decode()
    api = api_client(user)
    assert api.get(f"/api/v1/datasets/uploads/{upload.pk}").json()["preview_ready"] is False
    stored.write_bytes(kept)
    dataset_upload_preview(upload_id=upload.pk)  # what the task runs in the worker
    preview = api.get(f"/api/v1/datasets/uploads/{upload.pk}/preview").json()
    assert preview["ready"] is True
    assert preview["rows"] == [] and "decompresses to more than the limit" in preview["refused"]
    assert "cannot be read" in page.get(reverse("upload-detail", args=[upload.pk])).content.decode()


def _body(message: dict) -> str:
    import base64

    return base64.b64decode(message["body"]).decode()
