"""The uploads sweep: what a web process killed mid-upload leaves is removed, what an upload refers to stays."""

import os
import time
from pathlib import Path

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile

from anneal.datasets import storage
from anneal.datasets.housekeeping import uploads_sweep
from anneal.datasets.models import DatasetUpload

pytestmark = pytest.mark.django_db


@pytest.fixture
def folders(settings, tmp_path):
    settings.UPLOAD_DIR = tmp_path / "uploads"
    settings.FILE_UPLOAD_TEMP_DIR = str(tmp_path / "uploads" / "receiving")
    Path(settings.FILE_UPLOAD_TEMP_DIR).mkdir(parents=True)
    return settings


def old_file(path: Path, data: bytes) -> Path:
    """`path` holding `data`, last written two hours ago."""
    path.write_bytes(data)
    then = time.time() - 7200
    os.utime(path, (then, then))
    return path


def test_files_no_upload_refers_to_are_removed_and_referenced_ones_kept(folders, world):
    stored = Path(
        storage.store_upload(area="uploads", name="kept.upload", upload=SimpleUploadedFile("a", b"x"))
    )
    errors = old_file(stored.with_name("1-errors.jsonl"), b"{}\n")
    DatasetUpload.objects.create(
        team=world["core"],
        created_by=world["owner"],
        dataset_name="d",
        file_name="a.jsonl",
        file_path=str(stored),
        errors_path=str(errors),
        size_bytes=1,
        state="ready",
    )
    old_file(stored, b"x")
    orphan = old_file(stored.with_name("orphan.upload"), b"whole")  # stored; the process died before its row
    partial = old_file(stored.with_name("cut.upload.partial"), b"ha")  # the process died while writing it
    # The process died while Django parsed the request.
    temporary = old_file(Path(folders.FILE_UPLOAD_TEMP_DIR) / "tmpabc.upload.jsonl", b"half")
    young = stored.with_name("in-flight.upload.partial")  # a request being taken right now
    young.write_bytes(b"...")
    counts = uploads_sweep(older_than_s=3600)
    assert counts == {"temporary_files": 1, "unreferenced_files": 2, "ingests_requeued": 0}
    assert stored.exists() and errors.exists() and young.exists()
    assert not orphan.exists() and not partial.exists() and not temporary.exists()


def test_a_store_cut_short_leaves_no_file_under_the_final_name(folders):
    class Dies(SimpleUploadedFile):
        def chunks(self, chunk_size=None):
            yield b"first half"
            raise KeyboardInterrupt  # the process stopping mid-copy

    with pytest.raises(KeyboardInterrupt):
        storage.store_upload(area="uploads", name="cut.upload", upload=Dies("a", b"unused"))
    assert list(Path(folders.UPLOAD_DIR).glob("cut.upload*")) == []


def test_an_upload_left_pending_is_queued_again(folders, world, monkeypatch):
    sent = []
    monkeypatch.setattr("anneal.datasets.housekeeping.enqueue", lambda name, *args: sent.append((name, args)))
    upload = DatasetUpload.objects.create(
        team=world["core"],
        created_by=world["owner"],
        dataset_name="d",
        file_name="a.jsonl",
        file_path="/nowhere",
        size_bytes=1,
        state="pending",
    )
    assert uploads_sweep(older_than_s=3600)["ingests_requeued"] == 0  # just created: its ingest may be queued
    DatasetUpload.objects.filter(pk=upload.pk).update(created_at=upload.created_at.replace(year=2020))
    assert uploads_sweep(older_than_s=3600)["ingests_requeued"] == 1
    assert sent == [("datasets.ingest", (upload.pk,))]
