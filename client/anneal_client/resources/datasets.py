"""Datasets: uploads (with progress, waiting for the ingest), review, versions, rows, splits, domain packs."""

from __future__ import annotations

import builtins
import os
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import IO, Any

from anneal_client import _plan
from anneal_client._errors import AnnealError
from anneal_client._plan import Plan, Request
from anneal_client.resources._base import AsyncResource, SyncResource, clean, poll
from anneal_client.types import Dataset, DatasetVersion, Upload

# on_progress(bytes_sent, total_bytes) while a file is sent.
ProgressCallback = Callable[[int, int], None]


class _CountingFile:
    """A binary file that reports how much of it has been read (httpx reads an upload in chunks; on a
    retry it seeks back to the start, and the count starts over with it)."""

    def __init__(self, file: IO[bytes], on_progress: ProgressCallback | None) -> None:
        self._file = file
        self._on_progress = on_progress
        self.total = os.fstat(file.fileno()).st_size
        self.sent = 0

    def read(self, size: int = -1) -> bytes:
        chunk = self._file.read(size)
        self.sent += len(chunk)
        if self._on_progress is not None:
            self._on_progress(self.sent, self.total)
        return chunk

    def seek(self, offset: int, whence: int = 0) -> int:
        position = self._file.seek(offset, whence)
        self.sent = position
        return position

    def tell(self) -> int:
        return self._file.tell()

    def fileno(self) -> int:
        return self._file.fileno()


MAPPING_FIELDS = (
    "prompt_field",
    "answer_field",
    "tests_field",
    "domain_field",
    "difficulty_field",
    "prompt_format",
    "metadata_fields",
    "tokenizer",
)


def mapping_fields(**given: Any) -> dict[str, str]:
    """Which column is which, as the upload endpoint takes it. Only what the caller gave is sent: the
    server's defaults (prompt, answer, format detection) apply to the rest."""
    unknown = sorted(set(given) - set(MAPPING_FIELDS))
    if unknown:
        raise AnnealError(f"{unknown[0]}: not a mapping field (one of {', '.join(MAPPING_FIELDS)})")
    out = {}
    for key, value in given.items():
        if value is None:
            continue
        out[key] = ",".join(value) if isinstance(value, list | tuple) else str(value)
    return out


def _upload(
    path: str | Path, name: str | None, mapping: dict[str, str], on_progress: ProgressCallback | None
) -> Plan[Upload]:
    path = Path(path)
    with path.open("rb") as raw:
        counted = _CountingFile(raw, on_progress)
        body = yield Request(
            "POST",
            "/datasets/uploads",
            data={"name": name or path.name.split(".")[0], **mapping},
            files={"file": (path.name, counted)},
        )
    return Upload.from_api(body)


def _upload_get(upload_id: int) -> Plan[Upload]:
    return Upload.from_api((yield from _plan.get(f"/datasets/uploads/{upload_id}")))


def _wait(
    upload_id: int, timeout: float | None, interval: float, on_update: Callable[[Upload], None] | None
) -> Plan[Upload]:
    return (
        yield from poll(
            lambda: _upload_get(upload_id),
            lambda u: u.done,
            what=f"upload {upload_id}'s ingest",
            timeout=timeout,
            interval=interval,
            on_update=on_update,
        )
    )


def _upload_and_wait(
    path: str | Path,
    name: str | None,
    mapping: dict[str, str],
    on_progress: ProgressCallback | None,
    wait: bool,
    timeout: float | None,
    on_update: Callable[[Upload], None] | None,
) -> Plan[Upload]:
    upload = yield from _upload(path, name, mapping, on_progress)
    if not wait:
        return upload
    return (yield from _wait(upload.id, timeout, 0.5, on_update))


def _list() -> Plan[list[Dataset]]:
    return [Dataset.from_api(d) for d in (yield from _plan.list_all("/datasets"))]


def _find(name: str) -> Plan[Dataset | None]:
    """The team's dataset of that name (the newest, should there be several)."""
    found = [d for d in (yield from _list()) if d.name == name]
    return max(found, key=lambda d: d.id, default=None)


