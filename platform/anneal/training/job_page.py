"""What the job page shows of a job's events, in words: curated metric groups and readable log lines.

The groups are data (``METRIC_GROUPS``): the server renders the page's first paint from them and hands the
same list to job.js, which applies it to every metric event that streams in, so the first paint and the
live page agree. A metric key no group names is still shown, under "Show all metrics".
"""

import ast
import re

# Each group: a title and its rows, in order. A row names one metric key exactly ("key"), or every key a
# regular expression matches ("pattern", its first group filling "{}" in the label). "format" says how the
# value reads: "share" (a fraction shown as a percentage), "seconds", "count" or "number".
METRIC_GROUPS: list[dict] = [
    {
        "title": "Reward",
        "rows": [
            {"key": "reward", "label": "mean reward", "format": "number"},
            {"key": "reward_std", "label": "reward spread (std)", "format": "number"},
            {"pattern": r"^rewards/([^/]+)$", "label": "verifier {}", "format": "number"},
            {"pattern": r"^reward/(.+)$", "label": "domain {}", "format": "number"},
        ],
    },
    {
        "title": "Pass rate",
        "rows": [
            {"key": "pass_rate", "label": "all verifiers passed", "format": "share"},
            {"pattern": r"^pass_rate/(.+)$", "label": "domain {}", "format": "share"},
        ],
    },
    {
        "title": "Held-out evaluation",
        "rows": [
            {"key": "eval/mean", "label": "all domains", "format": "number"},
            {"pattern": r"^eval/(.+)$", "label": "domain {}", "format": "number"},
            {"pattern": r"^eval_verifier/(.+)$", "label": "verifier {}", "format": "number"},
        ],
    },
    {
        "title": "Held-out agent episodes",
        "rows": [
            {"key": "eval_agent/solved", "label": "tasks solved", "format": "share"},
            {"key": "eval_agent/tests", "label": "tests passing at the end", "format": "share"},
            {
                "key": "eval_agent/tested_before_finish",
                "label": "ran the tests before finishing",
                "format": "share",
            },
            {"key": "eval_agent/edited", "label": "changed the code", "format": "share"},
            {
                "key": "eval_agent/edited_then_tested",
                "label": "changed the code, then ran the tests and finished",
                "format": "share",
            },
            {"key": "eval_agent/valid_calls", "label": "turns with a valid tool call", "format": "share"},
            {"key": "eval_agent/turns", "label": "turns per episode", "format": "number"},
            {"key": "eval_agent/episodes", "label": "episodes", "format": "count"},
        ],
    },
    {
        "title": "Loss",
        "rows": [
            {"key": "loss", "label": "loss", "format": "number"},
            {"key": "grad_norm", "label": "gradient norm", "format": "number"},
            {"key": "learning_rate", "label": "learning rate", "format": "number"},
        ],
    },
    {
        "title": "KL and entropy",
        "rows": [
            {"key": "kl", "label": "KL from the base model", "format": "number"},
            {"key": "entropy", "label": "entropy", "format": "number"},
        ],
    },
    {
        "title": "Completion length",
        "rows": [
            {"key": "completion_length", "label": "mean (tokens)", "format": "number"},
            {"key": "completions/min_length", "label": "shortest (tokens)", "format": "count"},
            {"key": "completions/max_length", "label": "longest (tokens)", "format": "count"},
            {"key": "completions/clipped_ratio", "label": "cut at the length limit", "format": "share"},
        ],
    },
    {
        "title": "Speed",
        "rows": [
            {"key": "step_time", "label": "step time", "format": "seconds"},
            {"key": "num_tokens", "label": "tokens so far", "format": "count"},
            {"pattern": r"^verify_time/(.+)$", "label": "verifier {} time", "format": "seconds"},
        ],
    },
    {
        "title": "Clipping",
        "rows": [
            {"key": "clip_ratio/region_mean", "label": "clipped updates", "format": "share"},
            {"key": "clip_ratio/low_mean", "label": "clipped below", "format": "share"},
            {"key": "clip_ratio/high_mean", "label": "clipped above", "format": "share"},
        ],
    },
    {
        "title": "Learning signal",
        "rows": [
            {"key": "frac_reward_zero_std", "label": "groups with no signal", "format": "share"},
            {"key": "tampering", "label": "rollouts that tried to tamper", "format": "share"},
        ],
    },
]


