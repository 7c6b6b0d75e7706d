"""``anneal``: the entry point. A user's mistake or a refusal from the API prints its message and exits 1
(2 for a command line click cannot parse); never a traceback."""

from __future__ import annotations

import sys

import click
import httpx

from anneal_client._errors import AnnealError, APIStatusError
from anneal_client.cli import datasets, deployments, jobs, verifiers
from anneal_client.cli.account import login, logout, whoami
from anneal_client.cli.context import Context


class ErrorsAsMessages(click.Group):
    def invoke(self, ctx: click.Context) -> object:
        try:
            return super().invoke(ctx)
        except APIStatusError as exc:
            raise click.ClickException(_status_message(exc)) from None
        except AnnealError as exc:
            raise click.ClickException(exc.message) from None
        except httpx.InvalidURL as exc:  # not a TransportError: a malformed --base-url
            raise click.ClickException(f"--base-url: not a usable address ({exc})") from None
        except OSError as exc:  # a file to write that cannot be, a closed pipe
            raise click.ClickException(
                f"{exc.filename + ': ' if exc.filename else ''}{exc.strerror or exc}"
            ) from None


def _status_message(exc: APIStatusError) -> str:
    lines = [f"{exc.message} (HTTP {exc.status_code})"]
    # The API's detail joins every error; list them one a line when there are several, with their row.
    if len(exc.errors) > 1:
        for error in exc.errors[:20]:
            row = f"row {error['row']}: " if error.get("row") is not None else ""
            lines.append(f"  {row}{error.get('field')}: {error.get('message')}")
    return "\n".join(lines)


@click.group(cls=ErrorsAsMessages)
@click.option("--base-url", envvar="ANNEAL_BASE_URL", help="The site, e.g. https://anneal.example.com.")
@click.option("--api-key", envvar="ANNEAL_API_KEY", help="An API token (ann_…); `anneal login` saves one.")
@click.version_option(package_name="anneal-client", prog_name="anneal")
@click.pass_context
def cli(ctx: click.Context, base_url: str | None, api_key: str | None) -> None:
    """Anneal from the command line: datasets, verifiers, jobs and deployments."""
    ctx.obj = Context(base_url=base_url, api_key=api_key)


cli.add_command(login)
cli.add_command(logout)
cli.add_command(whoami)
cli.add_command(datasets.group)
cli.add_command(verifiers.group)
cli.add_command(jobs.group)
cli.add_command(deployments.deploy)
cli.add_command(deployments.group)
cli.add_command(deployments.checkpoints)
cli.add_command(deployments.models)


def main() -> None:
    try:
        cli(prog_name="anneal")
    except KeyboardInterrupt:
        click.echo("interrupted", err=True)
        sys.exit(130)
