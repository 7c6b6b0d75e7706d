"""Reads for a job's long-context results: its held-out scores by prompt length and its length curriculum.

Both come from the job's events: the evaluation metric events carry ``eval_length/<bound>/<domain>`` and
``eval_length_rows/<bound>`` (gpu_jobs.evaluation.by_length), the step metrics ``curriculum/stage``, and the
log events of a curriculum carry a ``curriculum`` object (gpu_jobs.lengths, gpu_jobs.grpo). Callers pass a
job the user may see (scoped to the caller's team before it gets here).
"""

from __future__ import annotations

import re

from anneal.training.models import EventKind, Job
from gpu_jobs.curriculum import parse_curriculum

_KEY = re.compile(r"^eval_length/(\d+)/(.+)$")


def length_evaluation(*, job: Job) -> dict:
    """{"bounds": [upper bound of each bucket, in tokens], "rows": [rows per bucket], "domains": ["mean",
    then each domain], "steps": [evaluated steps, 0 = the base model], "scores": {domain: [[score per
    bucket, None where a bucket has no row of it] per step]}}; empty lists when the job has none."""
    payloads = list(
        job.events.filter(kind=EventKind.METRIC, payload__has_key="eval/mean")
        .order_by("seq")
        .values_list("payload", flat=True)
    )
    payloads = [p for p in payloads if any(key.startswith("eval_length/") for key in p)]
    bounds: set[int] = set()
    domains: set[str] = set()
    for payload in payloads:
        for key in payload:
            match = _KEY.match(key)
            if match:
                bounds.add(int(match.group(1)))
                domains.add(match.group(2))
    ordered_bounds = sorted(bounds)
    ordered_domains = ["mean", *sorted(domains - {"mean"})] if domains else []
    rows = [0] * len(ordered_bounds)
    if payloads:
        last = payloads[-1]
        rows = [int(last.get(f"eval_length_rows/{bound}", 0)) for bound in ordered_bounds]
    return {
        "bounds": ordered_bounds,
        "rows": rows,
        "domains": ordered_domains,
        "steps": [int(p.get("step", 0)) for p in payloads],
        "scores": {
            domain: [[p.get(f"eval_length/{bound}/{domain}") for bound in ordered_bounds] for p in payloads]
            for domain in ordered_domains
        },
    }


def curriculum_progress(*, job: Job) -> dict | None:
    """The job's length curriculum: {"stages": [{stage, max_length, share, pass_rate, rows}], "current": the
    stage it is in (1-based; 1 before training), "moves": [each transition: step, from_stage, stage, reason]};
    None when the job has none (or its spec's curriculum no longer parses)."""
    spec = job.spec if isinstance(job.spec, dict) else {}
    try:
        stages = parse_curriculum(str(spec.get("length_curriculum") or ""))
    except ValueError:
        return None
    if not stages:
        return None
    described = [
        {
            "stage": index + 1,
            "max_length": s.max_length,
            "share": s.share,
            "pass_rate": s.pass_rate,
            "rows": None,
        }
        for index, s in enumerate(stages)
    ]
    moves = []
    current = 1
    logs = (
        job.events.filter(kind=EventKind.LOG, payload__has_key="curriculum")
        .order_by("seq")
        .values_list("payload", flat=True)
    )
    for payload in logs:
        state = payload.get("curriculum") or {}
        if "from_stage" in state:
            moves.append({k: state.get(k) for k in ("step", "from_stage", "stage", "reason")})
        elif isinstance(state.get("rows"), list):
            for entry, count in zip(described, state["rows"], strict=False):
                entry["rows"] = count
        if isinstance(state.get("stage"), int):
            current = state["stage"]
    latest = (
        job.events.filter(kind=EventKind.METRIC, payload__has_key="curriculum/stage")
        .order_by("-seq")
        .values_list("payload", flat=True)
        .first()
    )
    if latest is not None:
        current = max(current, int(latest["curriculum/stage"]))
    return {"stages": described, "current": current, "moves": moves}
