"""Hostile and broken uploads: each is refused with a message naming the row, field or limit, the ingest
returns normally (a worker would take the next task), and nothing is stored: no dataset, no version, no
file left in the dataset folder."""

import gzip
import io
import json

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from django.core.files.uploadedfile import SimpleUploadedFile

from anneal.datasets.models import Dataset, DatasetUpload, DatasetVersion, UploadState
from anneal.datasets.services import dataset_upload_create, dataset_upload_ingest, dataset_upload_preview
from anneal.errors import InputError

pytestmark = [pytest.mark.security, pytest.mark.django_db, pytest.mark.usefixtures("data_dirs")]

GOOD = b'{"prompt": "1+1=", "answer": "2"}\n'


@pytest.fixture
def owner(world):
    return world["owner"], world["core"]


def ingest(owner, name: str, body: bytes, mapping=None) -> DatasetUpload:
    user, team = owner
    upload = dataset_upload_create(
        team=team,
        user=user,
        name="hostile",
        uploaded_file=SimpleUploadedFile(name, body),
        mapping=mapping or {"prompt": "prompt", "answer": "answer"},
    )
    return dataset_upload_ingest(upload_id=upload.id)


def assert_nothing_stored(data_dirs) -> None:
    assert not Dataset.objects.exists() and not DatasetVersion.objects.exists()
    leftovers = list((data_dirs / "datasets").rglob("*")) if (data_dirs / "datasets").exists() else []
    assert [p for p in leftovers if p.is_file()] == []
    assert not any((data_dirs / "uploads").glob("*.upload"))  # the raw upload is removed too


def test_gzip_bomb_stops_at_the_decompressed_limit(owner, data_dirs, settings):
    settings.UPLOAD_MAX_DECOMPRESSED_BYTES = 8 * 1024 * 1024
    bomb = gzip.compress(b"\n" * (64 * 1024 * 1024), compresslevel=9)  # 64 MB of newlines in ~64 KB
    assert len(bomb) < 200_000
    upload = ingest(owner, "bomb.jsonl.gz", bomb)
    assert upload.state == UploadState.FAILED
    assert "decompresses to more than the limit of 8388608 bytes" in upload.errors[0]["message"]
    assert_nothing_stored(data_dirs)


def test_a_single_line_of_64_mb_is_a_named_row_error(owner, data_dirs):
    # The default line limit (8 MB) applies; memory never holds more than the limit of that line.
    huge = b'{"prompt": "' + b"x" * (64 * 1024 * 1024) + b'"}\n'
    upload = ingest(owner, "huge.jsonl.gz", gzip.compress(huge, compresslevel=1))
    assert upload.state == UploadState.FAILED
    assert upload.errors == [
        {"row": 1, "field": "(line)", "message": "line is longer than the limit of 8388608 bytes"}
    ]
    assert_nothing_stored(data_dirs)


def test_a_huge_csv_line_is_refused(owner, data_dirs, settings):
    settings.DATASET_MAX_LINE_BYTES = 1024 * 1024
    body = b"prompt,answer\n1+1=,2\n" + b"y" * (5 * 1024 * 1024) + b",3\n"
    upload = ingest(owner, "huge.csv", body)
    assert upload.state == UploadState.FAILED
    assert upload.errors[0]["message"] == "line 3 is longer than the limit of 1048576 bytes"
    assert_nothing_stored(data_dirs)


def test_invalid_utf8_in_csv_is_refused_with_the_row(owner, data_dirs):
    body = b"prompt,answer\n1+1=,2\n\xff\xfe oops,3\n"
    upload = ingest(owner, "bad.csv", body)
    assert upload.state == UploadState.FAILED
    assert upload.errors[0] == {
        "row": 3,
        "field": "(file)",
        "message": "line 3 is not valid UTF-8 (at byte 1)",
    }
    assert_nothing_stored(data_dirs)


def test_invalid_utf8_in_jsonl_names_the_line(owner, data_dirs):
    upload = ingest(owner, "bad.jsonl", b'{"prompt": "\xc3\x28", "answer": "1"}\n')
    assert upload.state == UploadState.FAILED
    assert upload.errors == [{"row": 1, "field": "(line)", "message": "not valid UTF-8 at byte 13"}]
    assert_nothing_stored(data_dirs)


def test_ragged_csv_rows_are_named_and_wait_for_review(owner, data_dirs):
    body = b"prompt,answer\n1+1=,2\n2+2=,4,extra\n3+3=\n"
    upload = ingest(owner, "ragged.csv", body)
    assert upload.state == UploadState.REVIEW
    assert upload.errors == [
        {"row": 2, "field": "(row)", "message": "has 3 fields, the header has 2"},
        {"row": 3, "field": "(row)", "message": "has 1 fields, the header has 2"},
    ]
    assert upload.rows_valid == 1
    assert not DatasetVersion.objects.exists()  # nothing is a version until the expert accepts


