"""login, logout, whoami: the saved token."""

from __future__ import annotations

import click

from anneal_client import _config
from anneal_client._client import Anneal
from anneal_client.cli.context import Context, json_option, pass_context, print_json


@click.command()
@click.option("--token", help="The API token (ann_…); asked for when not given.")
@click.option(
    "--base-url", "login_url", help="The site; default: --base-url, ANNEAL_BASE_URL, the saved one."
)
@json_option
@pass_context
def login(ctx: Context, token: str | None, login_url: str | None, as_json: bool) -> None:
    """Check a token and save it with the site's address in the user's config file (mode 0600)."""
    saved = _config.read_config()
    base_url = _config.normalise_base_url(
        login_url or ctx.base_url or saved.get("base_url") or _config.DEFAULT_BASE_URL
    )
    if not token:
        token = click.prompt(f"API token for {base_url} (from the Tokens page)", hide_input=True).strip()
    with Anneal(api_key=token, base_url=base_url, max_retries=1) as client:
        me = client.me()
    path = _config.write_config({**saved, "base_url": base_url, "api_key": token})
    teams = ", ".join(f"{t['name']} ({t['role']})" for t in me.get("teams", []))
    if as_json:
        print_json(
            {
                "username": me.get("username"),
                "teams": me.get("teams"),
                "base_url": base_url,
                "config": str(path),
            }
        )
        return
    ctx.err.print(f"Logged in to {base_url} as {me.get('username')}, team {teams or 'none'}.")
    ctx.err.print(f"Token saved in {path}; ANNEAL_API_KEY and ANNEAL_BASE_URL override it.")


@click.command()
@pass_context
def logout(ctx: Context) -> None:
    """Forget the saved token (the token itself stays valid until revoked on the Tokens page)."""
    saved = _config.read_config()
    if "api_key" in saved:
        saved.pop("api_key")
        _config.write_config(saved)
    ctx.err.print(f"No token saved in {_config.config_path()}.")


@click.command()
@json_option
@pass_context
def whoami(ctx: Context, as_json: bool) -> None:
    """Who the token belongs to and its teams."""
    me = ctx.client.me()
    if as_json:
        print_json({**me, "base_url": ctx.client.base_url})
        return
    teams = ", ".join(f"{t['name']} ({t['role']})" for t in me.get("teams", []))
    ctx.out.print(f"{me.get('username')} at {ctx.client.base_url}; teams: {teams or 'none'}")
