"""anneal deploy, anneal deployments (list, tier, stop, usage, keys), anneal checkpoints, anneal models."""

from __future__ import annotations

import click
from rich.status import Status

from anneal_client.cli.context import Context, json_option, pass_context, print_json, show, table
from anneal_client.types import Deployment

TIERS = click.Choice(["batch", "standard", "turbo"])


def _deployment_table(ctx: Context, found: list[Deployment]) -> None:
    table(
        ctx,
        found,
        [
            ("ID", lambda d: d.id),
            ("NAME", lambda d: d.name),
            ("TIER", lambda d: d.tier),
            ("STATE", lambda d: d.state),
            ("CHECKPOINT", lambda d: d.checkpoint),
            ("BASE URL", lambda d: d.base_url),
        ],
    )


@click.command()
@click.argument("checkpoint", type=int)
@click.option("--tier", type=TIERS, default="standard", show_default=True)
@click.option("--name", default="", help="The `model` clients send (default: chosen by the platform).")
@click.option("--replicas", type=int, default=1, show_default=True)
@click.option("--max-concurrency", type=int, default=4, show_default=True)
@click.option("--wait/--no-wait", default=True, show_default=True, help="Wait until it is ready (or failed).")
@click.option("--key", "key_name", default=None, help="Also make a /v1 key of this name for it (shown once).")
@json_option
@pass_context
def deploy(
    ctx: Context,
    checkpoint: int,
    tier: str,
    name: str,
    replicas: int,
    max_concurrency: int,
    wait: bool,
    key_name: str | None,
    as_json: bool,
) -> None:
    """Serve CHECKPOINT behind the OpenAI-compatible /v1 at a tier. Exits 1 if the deployment failed (the
    regression gate, or a replica that did not start)."""
    client = ctx.client
    deployment = client.deployments.create(
        checkpoint=checkpoint, name=name, tier=tier, replicas=replicas, max_concurrency=max_concurrency
    )
    if wait:
        with Status(f"deployment {deployment.id}: {deployment.state}", console=ctx.err) as status:
            deployment = client.deployments.wait(
                deployment.id,
                timeout=None,
                on_update=lambda d: status.update(f"deployment {d.id}: {d.state}"),
            )
    key = client.deployments.keys.create(name=key_name, deployment=deployment.id) if key_name else None
    if as_json:
        print_json({**deployment.to_dict(), **({"key": key.to_dict()} if key else {})})
    else:
        ctx.out.print(
            f"deployment {deployment.id} ({deployment.name}, {deployment.tier}): {deployment.state}"
            + (f": {deployment.error}" if deployment.error else ""),
            markup=False,
        )
        if deployment.state == "ready":
            ctx.out.print(f"base_url {deployment.base_url}  model {deployment.name}", markup=False)
        if key is not None:
            ctx.out.print(f"key {key.key}  (shown once)", markup=False)
    if wait and deployment.state != "ready":
        raise SystemExit(1)


@click.group("deployments")
def group() -> None:
    """Deployments, their keys and usage."""


@group.command("list")
@json_option
@pass_context
def list_(ctx: Context, as_json: bool) -> None:
    found = ctx.client.deployments.list()
    show(ctx, found, as_json, lambda: _deployment_table(ctx, found))


@group.command()
@click.argument("deployment_id", type=int)
@json_option
@pass_context
def get(ctx: Context, deployment_id: int, as_json: bool) -> None:
    found = ctx.client.deployments.get(deployment_id)
    show(ctx, found, as_json, lambda: _deployment_table(ctx, [found]))


@group.command()
@click.argument("deployment_id", type=int)
@click.argument("tier", type=TIERS)
@json_option
@pass_context
def tier(ctx: Context, deployment_id: int, tier: str, as_json: bool) -> None:
    """Switch tier: new replicas start, the old ones serve until one is ready."""
    found = ctx.client.deployments.set_tier(deployment_id, tier)
    show(ctx, found, as_json, lambda: _deployment_table(ctx, [found]))


@group.command()
@click.argument("deployment_id", type=int)
@json_option
@pass_context
def stop(ctx: Context, deployment_id: int, as_json: bool) -> None:
    found = ctx.client.deployments.stop(deployment_id)
    show(ctx, found, as_json, lambda: _deployment_table(ctx, [found]))