def format_metric(value: object, kind: str) -> str:
    """A metric value as job.js writes it (formatValue there follows the same rules)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return str(value)
    if kind == "share":
        return f"{value * 100:.1f}%"
    if kind == "seconds":
        return f"{value:.2f} s" if abs(value) < 100 else f"{value:.0f} s"
    if kind == "count":
        return f"{round(value):,}"
    if value == int(value) and abs(value) < 1e6:
        return str(int(value))
    magnitude = abs(value)
    if magnitude < 1e-3 or magnitude >= 1e5:
        return f"{value:.2e}"
    return f"{value:.4f}"


def metric_groups(metrics: dict) -> list[dict]:
    """The curated groups that have a value in ``metrics``: ``[{"title", "rows": [{"key", "label", "value"}]}]``.

    A key goes to the first row that names it; rows of a pattern list their keys in sorted order."""
    placed: set[str] = set()
    groups = []
    for group in METRIC_GROUPS:
        rows = []
        for row in group["rows"]:
            if "key" in row:
                matches = [(row["key"], row["label"])] if row["key"] in metrics else []
            else:
                pattern = re.compile(row["pattern"])
                matches = [
                    (key, row["label"].replace("{}", found.group(1)))
                    for key in sorted(metrics)
                    if (found := pattern.match(key))
                ]
            for key, label in matches:
                if key in placed:
                    continue
                placed.add(key)
                rows.append({"key": key, "label": label, "value": format_metric(metrics[key], row["format"])})
        if rows:
            groups.append({"title": group["title"], "rows": rows})
    return groups


# A log message that ends in a Python dict's repr, as older workers wrote ("training finished: {'steps': 3}").
_TRAILING_DICT = re.compile(r"^(?P<head>.*?)(?P<dict>\{'.*\})\s*$", re.DOTALL)
# An absolute server path (two parts or more), not a metric name such as rewards/exact.
_SERVER_PATH = re.compile(r"(?<![\w.~-])/(?:[\w.~-]+/)+[\w.~-]*")
LOG_LEVELS = ("info", "warning", "error")


def readable_log_message(message: str) -> str:
    """``message`` without a Python dict repr (its entries become "key value" pairs) and without server
    paths, which name the platform's disks, not anything a user can open."""
    found = _TRAILING_DICT.match(message)
    if found:
        try:
            values = ast.literal_eval(found["dict"])
        except (ValueError, SyntaxError, MemoryError, RecursionError):
            values = None
        if isinstance(values, dict):
            parts = [
                f"{key} {_readable_value(value)}"
                for key, value in values.items()
                if value is not None and not (isinstance(value, str) and value.startswith("/"))
            ]
            message = found["head"] + ", ".join(parts)
    return _SERVER_PATH.sub("(server path)", message)


def _readable_value(value: object) -> str:
    if isinstance(value, float):
        return f"{value:.4g}"
    return str(value)


def log_line(payload: dict) -> dict:
    """One log event's payload as the page shows it: ``{"level", "message"}``; the level is "info" unless
    the payload names one of LOG_LEVELS."""
    level = payload.get("level")
    return {
        "level": level if level in LOG_LEVELS else "info",
        "message": readable_log_message(str(payload.get("message", ""))),
    }


def event_as_read(message: dict) -> dict:
    """An event as pages and the API hand it out: a log event's message readable (older workers wrote
    Python dict reprs and server paths into it) and its level named. ``message`` has "kind" and "payload"."""
    if message["kind"] == "log" and isinstance(message["payload"], dict):
        message["payload"] = {**message["payload"], **log_line(message["payload"])}
    return message


def empty_metrics_reason(*, state: str, step: int, has_rollouts: bool) -> str:
    """Why a job has no metric yet, in its state (job.js emptyMetricsText says the same)."""
    if state == "queued":
        return "No metrics yet: the job is queued."
    if state in ("paused", "pausing"):
        return "No metrics yet: the job is paused."
    if state == "running":
        if has_rollouts:
            return f"No metrics yet: step {step} is running; its metrics arrive when it ends."
        return "No metrics yet: the model is loading; the first step's metrics arrive when it ends."
    return f"No metrics: the job ended ({state}) before its first step finished."


def empty_evaluation_reason(*, spec: dict) -> str:
    """Why a job's evaluation chart is empty: no held-out set, or when the first evaluation runs."""
    if not spec.get("eval_dataset_version"):
        return "No evaluation: this job has no held-out set. Choose one when launching to see a score per domain."
    every = spec.get("eval_steps") or 0
    later = f"then every {every} steps and at the end" if every else "then at the end"
    return f"No evaluation yet: the first scores the base model before step 1, {later}."
