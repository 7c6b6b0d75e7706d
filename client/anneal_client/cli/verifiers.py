"""anneal verifiers: apply files (create, or a new version only when changed), preview, export, list."""

from __future__ import annotations

from pathlib import Path

import click

from anneal_client.cli.context import Context, json_option, pass_context, print_json, show, table
from anneal_client.specs import dump, grader_file, samples_file, verifier_files, verifier_spec


@click.group("verifiers")
def group() -> None:
    """Verifiers as files: apply them from Git, export them back."""


@group.command("list")
@json_option
@pass_context
def list_(ctx: Context, as_json: bool) -> None:
    """The team's verifiers with their latest version."""
    found = ctx.client.verifiers.list()

    def text() -> None:
        table(
            ctx,
            found,
            [
                ("ID", lambda v: v.id),
                ("NAME", lambda v: v.name),
                ("TYPE", lambda v: v.latest_version and v.latest_version.spec.get("type")),
                (
                    "VERSION",
                    lambda v: v.latest_version and f"{v.latest_version.id} (v{v.latest_version.number})",
                ),
                ("FLAGGED", lambda v: "yes" if v.flagged else ""),
            ],
        )

    show(ctx, found, as_json, text)


@group.command()
@click.argument("files", nargs=-1, required=True, type=click.Path(dir_okay=False, path_type=Path))
@json_option
@pass_context
def apply(ctx: Context, files: tuple[Path, ...], as_json: bool) -> None:
    """Create each verifier the FILES describe ({name, spec}, YAML or JSON), or add a version when its spec
    differs from the latest one. Unchanged verifiers are left alone, so it is safe to run from CI."""
    # Every file is read before the first is applied: a broken one changes nothing.
    items = [item for path in files for item in verifier_files(path)]
    results = []
    for item in items:
        applied = ctx.client.verifiers.apply(name=item["name"], spec=item["spec"])
        results.append(applied)
        if not as_json:
            flag = "  [flagged by a hack probe]" if applied.version.flagged else ""
            words = {"created": "created", "new_version": "new version", "unchanged": "unchanged"}
            ctx.out.print(
                f"{words[applied.action]:>11}  {applied.verifier.name}  (verifier {applied.verifier.id}, "
                f"version {applied.version.number}, id {applied.version.id}){flag}",
                markup=False,
            )
    if as_json:
        print_json([r.to_dict() for r in results])


@group.command()
@click.argument("spec", type=click.Path(dir_okay=False, path_type=Path))
@click.option(
    "--samples",
    required=True,
    type=click.Path(dir_okay=False, path_type=Path),
    help="JSON Lines (or a YAML/JSON list) of {row: {...}, completion: text}.",
)
@json_option
@pass_context
def preview(ctx: Context, spec: Path, samples: Path, as_json: bool) -> None:
    """Score SAMPLES with the verifier in SPEC (a verifier file or a bare spec), saving nothing."""
    given = samples_file(samples)
    results = ctx.client.verifiers.preview(spec=verifier_spec(spec), samples=given)

    def text() -> None:
        rows = [(n, sample, result) for n, (sample, result) in enumerate(zip(given, results, strict=True), 1)]
        table(
            ctx,
            rows,
            [
                ("#", lambda r: r[0]),
                ("SCORE", lambda r: f"{r[2].score:.3f}"),
                ("COMPLETION", lambda r: _short(str(r[1]["completion"]))),
                ("REASON", lambda r: r[2].reason),
            ],
        )

    show(ctx, results, as_json, text)


def _short(text: str, width: int = 40) -> str:
    text = " ".join(text.split())
    return text if len(text) <= width else text[: width - 1] + "…"


@group.command("import")
@click.argument("grader", type=click.Path(dir_okay=False, path_type=Path))
@click.option("--name", default="", help="The verifier's name (default: the grader's).")
@click.option(
    "--judge-endpoint", default="", help="score_model: an allowed endpoint (https://host/v1) serving it."
)
@click.option("--judge-api-key-secret", default="", help="score_model: the team secret holding its key.")
@json_option
@pass_context
def import_(
    ctx: Context, grader: Path, name: str, judge_endpoint: str, judge_api_key_secret: str, as_json: bool
) -> None:
    """Make a verifier from an OpenAI fine-tuning grader (JSON or YAML: string_check, text_similarity,
    score_model, python, multi). Export it afterwards to keep it in Git as an Anneal spec."""
    imported = ctx.client.verifiers.import_openai(
        grader_file(grader),
        name=name,
        judge_endpoint=judge_endpoint,
        judge_api_key_secret=judge_api_key_secret,
    )

    def text() -> None:
        latest = imported.latest_version
        kind = latest.spec.get("type") if latest else "?"
        ctx.out.print(f"imported as verifier {imported.id} ({imported.name}, {kind})", markup=False)
        for note in imported.notes:
            ctx.out.print(f"  note: {note}", markup=False)

    show(ctx, imported, as_json, text)


@group.command()
@click.argument("verifier_id", type=int)
@click.option("--version", "number", type=int, default=None, help="A version number (default: the latest).")
@click.option("-o", "--output", type=click.Path(dir_okay=False, path_type=Path), help="Write to this file.")
@json_option
@pass_context
def export(ctx: Context, verifier_id: int, number: int | None, output: Path | None, as_json: bool) -> None:
    """Print a verifier as a file `anneal verifiers apply` takes (YAML; JSON with --json)."""
    text = dump(ctx.client.verifiers.export(verifier_id, version=number), as_json=as_json)
    if output is None:
        click.echo(text, nl=False)
    else:
        output.write_text(text, encoding="utf-8")
        ctx.err.print(f"wrote {output}")


@group.command()
@click.argument("verifier_id", type=int)
@json_option
@pass_context
def versions(ctx: Context, verifier_id: int, as_json: bool) -> None:
    """Versions, newest first, with the diff to the one before."""
    found = ctx.client.verifiers.versions(verifier_id)

    def text() -> None:
        for version in found:
            flag = " (flagged)" if version.flagged else ""
            ctx.out.print(
                f"version {version.number} (id {version.id}){flag}  {version.created_at}", markup=False
            )
            if version.diff:
                ctx.out.print(version.diff, markup=False, highlight=False)

    show(ctx, found, as_json, text)


@group.command("test-cases")
@click.argument("verifier_id", type=int)
@json_option
@pass_context
def test_cases(ctx: Context, verifier_id: int, as_json: bool) -> None:
    """The verifier's test cases, each scored by its latest version; exits 1 if any disagrees."""
    found = ctx.client.verifiers.test_cases(verifier_id)

    def text() -> None:
        table(
            ctx,
            found,
            [
                ("ID", lambda c: c.id),
                ("EXPECTED", lambda c: "pass" if c.expected_pass else "fail"),
                ("SCORE", lambda c: f"{c.score:.3f}"),
                ("OK", lambda c: "ok" if c.ok else "DISAGREES"),
                ("REASON", lambda c: c.reason),
            ],
        )

    show(ctx, found, as_json, text)
    if any(not c.ok for c in found):
        raise SystemExit(1)
