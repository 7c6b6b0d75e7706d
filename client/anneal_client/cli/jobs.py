"""anneal jobs: launch from a file, estimate, watch live, the frozen spec back as a file, list, control."""

from __future__ import annotations

import json
from pathlib import Path

import click
from rich.live import Live

from anneal_client.cli.context import Context, json_option, pass_context, show, table
from anneal_client.cli.watch import WatchState, final_line, is_live, line_for, render
from anneal_client.specs import dump, job_file
from anneal_client.types import Job

# `anneal jobs watch` exits with: 0 succeeded, 1 failed, cancelled or stopped, 3 paused (needs a resume).
EXIT_CODES = {"succeeded": 0, "paused": 3}


@click.group("jobs")
def group() -> None:
    """Training jobs."""


def _job_table(ctx: Context, jobs: list[Job]) -> None:
    table(
        ctx,
        jobs,
        [
            ("ID", lambda j: j.id),
            ("NAME", lambda j: j.name),
            ("STATE", lambda j: j.state),
            ("STEP", lambda j: f"{j.step}/{j.max_steps}"),
            ("SPEND", lambda j: j.spend.get("total")),
            ("CREATED", lambda j: (j.created_at or "")[:19]),
        ],
    )


@group.command("list")
@click.option("--state", default=None, help="Only jobs in this state (running, succeeded, ...).")
@json_option
@pass_context
def list_(ctx: Context, state: str | None, as_json: bool) -> None:
    """The team's jobs, newest first."""
    found = [j for j in ctx.client.jobs.list() if state is None or j.state == state]
    show(ctx, found, as_json, lambda: _job_table(ctx, found))


@group.command()
@click.argument("job_id", type=int)
@json_option
@pass_context
def get(ctx: Context, job_id: int, as_json: bool) -> None:
    """One job: state, step, spend, checkpoints."""
    job = ctx.client.jobs.get(job_id)

    def text() -> None:
        _job_table(ctx, [job])
        if job.error:
            ctx.out.print(f"error: {job.error}", markup=False)
        for checkpoint in job.checkpoints:
            ctx.out.print(f"checkpoint {checkpoint.id} at step {checkpoint.step}")

    show(ctx, job, as_json, text)


@group.command()
@click.argument("spec", type=click.Path(dir_okay=False, path_type=Path))
@click.option("--name", default=None, help="Overrides the file's name.")
@click.option("--watch", "then_watch", is_flag=True, help="Watch the job until it ends (exit code as watch).")
@json_option
@pass_context
def launch(ctx: Context, spec: Path, name: str | None, then_watch: bool, as_json: bool) -> None:
    """Launch the job SPEC describes (YAML or JSON: the body of POST /api/v1/jobs; datasets and verifiers
    may be named: `dataset: sums`, `verifiers: [{verifier: exact, weight: 1}]`)."""
    job = ctx.client.jobs.launch(job_file(spec), name=name)
    if not then_watch:
        show(
            ctx, job, as_json, lambda: ctx.out.print(f"job {job.id} {job.state}: anneal jobs watch {job.id}")
        )
        return
    ctx.err.print(f"job {job.id} launched")
    _watch(ctx, job.id, as_json)


@group.command()
@click.argument("spec", type=click.Path(dir_okay=False, path_type=Path))
@json_option
@pass_context
def estimate(ctx: Context, spec: Path, as_json: bool) -> None:
    """What launching SPEC would cost, checked as a launch is; nothing is kept."""
    found = ctx.client.jobs.estimate(job_file(spec))
    show(
        ctx,
        found,
        as_json,
        lambda: ctx.out.print(
            f"about {found.seconds / 60:.1f} min on {found.devices} x {found.device_type}: "
            f"{found.total:.4f} {found.currency}" + (" (over budget)" if found.over_budget else "")
        ),
    )


