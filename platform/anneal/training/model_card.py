"""A checkpoint's model card: what an expert shows before a deploy. Base model, data and verifier versions, the
held-out scores of the base model against this checkpoint per domain (and per prompt-length bucket when the
job evaluated by length; an agent job's habits on its held-out tasks), the training curve up to the checkpoint,
the alarms raised, cost and time.

``model_card`` reads it (a dict, the REST answer); ``model_card_markdown`` renders the same dict as Markdown
(the page's export). The held-out score "at the checkpoint" is that of the latest evaluation at or before its
step: a job evaluates every ``eval_steps`` and at the end, and saves every ``save_steps`` and at the end, so
the final checkpoint always has its own."""

from __future__ import annotations

from anneal.training.costs import job_spend, usd
from anneal.training.length_results import length_evaluation
from anneal.training.models import Checkpoint, EventKind
from anneal.training.selectors import evaluation_table, metric_series

# Settings worth a line on the card; the whole spec is in the lineage (GET /api/v1/checkpoints).
CARD_SETTINGS = (
    "algorithm",
    "loss_type",
    "max_steps",
    "learning_rate",
    "prompts_per_step",
    "num_generations",
    "max_completion_length",
    "max_prompt_length",
    "lora_rank",
    "beta",
    "seed",
)
# An agent job's held-out episodes (gpu_jobs.agent.evaluation): key -> what the card calls it.
AGENT_HABITS = {
    "eval_agent/solved": "held-out tasks solved",
    "eval_agent/tested_before_finish": "ran the tests after the last edit (or at all), then finished",
    "eval_agent/edited": "changed the code (an edit applied)",
    "eval_agent/edited_then_tested": "changed the code, ran the tests after, then finished",
    "eval_agent/valid_calls": "turns with a well-formed tool call",
    "eval_agent/tests": "tests passing at the end",
    "eval_agent/turns": "turns per episode",
}
CURVE_POINTS = 60  # at most this many points of each curve: a card is read, not analysed


def _thinned(steps: list[int], values: list[float], *, limit: int = CURVE_POINTS) -> list[list[float]]:
    if len(steps) <= limit:
        return [[s, v] for s, v in zip(steps, values, strict=True)]
    stride = (len(steps) - 1) / (limit - 1)
    picks = sorted({round(i * stride) for i in range(limit)})
    return [[steps[i], values[i]] for i in picks]


def _held_out(job, step: int) -> dict:
    domains, steps, scores = evaluation_table(job=job)
    base_at = 0 if 0 in steps else None
    at = max((i for i, s in enumerate(steps) if s <= step), default=None, key=lambda i: steps[i])
    rows = []
    for domain, values in zip(domains, scores, strict=True):
        base = values[steps.index(0)] if base_at is not None else None
        here = values[at] if at is not None else None
        change = here - base if isinstance(here, float | int) and isinstance(base, float | int) else None
        rows.append({"domain": domain, "base": base, "checkpoint": here, "change": change})
    return {"evaluated_at_step": steps[at] if at is not None else None, "rows": rows}


def _by_length(job, step: int) -> dict | None:
    found = length_evaluation(job=job)
    if not found["bounds"] or 0 not in found["steps"]:
        return None
    steps = found["steps"]
    at = max((i for i, s in enumerate(steps) if s <= step), default=None, key=lambda i: steps[i])
    if at is None:
        return None
    base = steps.index(0)
    rows = []
    # One domain: its rows are the mean's, so it is listed once, by its name.
    domains = found["domains"] if len(found["domains"]) != 2 else found["domains"][1:]
    for domain in domains:
        per_step = found["scores"][domain]
        for bucket, (bound, count) in enumerate(zip(found["bounds"], found["rows"], strict=True)):
            before, after = per_step[base][bucket], per_step[at][bucket]
            if before is None and after is None:
                continue
            rows.append(
                {"domain": domain, "up_to_tokens": bound, "rows": count, "base": before, "checkpoint": after}
            )
    return {"evaluated_at_step": steps[at], "rows": rows}