def _rows_page(
    version_id: int, page_size: int
) -> Callable[[int], Plan[tuple[list[dict[str, Any]], int | None]]]:
    def page(offset: int) -> Plan[tuple[list[dict[str, Any]], int | None]]:
        body = yield from _plan.get(f"/datasets/versions/{version_id}/rows", offset=offset, limit=page_size)
        rows = body["results"]
        following = offset + len(rows)
        return rows, (following if rows and following < body["count"] else None)

    return page


def _errors_page(
    upload_id: int, page_size: int
) -> Callable[[int], Plan[tuple[list[dict[str, Any]], int | None]]]:
    def page(offset: int) -> Plan[tuple[list[dict[str, Any]], int | None]]:
        body = yield from _plan.get(f"/datasets/uploads/{upload_id}/errors", offset=offset, limit=page_size)
        errors = body["results"]
        following = offset + len(errors)
        return errors, (following if errors and following < body["count"] else None)

    return page


def _split(version_id: int, values: dict[str, Any]) -> Plan[tuple[DatasetVersion, DatasetVersion]]:
    train, held_out = yield from _plan.post(f"/datasets/versions/{version_id}/split", clean(values))
    return DatasetVersion.from_api(train), DatasetVersion.from_api(held_out)


def _version_get(version_id: int) -> Plan[DatasetVersion]:
    return DatasetVersion.from_api((yield from _plan.get(f"/datasets/versions/{version_id}")))


def _versions(dataset_id: int) -> Plan[list[DatasetVersion]]:
    return [DatasetVersion.from_api(v) for v in (yield from _plan.get(f"/datasets/{dataset_id}/versions"))]


def _get(dataset_id: int) -> Plan[Dataset]:
    return Dataset.from_api((yield from _plan.get(f"/datasets/{dataset_id}")))


def _delete(path: str) -> Plan[None]:
    yield Request("DELETE", path)


def _accept(upload_id: int) -> Plan[DatasetVersion]:
    return DatasetVersion.from_api((yield from _plan.post(f"/datasets/uploads/{upload_id}/accept")))


def _reject(upload_id: int) -> Plan[Upload]:
    return Upload.from_api((yield from _plan.post(f"/datasets/uploads/{upload_id}/reject")))


class Datasets(SyncResource):
    def list(self) -> builtins.list[Dataset]:
        return self._run(_list())

    def get(self, dataset_id: int) -> Dataset:
        return self._run(_get(dataset_id))

    def find(self, name: str) -> Dataset | None:
        return self._run(_find(name))

    def delete(self, dataset_id: int) -> None:
        self._run(_delete(f"/datasets/{dataset_id}"))

    def upload(
        self,
        file: str | Path,
        *,
        name: str | None = None,
        wait: bool = False,
        timeout: float | None = 600,
        on_progress: ProgressCallback | None = None,
        on_update: Callable[[Upload], None] | None = None,
        **mapping: Any,
    ) -> Upload:
        """Send a JSONL, CSV or Parquet file (each may be .gz). ``mapping``: prompt_field, answer_field,
        tests_field, domain_field, difficulty_field, prompt_format, metadata_fields, tokenizer. With
        ``wait``, return once the ingest has finished (state ready, review or failed)."""
        plan = _upload_and_wait(file, name, mapping_fields(**mapping), on_progress, wait, timeout, on_update)
        return self._run(plan)

    def get_upload(self, upload_id: int) -> Upload:
        return self._run(_upload_get(upload_id))

    def wait(
        self,
        upload_id: int,
        *,
        timeout: float | None = 600,
        poll_interval: float = 0.5,
        on_update: Callable[[Upload], None] | None = None,
    ) -> Upload:
        return self._run(_wait(upload_id, timeout, poll_interval, on_update))

    def upload_errors(self, upload_id: int, *, page_size: int = 500) -> Iterator[dict[str, Any]]:
        """Every ``{row, field, message}`` of an upload, fetched page by page."""
        return self._iterate(_errors_page(upload_id, page_size), 0)

    def accept(self, upload_id: int) -> DatasetVersion:
        """Keep an upload's valid rows (state review) as a new version."""
        return self._run(_accept(upload_id))

    def reject(self, upload_id: int) -> Upload:
        return self._run(_reject(upload_id))

    def versions(self, dataset_id: int) -> builtins.list[DatasetVersion]:
        return self._run(_versions(dataset_id))

    def get_version(self, version_id: int) -> DatasetVersion:
        return self._run(_version_get(version_id))

    def rows(self, version_id: int, *, page_size: int = 500) -> Iterator[dict[str, Any]]:
        return self._iterate(_rows_page(version_id, page_size), 0)

    def split(
        self,
        version_id: int,
        *,
        method: str = "seed",
        eval_fraction: float = 0.1,
        seed: int = 0,
        column: str | None = None,
        eval_values: builtins.list[str] | None = None,
    ) -> tuple[DatasetVersion, DatasetVersion]:
        """A train and an eval version made from this one; returns (train, eval)."""
        values = {
            "method": method,
            "eval_fraction": eval_fraction,
            "seed": seed,
            "column": column,
            "eval_values": eval_values,
        }
        return self._run(_split(version_id, values))

    def packs(self) -> dict[str, Any]:
        return self._run(_plan.get("/datasets/packs"))

    def create_pack(
        self,
        *,
        name: str,
        tasks: builtins.list[str],
        size: int = 100,
        seed: int = 0,
        difficulty: int | None = None,
    ) -> dict[str, Any]:
        body = {"name": name, "tasks": tasks, "size": size, "seed": seed, "difficulty": difficulty}
        return self._run(_plan.post("/datasets/packs/create", body))


