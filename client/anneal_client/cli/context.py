"""What every command shares: the client (made on first use, from the options, the environment or the
saved login), --json, and printing to stdout (results) and stderr (progress, errors)."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import click
from rich.console import Console
from rich.table import Table

from anneal_client._client import Anneal
from anneal_client.types import Model

json_option = click.option("--json", "as_json", is_flag=True, help="Print JSON for scripts instead of text.")


@dataclass
class Context:
    base_url: str | None = None
    api_key: str | None = None
    _client: Anneal | None = None
    out: Console = field(default_factory=lambda: Console(soft_wrap=True))
    err: Console = field(default_factory=lambda: Console(stderr=True, soft_wrap=True))

    @property
    def client(self) -> Anneal:
        if self._client is None:
            self._client = Anneal(api_key=self.api_key, base_url=self.base_url)
        return self._client


pass_context = click.make_pass_decorator(Context)


def to_json(value: Any) -> Any:
    if isinstance(value, Model):
        return value.to_dict()
    if isinstance(value, list | tuple):
        return [to_json(v) for v in value]
    if hasattr(value, "to_dict"):
        return value.to_dict()
    return value


def print_json(value: Any) -> None:
    # click.echo, not rich: JSON must reach a pipe byte for byte, without markup or wrapping.
    click.echo(json.dumps(to_json(value), indent=2, ensure_ascii=False, default=str))


def table(ctx: Context, rows: Iterable[Any], columns: Sequence[tuple[str, Callable[[Any], Any]]]) -> None:
    """Rows as a table on stdout: each column a heading and how to read its cell from a row."""
    grid = Table(show_edge=False, box=None, pad_edge=False, header_style="bold")
    for heading, _ in columns:
        grid.add_column(heading, overflow="fold")
    for row in rows:
        grid.add_row(*["" if (v := read(row)) is None else str(v) for _, read in columns])
    ctx.out.print(grid)


def show(ctx: Context, value: Any, as_json: bool, text: Callable[[], None]) -> None:
    if as_json:
        print_json(value)
    else:
        text()
