"""The domain pack catalogue: the reasoning-gym tasks offered, Anneal's own document tasks
(gpu_jobs.document_tasks) beside them, and their rows with a verifier spec each.

Django-free; the services in anneal.datasets.pack_services store what this makes. A task is offered only
if it passed the check: rows it generates, sent through JSON as a dataset stores them, score 1 on their
own reference answer with the verifier spec the pack makes. The check results are computed by
``python -m anneal.datasets.pack_catalogue`` into ``pack_checks.json`` next to this module (committed; a
test re-runs the check on some tasks), because checking all generators takes minutes.
"""

from __future__ import annotations

import json
import sys
import time
from dataclasses import asdict, dataclass, is_dataclass
from functools import lru_cache
from pathlib import Path

CHECKS_FILE = Path(__file__).with_name("pack_checks.json")
CHECK_ROWS = 5
MAX_PACK_ROWS = 20_000
MAX_DIFFICULTY = 5
EXCLUDED = {"composite": "needs a configuration of other tasks"}


class PackError(ValueError):
    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"{field}: {message}")
        self.field = field
        self.message = message


@dataclass(frozen=True)
class TaskCheck:
    task: str
    ok: bool
    reason: str
    has_curriculum: bool


@dataclass
class PackTask:
    """One generated domain: its rows and the verifier spec that scores them."""

    task: str
    rows: list[dict]
    spec: dict
    dropped: int  # rows whose own reference did not score 1 (left out)


def _jsonable(value: object) -> object:
    return json.loads(json.dumps(value, default=str))


def task_config(*, task: str, size: int, seed: int, difficulty: int | None) -> dict:
    """The generator configuration for ``task``: a curriculum level when it has one, else the defaults."""
    from reasoning_gym.factory import create_curriculum, create_dataset, has_curriculum

    if difficulty is not None and has_curriculum(task):
        curriculum = create_curriculum(task)
        curriculum.set_global_level(min(difficulty, curriculum.get_max_level()))
        config = curriculum.generate_configuration({"seed": seed, "size": size})
    else:
        config = create_dataset(task, seed=seed, size=1).config
    data = asdict(config) if is_dataclass(config) else dict(vars(config))
    data.update(seed=seed, size=size)
    return _jsonable(data)


def _document_task(*, task: str, size: int, seed: int, difficulty: int | None) -> PackTask:
    from gpu_jobs.document_tasks import TASKS, document_rows

    spec = _jsonable(TASKS[task].spec)
    rows, dropped = [], 0
    for row in document_rows(task=task, size=size, seed=seed, difficulty=difficulty):
        row = _jsonable(row)
        if TASKS[task].check(row):
            rows.append(row)
        else:
            dropped += 1
    return PackTask(task=task, rows=rows, spec=spec, dropped=dropped)


def generate_task(*, task: str, size: int, seed: int, difficulty: int | None) -> PackTask:
    """``size`` rows of ``task``; each row's reference answer is scored and kept only if it scores 1 (a
    document task's rows: kept if they pass its check)."""
    from gpu_jobs.document_tasks import TASKS as DOCUMENT_TASKS
    from gpu_jobs.rewards import build_scorer
    from gpu_jobs.rewards.reasoning_gym import make_generator

    if task in DOCUMENT_TASKS:
        return _document_task(task=task, size=size, seed=seed, difficulty=difficulty)

    config = task_config(task=task, size=size, seed=seed, difficulty=difficulty)
    spec = {"type": "reasoning_gym", "task": task, "config": config}
    generator = make_generator(task, config)
    scorer = build_scorer(_jsonable(spec))
    rows, dropped = [], 0
    for index in range(size):
        entry = generator[index]
        row = _jsonable(
            {
                "prompt": entry["question"],
                "answer": str(entry["answer"]),
                "domain": task,
                "difficulty": difficulty if difficulty is not None else "default",
                "metadata": entry.get("metadata", {}),
            }
        )
        if scorer.score(row, row["answer"]).score >= 1.0:
            rows.append(row)
        else:
            dropped += 1
    return PackTask(task=task, rows=rows, spec=spec, dropped=dropped)


def check_task(task: str) -> TaskCheck:
    """Generate a few rows; every one must score 1 on its own reference answer through the pack's verifier."""
    from reasoning_gym.factory import has_curriculum

    curriculum = has_curriculum(task)
    try:
        made = generate_task(task=task, size=CHECK_ROWS, seed=0, difficulty=0 if curriculum else None)
    except Exception as exc:  # a generator that cannot run is simply not offered
        return TaskCheck(task, False, f"{type(exc).__name__}: {exc}"[:200], curriculum)
    if made.dropped:
        return TaskCheck(task, False, f"{made.dropped} of {CHECK_ROWS} references scored below 1", curriculum)
    return TaskCheck(task, True, "every reference scored 1", curriculum)


