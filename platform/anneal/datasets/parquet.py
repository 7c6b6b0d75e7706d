"""Read a Parquet upload within bounds: a few kilobytes of Parquet may decode to gigabytes.

Django-free (readers.py opens the file; this module bounds what is decoded). Three checks, each before the
memory it protects is taken:

1. The footer first: at most ``max_columns`` leaf columns, and the row groups' uncompressed size plus their
   value count (what the pages decode to before any dictionary is expanded) within the decompressed limit.
2. Text and binary columns are read as dictionaries, so a dictionary entry repeated on a million rows stays
   one entry in memory, and each batch is measured without being expanded: the size of every cell (its text
   and bytes, plus ``VALUE_BYTES`` for each value in it) from the dictionary's lengths and the indices.
3. A cell over ``max_cell_bytes`` is a row error naming the row and the column (the row is skipped, never
   expanded); the running total of the rows kept is held to the decompressed limit, and rows are turned
   into Python values a slice at a time, so one batch never expands more than ``SLICE_BYTES`` at once.

The footer is trusted for (1): a hand-made file whose page headers disagree with it is bounded by (2)-(3)
for what is expanded, but not for the pages Arrow decodes. Run the reading where a failure costs a task,
not the web (the Celery worker).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import BinaryIO

import numpy as np

PARQUET_BATCH_ROWS = 2048
VALUE_BYTES = 8  # counted for each value besides its text: a list of a billion nulls is not free
SLICE_BYTES = 16 * 1024 * 1024  # at most this much of a batch becomes Python values at once
TEXT_TYPES = {"STRING", "JSON", "BSON", "ENUM", "NONE"}


class ParquetRefused(Exception):
    """The file cannot be read within the limits; ``row`` is 0 when no row is to blame."""

    def __init__(self, message: str, *, row: int = 0, field: str = "(file)") -> None:
        super().__init__(message)
        self.message = message
        self.row = row
        self.field = field


@dataclass(frozen=True)
class ParquetLimits:
    max_columns: int
    max_cell_bytes: int
    max_decoded_bytes: int


@dataclass(frozen=True)
class CellTooLarge:
    """A row skipped because one cell is over the limit (readers.py turns it into a RowError)."""

    row: int
    column: str
    size: int
    limit: int

    @property
    def message(self) -> str:
        return (
            f"column '{self.column}' holds {self.size} bytes in this row, over the limit of {self.limit} "
            "bytes for one cell (ANNEAL_DATASET_MAX_LINE_KB)"
        )


@dataclass
class ParquetSource:
    columns: list[str]
    column_types: dict[str, str]  # the Arrow types as the file declares them (not as read)
    total_rows: int
    rows: Iterator[tuple[int, dict | CellTooLarge]]


def open_parquet(handle: BinaryIO, *, limits: ParquetLimits) -> ParquetSource:
    """Check the footer of the seekable Parquet file ``handle`` and return its bounded rows.

    ParquetRefused when the footer is over a limit; a pyarrow error when the file is not Parquet.
    """
    import pyarrow.parquet as pq

    plain = pq.ParquetFile(handle)
    metadata = plain.metadata
    _check_footer(metadata, limits=limits)
    schema = plain.schema_arrow
    text_leaves = [
        column.path
        for column in plain.schema
        if column.physical_type == "BYTE_ARRAY" and str(column.logical_type.type) in TEXT_TYPES
    ]
    handle.seek(0)
    reader = pq.ParquetFile(handle, metadata=metadata, read_dictionary=text_leaves)
    return ParquetSource(
        columns=list(schema.names),
        column_types={f.name: str(_value_type(f.type)) for f in schema},
        total_rows=metadata.num_rows,
        rows=_rows(reader, limits=limits),
    )


def _value_type(kind):
    """``kind`` with every dictionary replaced by its value type: a dictionary of strings holds text (pandas
    writes categoricals so), and that is what the mapping checks."""
    import pyarrow as pa

    if pa.types.is_dictionary(kind):
        return _value_type(kind.value_type)
    if pa.types.is_list(kind):
        return pa.list_(kind.value_field.with_type(_value_type(kind.value_type)))
    if pa.types.is_large_list(kind):
        return pa.large_list(kind.value_field.with_type(_value_type(kind.value_type)))
    if pa.types.is_struct(kind):
        return pa.struct([field.with_type(_value_type(field.type)) for field in kind])
    return kind


def _check_footer(metadata, *, limits: ParquetLimits) -> None:
    if metadata.num_columns > limits.max_columns:
        raise ParquetRefused(
            f"the file has {metadata.num_columns} columns, over the limit of {limits.max_columns} "
            "(ANNEAL_PARQUET_MAX_COLUMNS): keep only the columns the dataset needs"
        )
    decoded = 0
    for group_index in range(metadata.num_row_groups):
        group = metadata.row_group(group_index)
        for column_index in range(group.num_columns):
            chunk = group.column(column_index)
            decoded += max(chunk.total_uncompressed_size, 0) + VALUE_BYTES * max(chunk.num_values, 0)
        if decoded > limits.max_decoded_bytes:
            raise ParquetRefused(
                f"the file decompresses to more than the limit of {limits.max_decoded_bytes} bytes "
                f"(ANNEAL_UPLOAD_MAX_DECOMPRESSED_MB): its first {group_index + 1} row group(s) hold "
                f"{decoded} bytes uncompressed; upload fewer rows or split the file"
            )


def cell_bytes(array) -> np.ndarray:
    """The size of each value of ``array`` as decoded (int64, one per value) without expanding it."""
    import pyarrow as pa
    import pyarrow.compute as pc

    kind = array.type
    count = len(array)
    if pa.types.is_dictionary(kind):
        sizes = cell_bytes(array.dictionary)
        indices = array.indices.fill_null(0).to_numpy(zero_copy_only=False).astype(np.int64)
        valid = array.is_valid().to_numpy(zero_copy_only=False)
        return np.where(valid, sizes[indices] if len(sizes) else 0, VALUE_BYTES)  # sizes count VALUE_BYTES
    if (
        pa.types.is_string(kind)
        or pa.types.is_large_string(kind)
        or pa.types.is_binary(kind)
        or pa.types.is_large_binary(kind)
    ):
        lengths = pc.binary_length(array).fill_null(0).to_numpy(zero_copy_only=False).astype(np.int64)
        return lengths + VALUE_BYTES
    if pa.types.is_map(kind):  # a list of (key, item) structs, which list_flatten does not take as it is
        entries = pa.struct([kind.key_field, kind.item_field])
        return cell_bytes(array.cast(pa.list_(entries)))
    if pa.types.is_list(kind) or pa.types.is_large_list(kind) or pa.types.is_fixed_size_list(kind):
        sizes = cell_bytes(array.flatten())
        parents = pc.list_parent_indices(array).to_numpy(zero_copy_only=False)
        return np.bincount(parents, weights=sizes, minlength=count).astype(np.int64) + VALUE_BYTES
    if pa.types.is_struct(kind):
        total = np.full(count, VALUE_BYTES, dtype=np.int64)
        for child in array.flatten():
            total += cell_bytes(child)
        return total
    width = kind.bit_width // 8 if kind.bit_width and kind.bit_width >= 8 else 1
    return np.full(count, width + VALUE_BYTES, dtype=np.int64)


def _rows(reader, *, limits: ParquetLimits) -> Iterator[tuple[int, dict | CellTooLarge]]:
    names = reader.schema_arrow.names
    number = 0
    decoded = 0
    for batch in reader.iter_batches(batch_size=PARQUET_BATCH_ROWS):
        count = batch.num_rows
        row_sizes = np.zeros(count, dtype=np.int64)
        too_large: dict[int, CellTooLarge] = {}
        for index, name in enumerate(names):
            sizes = cell_bytes(batch.column(index))
            row_sizes += sizes
            for position in np.flatnonzero(sizes > limits.max_cell_bytes):
                position = int(position)
                if position not in too_large:
                    too_large[position] = CellTooLarge(
                        row=number + position + 1,
                        column=name,
                        size=int(sizes[position]),
                        limit=limits.max_cell_bytes,
                    )
        row_sizes[list(too_large)] = 0
        # The whole batch is measured before any of it is expanded: a bomb stops here, not after the limit.
        decoded += int(row_sizes.sum())
        if decoded > limits.max_decoded_bytes:
            raise ParquetRefused(
                f"the file decompresses to more than the limit of {limits.max_decoded_bytes} bytes "
                f"(ANNEAL_UPLOAD_MAX_DECOMPRESSED_MB) by row {number + count}; upload fewer rows or split "
                "the file",
                row=number + 1,
            )
        for start, stop in _slices(row_sizes):
            records = batch.slice(start, stop - start)
            skipped = [p - start for p in too_large if start <= p < stop]
            if skipped:
                keep = np.ones(stop - start, dtype=bool)
                keep[skipped] = False
                records = records.filter(keep)
            values = iter(records.to_pylist())
            for position in range(start, stop):
                yield number + position + 1, too_large.get(position) or next(values)
        number += count


def _slices(row_sizes: np.ndarray) -> Iterator[tuple[int, int]]:
    """Consecutive (start, stop) ranges of rows, each holding at most SLICE_BYTES (or a single row)."""
    start, held = 0, 0
    for position, size in enumerate(row_sizes.tolist()):
        if position > start and held + size > SLICE_BYTES:
            yield start, position
            start, held = position, 0
        held += size
    if start < len(row_sizes):
        yield start, len(row_sizes)