def _agent_habits(job, step: int) -> dict | None:
    """An agent job's habits on its held-out tasks, the base (step 0: after the warm-up alone) against the
    latest evaluation at or before ``step``; None for other jobs."""
    jobs = type(job).objects.filter(pk=job.pk)
    rows = []
    evaluated_at = None
    for key, label in AGENT_HABITS.items():
        steps, values = metric_series(jobs=jobs, key=key)[job.pk]
        if 0 not in steps:
            continue
        at = max((i for i, s in enumerate(steps) if s <= step), key=lambda i: steps[i])
        evaluated_at = steps[at]
        rows.append(
            {
                "habit": key.removeprefix("eval_agent/"),
                "label": label,
                "base": values[steps.index(0)],
                "checkpoint": values[at],
            }
        )
    if not rows:
        return None
    environment = (job.spec or {}).get("environment") or {}
    per_task = int(environment.get("eval_episodes", 1) or 1)
    how = (
        "One greedy episode per held-out task"
        if per_task == 1
        else f"{per_task} episodes per held-out task, sampled at the job's temperature and seeded alike at "
        "every evaluation"
    )
    return {"evaluated_at_step": evaluated_at, "rows": rows, "episodes_per_task": per_task, "how": how}


def _curves(job, step: int) -> dict[str, list[list[float]]]:
    jobs = type(job).objects.filter(pk=job.pk)
    curves = {}
    for key in ("reward", "pass_rate"):
        steps, values = metric_series(jobs=jobs, key=key)[job.pk]
        kept = [(s, v) for s, v in zip(steps, values, strict=True) if s <= step]
        if kept:
            curves[key] = _thinned([s for s, _ in kept], [v for _, v in kept])
    return curves


def _alarms(job, step: int) -> list[dict]:
    events = job.events.filter(kind=EventKind.ALARM).order_by("seq").values_list("payload", flat=True)
    return [
        {"name": str(p.get("name", "")), "step": p.get("step"), "message": str(p.get("message", ""))}
        for p in events
        if not isinstance(p.get("step"), int) or p["step"] <= step
    ]


def model_card(*, checkpoint: Checkpoint) -> dict:
    """The card of ``checkpoint`` (its job, data and verifiers loaded here; already scoped by the caller)."""
    job = checkpoint.job
    spec = job.spec or {}
    datasets = [
        {
            "dataset": jd.dataset_version.dataset.name,
            "version": jd.dataset_version.number,
            "id": jd.dataset_version_id,
            "rows": jd.dataset_version.row_count,
        }
        for jd in job.job_datasets.select_related("dataset_version__dataset").order_by("position")
    ]
    held_out_version = job.eval_dataset_version
    verifiers = [
        {
            "name": jv.name,
            "verifier": jv.verifier_version.verifier.name,
            "version": jv.verifier_version.number,
            "type": (jv.verifier_version.spec or {}).get("type"),
            "weight": jv.weight,
        }
        for jv in job.job_verifiers.select_related("verifier_version__verifier").order_by("name")
    ]
    spend = job_spend(job)
    return {
        "checkpoint": {
            "id": checkpoint.pk,
            "step": checkpoint.step,
            "created_at": checkpoint.created_at.isoformat(),
        },
        "job": {"id": job.pk, "name": job.name, "state": job.state, "max_steps": job.max_steps},
        "base_model": checkpoint.lineage.get("base_model") or spec.get("model"),
        "code_version": checkpoint.lineage.get("code_version"),
        "datasets": datasets,
        "held_out_dataset": (
            {
                "dataset": held_out_version.dataset.name,
                "version": held_out_version.number,
                "id": held_out_version.pk,
                "rows": held_out_version.row_count,
            }
            if held_out_version is not None
            else None
        ),
        "verifiers": verifiers,
        "settings": {key: spec[key] for key in CARD_SETTINGS if spec.get(key) not in (None, "")},
        "held_out": _held_out(job, checkpoint.step),
        "held_out_by_length": _by_length(job, checkpoint.step),
        "held_out_agent": _agent_habits(job, checkpoint.step),
        "curves": _curves(job, checkpoint.step),
        "alarms": _alarms(job, checkpoint.step),
        "cost": spend,
        "time": {
            "run_seconds": spend["run_seconds"],
            "started_at": job.started_at.isoformat(timespec="seconds") if job.started_at else None,
            "finished_at": job.finished_at.isoformat(timespec="seconds") if job.finished_at else None,
        },
    }


def score_text(value: object) -> str:
    return f"{value:.3f}" if isinstance(value, float | int) else "–"


def habit_text(habit: str, value: float) -> str:
    """A share as a percentage, the mean turns as a number."""
    return f"{value:.2f}" if habit == "turns" else f"{value:.0%}"