class AsyncDatasets(AsyncResource):
    async def list(self) -> builtins.list[Dataset]:
        return await self._run(_list())

    async def get(self, dataset_id: int) -> Dataset:
        return await self._run(_get(dataset_id))

    async def find(self, name: str) -> Dataset | None:
        return await self._run(_find(name))

    async def delete(self, dataset_id: int) -> None:
        await self._run(_delete(f"/datasets/{dataset_id}"))

    async def upload(
        self,
        file: str | Path,
        *,
        name: str | None = None,
        wait: bool = False,
        timeout: float | None = 600,
        on_progress: ProgressCallback | None = None,
        on_update: Callable[[Upload], None] | None = None,
        **mapping: Any,
    ) -> Upload:
        plan = _upload_and_wait(file, name, mapping_fields(**mapping), on_progress, wait, timeout, on_update)
        return await self._run(plan)

    async def get_upload(self, upload_id: int) -> Upload:
        return await self._run(_upload_get(upload_id))

    async def wait(
        self,
        upload_id: int,
        *,
        timeout: float | None = 600,
        poll_interval: float = 0.5,
        on_update: Callable[[Upload], None] | None = None,
    ) -> Upload:
        return await self._run(_wait(upload_id, timeout, poll_interval, on_update))

    def upload_errors(self, upload_id: int, *, page_size: int = 500) -> AsyncIterator[dict[str, Any]]:
        return self._iterate(_errors_page(upload_id, page_size), 0)

    async def accept(self, upload_id: int) -> DatasetVersion:
        return await self._run(_accept(upload_id))

    async def reject(self, upload_id: int) -> Upload:
        return await self._run(_reject(upload_id))

    async def versions(self, dataset_id: int) -> builtins.list[DatasetVersion]:
        return await self._run(_versions(dataset_id))

    async def get_version(self, version_id: int) -> DatasetVersion:
        return await self._run(_version_get(version_id))

    def rows(self, version_id: int, *, page_size: int = 500) -> AsyncIterator[dict[str, Any]]:
        return self._iterate(_rows_page(version_id, page_size), 0)

    async def split(
        self,
        version_id: int,
        *,
        method: str = "seed",
        eval_fraction: float = 0.1,
        seed: int = 0,
        column: str | None = None,
        eval_values: builtins.list[str] | None = None,
    ) -> tuple[DatasetVersion, DatasetVersion]:
        values = {
            "method": method,
            "eval_fraction": eval_fraction,
            "seed": seed,
            "column": column,
            "eval_values": eval_values,
        }
        return await self._run(_split(version_id, values))

    async def packs(self) -> dict[str, Any]:
        return await self._run(_plan.get("/datasets/packs"))

    async def create_pack(
        self,
        *,
        name: str,
        tasks: builtins.list[str],
        size: int = 100,
        seed: int = 0,
        difficulty: int | None = None,
    ) -> dict[str, Any]:
        body = {"name": name, "tasks": tasks, "size": size, "seed": seed, "difficulty": difficulty}
        return await self._run(_plan.post("/datasets/packs/create", body))
