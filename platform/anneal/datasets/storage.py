"""Where uploaded files and frozen dataset versions are kept.

By default a local folder (ANNEAL_UPLOAD_DIR for uploads, ANNEAL_DATASET_DIR for versions); with
ANNEAL_S3_BUCKET set, any S3-compatible store through django-storages (``STORAGES["datasets"]``), so the web
and the workers may run on different hosts. The database keeps a *location* per file: an absolute path, or
``s3://BUCKET/KEY`` for a stored object.

Parsing needs a seekable local file (gzip sniffing, Parquet footers, paging rows), so readers ask for
``local_copy``: the file itself when it is local; for a stored object, a download cached on this host. Every
location is written once and never changed (uploads, versions, error lists), so the cache never goes stale.
"""

from __future__ import annotations

import os
import shutil
import uuid
from pathlib import Path

from django.conf import settings
from django.core.files import File
from django.core.files.storage import Storage, storages

from anneal.datasets.ingest import read_rows as read_local_rows

REMOTE_SCHEME = "s3://"
DOWNLOAD_CHUNK = 1024 * 1024
PARTIAL = ".partial"  # how a local upload being written is named until it is whole


class StoredFileMissing(FileNotFoundError):
    """The location names nothing (deleted, or the store was moved)."""


def is_remote_enabled() -> bool:
    return bool(settings.S3_BUCKET)


def _remote() -> Storage:
    return storages["datasets"]


def _prefix() -> str:
    location = getattr(_remote(), "location", "") or ""
    return location.strip("/") + "/" if location.strip("/") else ""


def _key(location: str) -> str:
    """The storage name of a remote location: its object key without the bucket and the store's prefix."""
    object_key = location[len(REMOTE_SCHEME) :].split("/", 1)[1]
    return object_key.removeprefix(_prefix())


def _location(name: str) -> str:
    return f"{REMOTE_SCHEME}{settings.S3_BUCKET}/{_prefix()}{name}"


def _local_folder(area: str) -> Path:
    return settings.UPLOAD_DIR if area == "uploads" else settings.DATASET_DIR


def store_upload(*, area: str, name: str, upload: File) -> str:
    """Write an uploaded file as ``area/name``; returns its location. Streamed either way: chunk by chunk to
    a local file, or to the store as a multipart upload (the bytes are never all in memory)."""
    if is_remote_enabled():
        upload.seek(0)
        return _location(_remote().save(f"{area}/{name}", upload))
    folder = _local_folder(area)
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    # Written under a name of its own and renamed when whole: a process killed mid-copy leaves a `.partial`
    # file (swept by anneal.datasets.housekeeping), never a short file under the name a row may point to.
    partial = path.with_name(path.name + PARTIAL)
    try:
        with partial.open("wb") as out:
            for chunk in upload.chunks():
                out.write(chunk)
        os.replace(partial, path)
    except BaseException:
        partial.unlink(missing_ok=True)
        raise
    return str(path)


def store_local_file(*, area: str, name: str, path: Path) -> str:
    """Keep the local file ``path`` as ``area/name``; returns its location. The file is moved (local) or
    uploaded and then moved into this host's cache (remote), so ``path`` is gone afterwards either way."""
    if is_remote_enabled():
        with path.open("rb") as handle:
            key = _remote().save(f"{area}/{name}", File(handle, name=name))
        location = _location(key)
        cached = _cache_path(key)
        cached.parent.mkdir(parents=True, exist_ok=True)
        shutil.move(path, cached)
        return location
    final = _local_folder(area) / name
    final.parent.mkdir(parents=True, exist_ok=True)
    shutil.move(path, final)  # a rename when on one filesystem, a copy when not
    return str(final)


def store_bytes(*, area: str, name: str, body: bytes) -> str:
    scratch = settings.DATA_DIR / "work" / f"{uuid.uuid4().hex}.part"
    scratch.parent.mkdir(parents=True, exist_ok=True)
    scratch.write_bytes(body)
    return store_local_file(area=area, name=name, path=scratch)


def _cache_path(key: str) -> Path:
    return settings.DATASET_CACHE_DIR / settings.S3_BUCKET / key


def local_copy(location: str) -> Path:
    """A local file with the content of ``location``; StoredFileMissing when there is none."""
    if not location.startswith(REMOTE_SCHEME):
        path = Path(location)
        if not path.is_file():
            raise StoredFileMissing(location)
        return path
    key = _key(location)
    cached = _cache_path(key)
    if cached.is_file():
        return cached
    cached.parent.mkdir(parents=True, exist_ok=True)
    partial = cached.with_name(f".{cached.name}.{uuid.uuid4().hex[:8]}.part")
    try:
        with _remote().open(key, "rb") as source, partial.open("wb") as out:
            shutil.copyfileobj(source, out, DOWNLOAD_CHUNK)
    except FileNotFoundError:  # django-storages' answer to a 404 on the object
        partial.unlink(missing_ok=True)
        raise StoredFileMissing(location) from None
    except Exception:
        partial.unlink(missing_ok=True)
        raise
    os.replace(partial, cached)  # atomic: two workers downloading at once both end with a whole file
    return cached


def delete(location: str) -> None:
    """Remove the file at ``location`` (and this host's cached copy); a missing file is not an error."""
    if not location:
        return
    if location.startswith(REMOTE_SCHEME):
        key = _key(location)
        _cache_path(key).unlink(missing_ok=True)
        _remote().delete(key)
        return
    Path(location).unlink(missing_ok=True)


def read_rows(location: str, *, offset: int = 0, limit: int | None = None) -> list[dict]:
    """Rows ``offset`` .. ``offset + limit`` of a frozen version, wherever it is stored."""
    return read_local_rows(local_copy(location), offset=offset, limit=limit)
