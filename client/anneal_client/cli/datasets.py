"""anneal datasets: upload (with a progress bar, waiting for the ingest), list, review, rows, split."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import click
from rich.progress import BarColumn, DownloadColumn, Progress, TextColumn, TransferSpeedColumn

from anneal_client.cli.context import Context, json_option, pass_context, print_json, show, table
from anneal_client.types import Upload


@click.group("datasets")
def group() -> None:
    """Uploads and dataset versions."""


@group.command("list")
@json_option
@pass_context
def list_(ctx: Context, as_json: bool) -> None:
    """The team's datasets and their newest version."""
    found = ctx.client.datasets.list()

    def text() -> None:
        table(
            ctx,
            found,
            [
                ("ID", lambda d: d.id),
                ("NAME", lambda d: d.name),
                ("VERSIONS", lambda d: len(d.versions)),
                (
                    "LATEST",
                    lambda d: d.latest_version and f"{d.latest_version.id} (v{d.latest_version.number})",
                ),
                ("ROWS", lambda d: d.latest_version and d.latest_version.row_count),
            ],
        )

    show(ctx, found, as_json, text)


@group.command()
@click.argument("file", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option("--name", help="The dataset's name (default: the file's name without extensions).")
@click.option("--prompt-field", help="The column holding the prompt (server default: prompt).")
@click.option("--answer-field", help="The reference answer (server default: answer; '' for none).")
@click.option("--tests-field", help="The column holding tests (one or a list).")
@click.option("--domain-field", help="The column naming each row's domain.")
@click.option("--difficulty-field", help="The column holding each row's difficulty.")
@click.option("--prompt-format", help="auto, text or chat (server default: auto).")
@click.option("--metadata-fields", help="Comma-separated columns to keep (server default: every column).")
@click.option("--tokenizer", help="Whose tokens the statistics count (server default: tiny).")
@click.option("--wait/--no-wait", default=True, show_default=True, help="Wait for the ingest to finish.")
@click.option("--accept", is_flag=True, help="If some rows are bad, keep the valid ones as a version.")
@json_option
@pass_context
def upload(
    ctx: Context, file: Path, name: str | None, wait: bool, accept: bool, as_json: bool, **mapping: Any
) -> None:
    """Upload FILE (JSONL, CSV or Parquet; .gz too) and wait until it is a version. Exits 1 when the
    ingest failed, or found bad rows and --accept was not given."""
    with Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        DownloadColumn(),
        TransferSpeedColumn(),
        console=ctx.err,
        transient=True,
    ) as bar:
        task = bar.add_task(f"sending {file.name}", total=file.stat().st_size)
        sent = ctx.client.datasets.upload(
            file,
            name=name,
            on_progress=lambda done, total: bar.update(task, completed=done, total=total),
            **mapping,
        )
        if wait:
            bar.update(task, description=f"ingesting upload {sent.id}", completed=0, total=None)

            def on_update(u: Upload) -> None:
                bar.update(
                    task, description=f"ingesting upload {sent.id}: {u.state}, {u.rows_seen} rows read"
                )

            sent = ctx.client.datasets.wait(sent.id, timeout=None, on_update=on_update)
    version = None
    if sent.state == "review" and accept:
        version = ctx.client.datasets.accept(sent.id)
    if as_json:
        print_json({**sent.to_dict(), **({"accepted_version": version.to_dict()} if version else {})})
    else:
        _report(ctx, sent, version)
    if not wait:
        return
    if sent.state == "failed" or (sent.state == "review" and version is None):
        raise SystemExit(1)


def _report(ctx: Context, upload: Upload, version: object) -> None:
    if upload.state == "ready":
        ctx.out.print(
            f"upload {upload.id} ready: dataset version {upload.dataset_version} ({upload.rows_valid} rows, "
            f"{upload.duplicate_count} duplicates removed)"
        )
        return
    if upload.state not in ("review", "failed"):
        ctx.out.print(f"upload {upload.id}: {upload.state} (anneal datasets upload-status {upload.id})")
        return
    for error in upload.errors[:20]:
        row = f"row {error.get('row')}: " if error.get("row") is not None else ""
        ctx.err.print(
            f"  {row}{error.get('field') or ''}: {error.get('message')}", markup=False, highlight=False
        )
    more = upload.error_count - min(len(upload.errors), 20)
    if more > 0:
        ctx.err.print(f"  ... and {more} more (anneal datasets errors {upload.id})")
    if upload.state == "failed":
        ctx.err.print(f"upload {upload.id} failed: nothing was stored")
    elif version is not None:
        ctx.out.print(
            f"upload {upload.id}: {upload.error_count} bad rows left out; version {getattr(version, 'id', '')}"
        )
    else:
        ctx.err.print(
            f"upload {upload.id} needs review: {upload.rows_valid} valid rows, {upload.error_count} errors. "
            f"Keep the valid rows with `anneal datasets accept {upload.id}` or drop it with `reject`."
        )