@group.command()
@click.argument("job_id", type=int)
@click.option("-o", "--output", type=click.Path(dir_okay=False, path_type=Path), help="Write to this file.")
@json_option
@pass_context
def spec(ctx: Context, job_id: int, output: Path | None, as_json: bool) -> None:
    """A job's frozen spec as a file `anneal jobs launch` takes (YAML; JSON with --json)."""
    text = dump(ctx.client.jobs.spec(job_id), as_json=as_json)
    if output is None:
        click.echo(text, nl=False)
    else:
        output.write_text(text, encoding="utf-8")
        ctx.err.print(f"wrote {output}")


@group.command()
@click.argument("job_id", type=int)
@json_option
@pass_context
def watch(ctx: Context, job_id: int, as_json: bool) -> None:
    """Follow a job until it ends: steps with ETA, reward, pass rate per domain, the latest rollout and
    alarms. Exits 0 if it succeeded, 1 if it failed, was cancelled or stopped, 3 if it paused."""
    _watch(ctx, job_id, as_json)


def _watch(ctx: Context, job_id: int, as_json: bool) -> None:
    client = ctx.client
    view = WatchState(client.jobs.get(job_id))
    events = client.jobs.events(job_id, follow=True)
    if as_json:
        for event in events:
            click.echo(json.dumps(event.to_dict(), ensure_ascii=False))
    elif is_live(ctx.out):
        with Live(render(view), console=ctx.out, refresh_per_second=4) as live:
            for event in events:
                view.observe(event)
                live.update(render(view))
    else:
        for event in events:
            view.observe(event)
            line = line_for(view, event)
            if line:
                ctx.out.print(line, markup=False, highlight=False)
    job = client.jobs.get(job_id)
    if as_json:
        click.echo(json.dumps({"job": job.to_dict()}, ensure_ascii=False))
    else:
        ctx.out.print(final_line(job), markup=False, highlight=False)
    code = EXIT_CODES.get(job.state, 1)
    if code:
        raise SystemExit(code)


def _control(action: str, help_text: str) -> click.Command:
    @click.command(action, help=help_text)
    @click.argument("job_id", type=int)
    @json_option
    @pass_context
    def command(ctx: Context, job_id: int, as_json: bool) -> None:
        job = getattr(ctx.client.jobs, action)(job_id)
        show(ctx, job, as_json, lambda: ctx.out.print(f"job {job.id} {job.state}"))

    return command


group.add_command(_control("pause", "Checkpoint a running job and free its devices (resume goes on)."))
group.add_command(_control("cancel", "Stop a job for good."))
group.add_command(_control("retry", "Run a finished job's frozen spec again as a new job."))


@group.command()
@click.argument("job_id", type=int)
@click.option("--budget", type=float, default=None, help="A new budget in USD (to resume past a cap).")
@click.option("--time-limit-minutes", type=float, default=None, help="A new time limit.")
@json_option
@pass_context
def resume(
    ctx: Context, job_id: int, budget: float | None, time_limit_minutes: float | None, as_json: bool
) -> None:
    """Queue a paused job again; it goes on from its checkpoint."""
    job = ctx.client.jobs.resume(job_id, budget=budget, time_limit_minutes=time_limit_minutes)
    show(ctx, job, as_json, lambda: ctx.out.print(f"job {job.id} {job.state}"))


@group.command()
@click.argument("job_id", type=int)
@click.option("--after", type=int, default=0, help="Only events after this seq.")
@click.option("--follow", is_flag=True, help="Keep printing new events until the job ends.")
@pass_context
def events(ctx: Context, job_id: int, after: int, follow: bool) -> None:
    """A job's events as JSON lines ({seq, kind, payload, created_at})."""
    for event in ctx.client.jobs.events(job_id, after=after, follow=follow):
        click.echo(json.dumps(event.to_dict(), ensure_ascii=False))


@group.command()
@json_option
@pass_context
def settings(ctx: Context, as_json: bool) -> None:
    """Every setting of a job's params: name, type, default and help."""
    found = ctx.client.jobs.settings()
    show(
        ctx,
        found,
        as_json,
        lambda: table(
            ctx,
            found["params"],
            [
                ("NAME", lambda p: p["name"]),
                ("TYPE", lambda p: p["type"]),
                ("DEFAULT", lambda p: json.dumps(p["default"])),
                ("HELP", lambda p: p.get("help", "")),
            ],
        ),
    )