def change_text(value: object) -> str:
    return f"{value * 100:+.1f} points" if isinstance(value, float | int) else "–"


def _cell(text: object) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def model_card_markdown(card: dict) -> str:
    """The card as Markdown, every section in the order of the page."""
    ckpt, job = card["checkpoint"], card["job"]
    lines = [
        f"# Model card: {_cell(job['name'])}, step {ckpt['step']}",
        "",
        f"- Base model: `{card['base_model']}`",
        f"- Job: #{job['id']} ({job['state']}), checkpoint #{ckpt['id']} at step {ckpt['step']} of {job['max_steps']}",
        f"- Code version: `{card['code_version'] or 'unknown'}`",
        "",
        "## Data",
        "",
    ]
    for d in card["datasets"]:
        lines.append(f"- Training: {_cell(d['dataset'])} v{d['version']} (#{d['id']}, {d['rows']} rows)")
    held = card["held_out_dataset"]
    lines.append(
        f"- Held out: {_cell(held['dataset'])} v{held['version']} (#{held['id']}, {held['rows']} rows)"
        if held
        else "- Held out: none (the job was launched without a held-out set)"
    )
    lines += [
        "",
        "## Verifiers",
        "",
        "| name | verifier | version | type | weight |",
        "|---|---|---|---|---|",
    ]
    for v in card["verifiers"]:
        lines.append(
            f"| {_cell(v['name'])} | {_cell(v['verifier'])} | {v['version']} | {v['type']} | {v['weight']:g} |"
        )
    lines += ["", "## Settings", ""]
    lines += [f"- {key}: `{value}`" for key, value in card["settings"].items()]
    lines += ["", "## Held-out score: base model against this checkpoint", ""]
    rows = card["held_out"]["rows"]
    if rows:
        lines += [
            f"Evaluated at step {card['held_out']['evaluated_at_step']}.",
            "",
            "| domain | base | checkpoint | change |",
            "|---|---|---|---|",
        ]
        for r in rows:
            lines.append(
                f"| {_cell(r['domain'])} | {score_text(r['base'])} | {score_text(r['checkpoint'])} | {change_text(r['change'])} |"
            )
    else:
        lines.append("No held-out evaluation (the job had no held-out rows, or none ran by this step).")
    length = card["held_out_by_length"]
    if length:
        lines += [
            "",
            "### By prompt length",
            "",
            "| domain | prompts up to (tokens) | rows | base | checkpoint |",
            "|---|---|---|---|---|",
        ]
        for r in length["rows"]:
            lines.append(
                f"| {_cell(r['domain'])} | {r['up_to_tokens']} | {r['rows']} | {score_text(r['base'])} | {score_text(r['checkpoint'])} |"
            )
    agent = card["held_out_agent"]
    if agent:
        lines += [
            "",
            "### Agent habits on held-out tasks",
            "",
            f"{agent['how']}; the base is the model before GRPO (after any warm-up), "
            f"the checkpoint's from step {agent['evaluated_at_step']}.",
            "",
            "| habit | base | checkpoint |",
            "|---|---|---|",
        ]
        for r in agent["rows"]:
            lines.append(
                f"| {r['label']} | {habit_text(r['habit'], r['base'])} | {habit_text(r['habit'], r['checkpoint'])} |"
            )
    lines += ["", "## Training curve", ""]
    reward = card["curves"].get("reward") or []
    if reward:
        shown = _thinned([int(s) for s, _ in reward], [v for _, v in reward], limit=12)
        lines += ["| step | reward |", "|---|---|"] + [f"| {int(s)} | {v:.3f} |" for s, v in shown]
    else:
        lines.append("No reward was reported by this step.")
    lines += ["", "## Alarms", ""]
    lines += [
        f"- step {a['step']}: **{_cell(a['name'])}**: {_cell(a['message'])}" for a in card["alarms"]
    ] or ["None raised."]
    cost = card["cost"]
    lines += [
        "",
        "## Cost and time",
        "",
        f"- Run time: {cost['run_seconds']:.0f} s on {cost['devices']} × {cost['device_type']}",
        f"- Spend: {usd(cost['total'])} {cost['currency']} (devices {usd(cost['device_cost'])}, sandboxes "
        f"{usd(cost['sandbox_cost'])})"
        + (f" of a {usd(cost['budget'])} budget" if cost.get("budget") else ""),
        "",
    ]
    return "\n".join(lines)