@lru_cache(maxsize=1)
def task_checks() -> dict[str, TaskCheck]:
    """The committed check results of the reasoning-gym tasks, by task, and the document tasks' checks (run
    here: they take milliseconds)."""
    data = json.loads(CHECKS_FILE.read_text())
    checks = {item["task"]: TaskCheck(**item) for item in data["tasks"]}
    return {**checks, **document_checks()}


def document_checks() -> dict[str, TaskCheck]:
    """A document task is offered when its rows at every difficulty pass the task's own check (its reference
    is right: report_tables' scores 1 and a wrong answer 0; sql_queries' reference query runs and returns
    rows). No sandbox is needed: the pages list the tasks."""
    from gpu_jobs.document_tasks import MAX_DIFFICULTY as LEVELS
    from gpu_jobs.document_tasks import TASKS

    checks = {}
    for name in TASKS:
        try:
            made = [
                generate_task(task=name, size=CHECK_ROWS, seed=0, difficulty=d) for d in range(LEVELS + 1)
            ]
        except Exception as exc:  # a generator that cannot run is simply not offered
            checks[name] = TaskCheck(name, False, f"{type(exc).__name__}: {exc}"[:200], True)
            continue
        dropped = sum(task.dropped for task in made)
        reason = "every row passed its check" if not dropped else f"{dropped} rows failed their check"
        checks[name] = TaskCheck(name, not dropped, reason, True)
    return checks


def offered_tasks() -> list[TaskCheck]:
    return [check for check in task_checks().values() if check.ok]


def check_pack_request(*, tasks: list[str], size: int, seed: int, difficulty: int | None) -> None:
    """PackError naming the field when the request cannot make a pack."""
    offered = {check.task for check in offered_tasks()}
    if not tasks:
        raise PackError("tasks", "choose at least one task")
    for task in tasks:
        if task not in offered:
            check = task_checks().get(task)
            why = (
                f"it failed its check ({check.reason})" if check else "no such reasoning-gym or document task"
            )
            raise PackError("tasks", f"task '{task}' is not offered: {why}")
    if len(set(tasks)) != len(tasks):
        raise PackError("tasks", "a task is listed twice")
    if not 1 <= size or size * len(tasks) > MAX_PACK_ROWS:
        raise PackError("size", f"rows per task must be at least 1, and at most {MAX_PACK_ROWS} rows in all")
    if difficulty is not None and not 0 <= difficulty <= MAX_DIFFICULTY:
        raise PackError("difficulty", f"must be between 0 (easiest) and {MAX_DIFFICULTY}")
    if seed < 0:
        raise PackError("seed", "must be 0 or more")


def main() -> None:
    """Check every reasoning-gym task and write pack_checks.json (a few minutes)."""
    from reasoning_gym.factory import DATASETS

    started = time.monotonic()
    results = []
    for task in sorted(DATASETS):
        if task in EXCLUDED:
            results.append(TaskCheck(task, False, EXCLUDED[task], False))
            continue
        check = check_task(task)
        results.append(check)
        print(f"{'ok  ' if check.ok else 'FAIL'} {task}: {check.reason}", file=sys.stderr, flush=True)
    from importlib.metadata import version

    # The package's own __version__ lags behind its release number; the installed distribution's is right.
    body = {"reasoning_gym": version("reasoning-gym"), "tasks": [asdict(r) for r in results]}
    CHECKS_FILE.write_text(json.dumps(body, indent=1) + "\n")
    ok = sum(r.ok for r in results)
    print(f"{ok} of {len(results)} tasks pass ({time.monotonic() - started:.0f} s)", file=sys.stderr)


if __name__ == "__main__":
    main()


# Long-context packs (gpu_jobs.long_context): generated here in milliseconds, so their check runs on first use
# instead of being committed. A family is offered when rows at its shortest length, sent through JSON, score
# 1 on their reference and 0 on an unrelated answer with the family's verifier spec.
LONG_CONTEXT_WRONG_ANSWER = "i do not know"


@lru_cache(maxsize=1)
def long_context_checks() -> dict[str, TaskCheck]:
    from gpu_jobs.long_context import FAMILIES, family_row
    from gpu_jobs.rewards import build_scorer

    checks = {}
    for name, family in FAMILIES.items():
        scorer = build_scorer(_jsonable(family.spec))
        try:
            rows = [
                _jsonable(family_row(family=name, length=family.min_length, seed=0, index=index))
                for index in range(CHECK_ROWS)
            ]
            right = [scorer.score(row, row["answer"]).score for row in rows]
            wrong = [scorer.score(row, LONG_CONTEXT_WRONG_ANSWER).score for row in rows]
        except Exception as exc:  # a generator that cannot run is simply not offered
            checks[name] = TaskCheck(name, False, f"{type(exc).__name__}: {exc}"[:200], False)
            continue
        if min(right) < 1.0 or max(wrong) > 0.0:
            checks[name] = TaskCheck(
                name, False, "a reference scored below 1 or a wrong answer above 0", False
            )
        else:
            checks[name] = TaskCheck(name, True, "every reference scored 1, a wrong answer 0", False)
    return checks