@group.command()
@click.argument("deployment_id", type=int, required=False)
@json_option
@pass_context
def usage(ctx: Context, deployment_id: int | None, as_json: bool) -> None:
    """Tokens and cost of a deployment, or (without an id) the team's spend and budget cap."""
    if deployment_id is None:
        found = ctx.client.deployments.team_usage()
    else:
        found = ctx.client.deployments.usage(deployment_id)
    totals = found.get("totals") or {}
    show(
        ctx,
        found,
        as_json,
        lambda: ctx.out.print(
            " ".join(
                f"{k}={v}"
                for k, v in (
                    totals or {k: v for k, v in found.items() if not isinstance(v, list | dict)}
                ).items()
            )
        ),
    )


@group.group()
def keys() -> None:
    """/v1 keys (sk-anneal-…)."""


@keys.command("create")
@click.argument("name")
@click.option("--deployment", type=int, default=None, help="Bind the key to one deployment (default: all).")
@json_option
@pass_context
def keys_create(ctx: Context, name: str, deployment: int | None, as_json: bool) -> None:
    """Make a key; the secret is printed this once only."""
    key = ctx.client.deployments.keys.create(name=name, deployment=deployment)
    show(ctx, key, as_json, lambda: click.echo(key.key))


@keys.command("list")
@json_option
@pass_context
def keys_list(ctx: Context, as_json: bool) -> None:
    found = ctx.client.deployments.keys.list()
    show(
        ctx,
        found,
        as_json,
        lambda: table(
            ctx,
            found,
            [
                ("ID", lambda k: k.id),
                ("NAME", lambda k: k.name),
                ("DEPLOYMENT", lambda k: k.deployment or "all"),
                ("HINT", lambda k: k.key_hint),
                ("REVOKED", lambda k: k.revoked_at or ""),
            ],
        ),
    )


@keys.command("revoke")
@click.argument("key_id", type=int)
@json_option
@pass_context
def keys_revoke(ctx: Context, key_id: int, as_json: bool) -> None:
    key = ctx.client.deployments.keys.revoke(key_id)
    show(ctx, key, as_json, lambda: ctx.out.print(f"key {key.id} revoked"))


@click.group("checkpoints")
def checkpoints() -> None:
    """Checkpoints of the team's jobs."""


@checkpoints.command("list")
@click.option("--job", type=int, default=None, help="Only this job's checkpoints.")
@json_option
@pass_context
def checkpoints_list(ctx: Context, job: int | None, as_json: bool) -> None:
    found = ctx.client.checkpoints.list(job=job)
    show(
        ctx,
        found,
        as_json,
        lambda: table(
            ctx,
            found,
            [
                ("ID", lambda c: c.id),
                ("JOB", lambda c: c.job),
                ("STEP", lambda c: c.step),
                ("CREATED", lambda c: (c.created_at or "")[:19]),
            ],
        ),
    )


@checkpoints.command("card")
@click.argument("checkpoint_id", type=int)
@click.option(
    "--output", "-o", type=click.Path(dir_okay=False), default=None, help="Write the Markdown here."
)
@json_option
@pass_context
def checkpoints_card(ctx: Context, checkpoint_id: int, output: str | None, as_json: bool) -> None:
    """The checkpoint's model card, as Markdown (or --json): what to show before a deploy."""
    if as_json:
        print_json(ctx.client.checkpoints.card(checkpoint_id))
        return
    text = ctx.client.checkpoints.card(checkpoint_id, markdown=True)
    if output:
        with open(output, "w", encoding="utf-8") as f:
            f.write(text)
        ctx.out.print(f"model card of checkpoint {checkpoint_id} written to {output}")
    else:
        click.echo(text)


@click.group("models")
def models() -> None:
    """Base models a job may start from."""


@models.command("list")
@json_option
@pass_context
def models_list(ctx: Context, as_json: bool) -> None:
    found = ctx.client.models.list()
    show(
        ctx,
        found,
        as_json,
        lambda: table(
            ctx,
            found,
            [
                ("NAME", lambda m: m.name),
                ("KIND", lambda m: m.kind),
                ("READY", lambda m: "yes" if m.ready else "no"),
                ("DESCRIPTION", lambda m: m.description),
            ],
        ),
    )