@group.command("upload-status")
@click.argument("upload_id", type=int)
@json_option
@pass_context
def upload_status(ctx: Context, upload_id: int, as_json: bool) -> None:
    """An upload's state, progress and first errors."""
    found = ctx.client.datasets.get_upload(upload_id)
    show(ctx, found, as_json, lambda: _report(ctx, found, None))


@group.command()
@click.argument("upload_id", type=int)
@json_option
@pass_context
def errors(ctx: Context, upload_id: int, as_json: bool) -> None:
    """Every error of an upload, as JSON lines with --json."""
    for error in ctx.client.datasets.upload_errors(upload_id):
        if as_json:
            click.echo(json.dumps(error, ensure_ascii=False))
        else:
            ctx.out.print(
                f"row {error.get('row')}: {error.get('field')}: {error.get('message')}", markup=False
            )


@group.command()
@click.argument("upload_id", type=int)
@json_option
@pass_context
def accept(ctx: Context, upload_id: int, as_json: bool) -> None:
    """Keep an upload's valid rows (state review) as a new version."""
    version = ctx.client.datasets.accept(upload_id)
    show(ctx, version, as_json, lambda: ctx.out.print(f"version {version.id} ({version.row_count} rows)"))


@group.command()
@click.argument("upload_id", type=int)
@json_option
@pass_context
def reject(ctx: Context, upload_id: int, as_json: bool) -> None:
    """Drop an upload in review: nothing is stored."""
    dropped = ctx.client.datasets.reject(upload_id)
    show(ctx, dropped, as_json, lambda: ctx.out.print(f"upload {dropped.id}: {dropped.state}"))


@group.command()
@click.argument("version_id", type=int)
@click.option("--limit", type=int, default=None, help="At most this many rows.")
@pass_context
def rows(ctx: Context, version_id: int, limit: int | None) -> None:
    """A version's rows as JSON lines."""
    for index, row in enumerate(ctx.client.datasets.rows(version_id)):
        if limit is not None and index >= limit:
            break
        click.echo(json.dumps(row, ensure_ascii=False))


@group.command()
@click.argument("version_id", type=int)
@click.option("--method", type=click.Choice(["seed", "column"]), default="seed", show_default=True)
@click.option("--eval-fraction", type=float, default=0.1, show_default=True)
@click.option("--seed", type=int, default=0, show_default=True)
@click.option("--column", default=None, help="With --method column: the column to split on.")
@click.option("--eval-value", "eval_values", multiple=True, help="A value of --column that goes to eval.")
@json_option
@pass_context
def split(
    ctx: Context,
    version_id: int,
    method: str,
    eval_fraction: float,
    seed: int,
    column: str | None,
    eval_values: tuple[str, ...],
    as_json: bool,
) -> None:
    """Make a train and an eval version from a version."""
    train, held_out = ctx.client.datasets.split(
        version_id,
        method=method,
        eval_fraction=eval_fraction,
        seed=seed,
        column=column,
        eval_values=list(eval_values) or None,
    )
    show(
        ctx,
        [train, held_out],
        as_json,
        lambda: ctx.out.print(
            f"train: version {train.id} ({train.row_count} rows); eval: version {held_out.id} ({held_out.row_count} rows)"
        ),
    )


@group.command()
@json_option
@pass_context
def packs(ctx: Context, as_json: bool) -> None:
    """The domain-pack tasks offered (reasoning-gym's and Anneal's document tasks)."""
    offered = ctx.client.datasets.packs()
    show(
        ctx,
        offered,
        as_json,
        lambda: table(
            ctx,
            offered.get("tasks", []),
            [
                ("TASK", lambda t: t.get("task")),
                ("DIFFICULTY LEVELS", lambda t: "yes" if t.get("has_curriculum") else ""),
            ],
        ),
    )


@group.command()
@click.argument("name")
@click.option(
    "--task", "tasks", multiple=True, required=True, help="A task from `anneal datasets packs` (repeat)."
)
@click.option("--size", type=int, default=100, show_default=True, help="Rows per task.")
@click.option("--seed", type=int, default=0, show_default=True)
@click.option("--difficulty", type=int, default=None, help="0 (easiest) to 5, for tasks with levels.")
@json_option
@pass_context
def pack(
    ctx: Context,
    name: str,
    tasks: tuple[str, ...],
    size: int,
    seed: int,
    difficulty: int | None,
    as_json: bool,
) -> None:
    """Make dataset NAME from pack tasks, with a verifier per task (NAME/TASK)."""
    made = ctx.client.datasets.create_pack(
        name=name, tasks=list(tasks), size=size, seed=seed, difficulty=difficulty
    )

    def text() -> None:
        version = made.get("dataset_version") or {}
        ctx.out.print(f"dataset {name}: version {version.get('id')} ({version.get('row_count')} rows)")
        for verifier in made.get("verifiers", []):
            ctx.out.print(f"verifier {verifier.get('name')} (#{verifier.get('id')})")

    show(ctx, made, as_json, text)