def test_parquet_with_wrong_column_types_is_refused(owner, data_dirs):
    table = pa.table({"prompt": pa.array([1, 2], pa.int64()), "answer": ["a", "b"]})
    sink = io.BytesIO()
    pq.write_table(table, sink)
    upload = ingest(owner, "typed.parquet", sink.getvalue())
    assert upload.state == UploadState.FAILED
    assert upload.errors[0] == {
        "row": 0,
        "field": "prompt",
        "message": "column 'prompt' (mapped to prompt) has Parquet type int64; "
        "prompt must be text or a list of chat messages",
    }
    assert_nothing_stored(data_dirs)


def test_a_file_that_only_claims_to_be_parquet_is_refused(owner, data_dirs):
    upload = ingest(owner, "fake.parquet", b"PAR1 not really")
    assert upload.state == UploadState.FAILED
    assert upload.errors[0]["message"].startswith("not a readable Parquet file")
    assert_nothing_stored(data_dirs)


@pytest.mark.parametrize(
    ("name", "body"),
    [
        ("empty.jsonl.gz", gzip.compress(b"")),
        ("blank.jsonl", b"\n\n  \n"),
        ("header.csv", b"prompt,answer\n"),
    ],
)
def test_files_without_rows_are_refused(owner, data_dirs, name, body):
    upload = ingest(owner, name, body)
    assert upload.state == UploadState.FAILED
    assert upload.errors == [{"row": 0, "field": "(file)", "message": "the file has no rows"}]
    assert_nothing_stored(data_dirs)


def test_an_empty_file_or_one_over_the_limit_is_refused_at_once(owner, data_dirs, settings):
    with pytest.raises(InputError, match="the file is empty"):
        ingest(owner, "empty.jsonl", b"")
    settings.UPLOAD_MAX_BYTES = 1024
    with pytest.raises(InputError, match="over the limit of 1024 bytes"):
        ingest(owner, "big.jsonl", GOOD * 100)
    assert not DatasetUpload.objects.exists()
    assert_nothing_stored(data_dirs)


def test_a_mapping_naming_a_missing_column_is_refused(owner, data_dirs):
    upload = ingest(owner, "rows.csv", b"question,answer\n1+1=,2\n", mapping={"prompt": "prompt"})
    assert upload.state == UploadState.FAILED
    assert upload.errors[0]["field"] == "mapping.prompt"
    assert upload.errors[0]["message"] == (
        "the mapping names column 'prompt' for prompt, but the file has no such column "
        "(its columns: question, answer)"
    )
    jsonl = ingest(
        owner, "rows.jsonl", json.dumps({"question": "1+1="}).encode(), mapping={"prompt": "prompt"}
    )
    assert jsonl.state == UploadState.FAILED
    assert jsonl.errors == [
        {"row": 1, "field": "prompt", "message": "missing column 'prompt' (mapped to prompt)"}
    ]
    assert_nothing_stored(data_dirs)


def test_a_truncated_gzip_is_refused(owner, data_dirs):
    body = gzip.compress(GOOD * 10_000)[:-200]
    upload = ingest(owner, "cut.jsonl.gz", body)
    assert upload.state == UploadState.FAILED
    assert upload.errors[-1]["message"].startswith("cannot read the file")
    assert_nothing_stored(data_dirs)


def test_an_unknown_file_type_is_refused(owner):
    with pytest.raises(InputError, match="unknown type"):
        ingest(owner, "rows.xlsx", GOOD)


def test_the_mapping_preview_of_a_bomb_stops_early(owner):
    from anneal.datasets.preview import PREVIEW_MAX_BYTES
    from anneal.datasets.selectors import upload_preview

    user, team = owner
    bomb = gzip.compress(b"\0" * (1024 * 1024), compresslevel=9) * 2100  # 2.1 GB of zeros
    upload = dataset_upload_create(
        team=team, user=user, name="b", uploaded_file=SimpleUploadedFile("b.jsonl.gz", bomb), mapping=None
    )
    assert upload.state == UploadState.MAPPING
    assert upload_preview(upload=upload) is None  # the web reads nothing: the worker's task does
    dataset_upload_preview(upload_id=upload.pk)
    upload.refresh_from_db()
    preview = upload_preview(upload=upload)
    assert preview.rows == [] and f"expand to more than {PREVIEW_MAX_BYTES} bytes" in preview.refused


def test_an_upload_whose_worker_died_fails_instead_of_being_read_again(owner, data_dirs):
    user, team = owner
    upload = dataset_upload_create(
        team=team,
        user=user,
        name="x",
        uploaded_file=SimpleUploadedFile("x.jsonl", GOOD),
        mapping={"prompt": "prompt"},
    )
    DatasetUpload.objects.filter(pk=upload.pk).update(
        state=UploadState.PROCESSING
    )  # as a killed worker left it
    assert (
        dataset_upload_ingest(upload_id=upload.pk).state == UploadState.PROCESSING
    )  # a duplicate task: no-op
    failed = dataset_upload_ingest(upload_id=upload.pk, redelivered=True)
    assert failed.state == UploadState.FAILED and "the worker stopped" in failed.errors[0]["message"]
    assert_nothing_stored(data_dirs)
