"""Finds the repo-fix pack's mutants whose tests fail, and writes them to gpu_jobs/agent/taskpack/mutants.json.

Each one-token mutation of each pack module (gpu_jobs.agent.taskpack.mutants.candidate_bugs) is planted in
its repository and the repository's tests are run on it in a real sandbox episode: kept when at least one
test fails and at least one passes (the pack's own rule: "no fix" scores a share between 0 and 1), with the
first failing test's report as its hint. The pack's own planted bug is left out. The file is data, checked
again by tests/unit/test_agent_mutants.py; rerun this after changing a pack task:

    .venv/bin/python scripts/build_mutants.py
"""

from __future__ import annotations

import json
import re
import sys
from dataclasses import replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from gpu_jobs.agent.episode import ScriptedPolicy, run_episode  # noqa: E402
from gpu_jobs.agent.spec import validate_environment  # noqa: E402
from gpu_jobs.agent.taskpack import buggy_source, task_row  # noqa: E402
from gpu_jobs.agent.taskpack.mutants import DATA, candidate_bugs  # noqa: E402
from gpu_jobs.agent.taskpack.tasks import TASKS, Task  # noqa: E402
from gpu_jobs.agent.tools import ToolCall  # noqa: E402
from sandboxes.session import SessionPool  # noqa: E402

SPEC = validate_environment(
    {"max_turns": 2, "tool_timeout_s": 5, "observation_chars": 4000}
)  # the whole report
FAILURE = re.compile(r"^(?:FAIL|ERROR): (\w+) ", re.MULTILINE)
MESSAGE = re.compile(r"^(\w+(?:Error|Exception)\b.*)$", re.MULTILINE)
MAX_HINT = 120


def hint(report: str) -> str | None:
    """'<test> fails: <its error line>' from a unittest report; None when no test failed."""
    failed = FAILURE.search(report)
    if failed is None:
        return None
    message = MESSAGE.search(report, failed.end())
    text = f"{failed.group(1)} fails" + (f": {message.group(1)}" if message else "")
    return text if len(text) <= MAX_HINT else text[: MAX_HINT - 3] + "..."


def check(task: Task, bug: tuple[str, str], pool: SessionPool) -> tuple[bool, str | None]:
    """Whether `bug` in `task`'s repository fails some of its tests and passes others; the hint."""
    row = task_row(replace(task, bug=bug))
    result = run_episode(row, SPEC, ScriptedPolicy([ToolCall("run_tests")]), pool=pool)
    verdict = result.verdict
    report = next(
        (step.observation for step in result.steps if (step.action or {}).get("name") == "run_tests"), ""
    )
    return 0 < verdict.passed < verdict.total, hint(report)


def main() -> None:
    kept: dict[str, list[list[str]]] = {}
    pool = SessionPool(size=2, tmpfs_mb=SPEC.tmpfs_mb)
    try:
        for task in TASKS:
            planted = buggy_source(task)
            found, candidates = [], candidate_bugs(task.source)
            for old, new in candidates:
                if task.source.replace(old, new, 1) == planted:
                    continue
                caught, text = check(task, (old, new), pool)
                if caught and text:
                    found.append([old, new, text])
            kept[task.name] = found
            print(f"{task.name}: {len(found)} kept of {len(candidates)}", flush=True)
    finally:
        pool.close()
    DATA.write_text(json.dumps(kept, indent=1) + "\n")
    print(f"{sum(map(len, kept.values()))} mutants in {len(kept)} repositories -> {DATA}")


if __name__ == "__main__":
    main()
