"""The repo-fix task pack: small Python repositories, each with a planted bug and the tests that catch it.

`pack_rows()` gives one dataset row per task, the shape an agent environment reads (see
gpu_jobs.agent.environment): ``prompt``, ``files`` (path -> text: the buggy module and its tests),
``test_files`` (restored before the final verification, so editing a test earns nothing), ``solution``
(path -> fixed text), ``fix_diff`` (the fix as a unified diff), ``task`` and ``domain``. The same rows serve
as a training dataset (anneal.datasets domain pack "agent_repo_fix") and as a benchmark
(bench/agent_episodes.py).
"""

from __future__ import annotations

import difflib

from gpu_jobs.agent.taskpack.mutants import mutant_tasks, repo_of
from gpu_jobs.agent.taskpack.tasks import TASKS, Task

DOMAIN = "repo_fix"


def buggy_source(task: Task) -> str:
    old, new = task.bug
    if task.source.count(old) != 1:
        raise ValueError(f"task {task.name}: the bug's text must occur exactly once in the source")
    return task.source.replace(old, new, 1)


def task_row(task: Task) -> dict:
    test_file = f"tests/test_{task.module}"
    buggy = buggy_source(task)
    diff = "".join(
        difflib.unified_diff(
            buggy.splitlines(keepends=True),
            task.source.splitlines(keepends=True),
            fromfile=f"a/{task.module}",
            tofile=f"b/{task.module}",
        )
    )
    return {
        "prompt": (
            f"The tests in {test_file} fail: {task.hint}. Find the bug in {task.module} and fix it so that "
            "all the tests pass, then finish."
        ),
        "files": {task.module: buggy, test_file: task.tests},
        "test_files": [test_file],
        "solution": {task.module: task.source},
        "fix_diff": diff,
        "task": task.name,
        "domain": DOMAIN,
    }


def pack_rows(limit: int | None = None) -> list[dict]:
    """One row per task, in a fixed order; the first `limit` when given."""
    tasks = TASKS if limit is None else TASKS[:limit]
    return [task_row(task) for task in tasks]


def held_out_rows(rows: list[dict]) -> list[dict]:
    """The task pack's rows for the repositories `rows` do not hold: by ``task`` name (a mutant ``<task>~<n>``
    holds its task's repository) or by identical files."""
    repos = {repo_of(str(row.get("task"))) for row in rows if isinstance(row, dict) and row.get("task")}
    files = [row.get("files") for row in rows if isinstance(row, dict)]
    return [row for row in pack_rows() if row["task"] not in repos and row["files"] not in files]


def with_mutants(rows: list[dict], per_repo: int) -> list[dict]:
    """`rows`, each pack task followed by up to `per_repo` more bugs in its repository
    (gpu_jobs.agent.taskpack.mutants); rows that are not pack tasks bring none."""
    tasks = {task.name: task for task in TASKS}
    grown = []
    for row in rows:
        grown.append(row)
        task = tasks.get(str(row.get("task"))) if per_repo and isinstance(row, dict) else None
        if task is not None:
            grown.extend(task_row(mutant) for mutant in mutant_tasks(task, per_repo))
    return grown


__all__ = ["DOMAIN", "TASKS", "Task", "held_out_rows", "pack_rows", "task_row", "with_mutants"]
