"""Reads for datasets: the first rows of an upload (for the mapping page), errors as CSV, pages of rows, and
the prompt lengths of a version in a model's tokens against its context window."""

import csv
import io
import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from anneal.datasets import storage
from anneal.datasets.mapping import prompt_text
from anneal.datasets.models import DatasetUpload, DatasetVersion
from anneal.datasets.preview import UploadPreview
from anneal.datasets.storage import StoredFileMissing, read_rows
from anneal.datasets.tokens import TokenCounter, TokenizerUnavailable, token_counter


def upload_preview(*, upload: DatasetUpload) -> UploadPreview | None:
    """The columns and first rows the worker read from an upload (anneal.datasets.preview); None until then."""
    return UploadPreview.from_dict(upload.preview) if upload.preview else None


def upload_errors(*, upload: DatasetUpload) -> Iterator[dict]:
    """Every error of an upload: from its errors file when there is one, else the listed ones."""
    try:
        path = storage.local_copy(upload.errors_path) if upload.errors_path else None
    except StoredFileMissing:
        path = None
    if path is None:
        yield from upload.errors
        return
    with path.open("rb") as handle:
        for line in handle:
            yield json.loads(line)


def upload_errors_csv(*, upload: DatasetUpload) -> Iterator[str]:
    """The errors as CSV text, a line at a time (for a streaming download)."""
    buffer = io.StringIO()
    writer = csv.writer(buffer)
    writer.writerow(["row", "field", "problem"])
    for error in upload_errors(upload=upload):
        writer.writerow([error.get("row", ""), error.get("field", ""), error.get("message", "")])
        yield buffer.getvalue()
        buffer.seek(0)
        buffer.truncate(0)
    yield buffer.getvalue()


# Prompts counted for the length histogram when the chosen model's tokenizer merges (encoding is slow);
# byte-counted tokenizers (the tiny family's) count every row up to the larger cap.
HISTOGRAM_ROWS_ENCODED = 5_000
HISTOGRAM_ROWS_BYTES = 200_000


@dataclass
class LengthBar:
    low: int  # tokens, inclusive
    high: int  # tokens, exclusive
    count: int
    over_window: bool  # the whole bin is longer than the window


@dataclass
class LengthHistogram:
    """Prompt lengths of a version in one model's tokens, in bins doubling in width, against its window."""

    model: str
    tokenizer: str
    window: int | None  # the model's context window in tokens; None when unknown
    bars: list[LengthBar]
    counted: int
    total: int
    longest: int
    over_window: int  # prompts longer than the window (0 when the window is unknown)
    note: str = ""

    @property
    def peak(self) -> int:
        return max((bar.count for bar in self.bars), default=0)


def model_window(model: str, *, store: Path) -> int | None:
    """The context window of the store's ``model`` (its config.json, or its recipe when not built yet)."""
    from gpu_jobs.memory import model_shape
    from gpu_jobs.model_store import TINY_LONG
    from gpu_jobs.tiny_long_model import RECIPE as TINY_LONG_RECIPE

    shape = model_shape(model, store=store)
    if shape is not None and shape.window:
        return shape.window
    return TINY_LONG_RECIPE.max_position_embeddings if model == TINY_LONG else None


def _counter_for(model: str, *, store: Path) -> tuple[TokenCounter, str]:
    """The model's token counter and a note when it is not the model's own (bytes stand in)."""
    from gpu_jobs.memory import model_folder
    from gpu_jobs.model_store import TINY, TINY_LONG

    if model in (TINY, TINY_LONG):
        return token_counter("tiny"), ""
    folder = model_folder(model, store=store)
    if folder is not None:
        try:
            return token_counter(str(folder)), ""
        except TokenizerUnavailable:
            pass
    return token_counter("tiny"), f"{model}'s tokenizer is not on this server: lengths are in bytes"


def prompt_length_histogram(*, version: DatasetVersion, model: str, store: Path) -> LengthHistogram:
    """The prompt lengths of ``version`` in ``model``'s tokens, binned from 2^k to 2^(k+1), and its window.

    Preconditions: ``model`` passed gpu_jobs.model_store.check_model. Reads the version's rows (the first
    HISTOGRAM_ROWS_* of them; the note says when fewer than all were counted)."""
    counter, note = _counter_for(model, store=store)
    cap = HISTOGRAM_ROWS_BYTES if counter.one_token_per_byte else HISTOGRAM_ROWS_ENCODED
    rows = read_rows(version.rows_path, limit=cap)
    lengths = counter.count([prompt_text(row["prompt"]) for row in rows if "prompt" in row])
    window = model_window(model, store=store)
    if len(rows) < version.row_count:
        note = (note + "; " if note else "") + f"the first {len(rows):,} of {version.row_count:,} rows"
    bins: dict[int, int] = {}
    for length in lengths:
        exponent = max(0, length).bit_length()  # 2^(e-1) <= length < 2^e
        bins[exponent] = bins.get(exponent, 0) + 1
    bars = []
    if bins:
        for exponent in range(min(bins), max(bins) + 1):
            low, high = (1 << (exponent - 1)) if exponent else 0, 1 << exponent
            over = window is not None and low > window
            bars.append(LengthBar(low=low, high=high, count=bins.get(exponent, 0), over_window=over))
    return LengthHistogram(
        model=model,
        tokenizer=counter.name,
        window=window,
        bars=bars,
        counted=len(lengths),
        total=version.row_count,
        longest=max(lengths, default=0),
        over_window=sum(length > window for length in lengths) if window else 0,
        note=note,
    )
