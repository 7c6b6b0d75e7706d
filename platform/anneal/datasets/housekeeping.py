"""Periodic clean-up of dataset uploads, run by Celery beat: what a web process killed mid-upload leaves.

A web process killed (restarted, out of memory) while it takes an upload never leaves a row pointing at a
short file: the row is saved only once the file is whole. What it may leave is invisible to users but takes
disk: Django's temporary copy of the request's file (FILE_UPLOAD_TEMP_DIR), a `.partial` file in the upload
folder, a whole file whose row was never saved; and, in the instant between saving the row and sending its
ingest, an upload left pending that no worker was told about.
"""

from __future__ import annotations

import time
from datetime import timedelta
from pathlib import Path

from django.conf import settings
from django.utils import timezone

from anneal.datasets import storage
from anneal.datasets.models import DatasetUpload, UploadState
from anneal.tasks import DATASET_INGEST, enqueue

SWEEP_AGE_S = 3600  # beat's sweep leaves alone anything younger: a request still being taken, say


def uploads_sweep(*, older_than_s: float = SWEEP_AGE_S) -> dict[str, int]:
    """Remove the files no upload refers to, and queue again the ingest of uploads pending for longer than
    `older_than_s` (a second send is harmless: the ingest claims its upload). Counts of each."""
    cutoff = time.time() - older_than_s
    removed_temp = _remove_old(Path(settings.FILE_UPLOAD_TEMP_DIR), cutoff, keep=set())
    removed = 0
    if not storage.is_remote_enabled():  # a remote store: its lifecycle rules drop unfinished uploads
        kept = set()
        for file_path, errors_path in DatasetUpload.objects.values_list("file_path", "errors_path"):
            kept.update((file_path, errors_path))
        removed = _remove_old(Path(settings.UPLOAD_DIR), cutoff, keep=kept)
    stuck = DatasetUpload.objects.filter(
        state=UploadState.PENDING, created_at__lt=timezone.now() - timedelta(seconds=older_than_s)
    ).values_list("pk", flat=True)
    for upload_id in stuck:
        enqueue(DATASET_INGEST, upload_id)
    return {"temporary_files": removed_temp, "unreferenced_files": removed, "ingests_requeued": len(stuck)}


def _remove_old(folder: Path, cutoff: float, *, keep: set[str]) -> int:
    """Remove the files directly in `folder` last written before `cutoff` whose path is not in `keep`."""
    removed = 0
    if not folder.is_dir():
        return removed
    for path in folder.iterdir():
        try:
            if path.is_file() and str(path) not in keep and path.stat().st_mtime < cutoff:
                path.unlink()
                removed += 1
        except FileNotFoundError:  # removed meanwhile (another sweep, a finished request)
            continue
    return removed
