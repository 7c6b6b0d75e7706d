"""An agent job's held-out scores: the share solved per domain, and the habits (tests run before finishing,
valid tool calls, turns, edits that applied) read off each episode's trace."""

import pytest

from gpu_jobs.agent import episode as episodes
from gpu_jobs.agent.environment import Verdict
from gpu_jobs.agent.episode import EpisodeResult, Step
from gpu_jobs.agent.evaluation import agent_scores


def episode(
    calls: list[str | None], *, end: str = "finished", passed: int = 0, total: int = 3, failed: str = ""
) -> EpisodeResult:
    """An episode of `calls` (None: a malformed turn); the call named `failed` ran with status "failed"."""
    steps = [
        Step(turn=i, plan="", action=None if name is None else {"name": name, "arguments": {}}, observation="",
             status="error" if name is None else "failed" if name == failed else "ok")
        for i, name in enumerate(calls, 1)
    ]  # fmt: skip
    well_formed = sum(name is not None for name in calls)
    tested = episodes.tested_before_finish(steps, end)
    parts = {
        "tests": passed / total,
        "format": well_formed / len(calls) if calls else 0.0,
        "turns": float(len(calls)),
        "tested": 1.0 if tested else 0.0,
        "edited": 1.0 if episodes.edited(steps) else 0.0,
        "solved": 1.0 if passed == total else 0.0,
    }
    verdict = Verdict(passed=passed, total=total, output="", reason="")
    return EpisodeResult(
        steps=steps, end_reason=end, verdict=verdict, reward=0.0, parts=parts, summaries=0, tokens=0,
        seconds=0.0, sandbox_s=0.0, generation_s=0.0,
    )  # fmt: skip


@pytest.mark.parametrize(
    ("calls", "end", "expected"),
    [
        (["run_tests", "read_file", "apply_patch", "run_tests", "finish"], "finished", True),
        (["run_tests", "apply_patch", "finish"], "finished", False),  # edited after the last test run
        (["apply_patch", "run_tests", "write_file", "finish"], "finished", False),
        (["read_file", "run_tests", "finish"], "finished", True),  # no edit: the tests were still run
        (["apply_patch", "run_tests", None, "finish"], "finished", True),  # a malformed turn is no edit
        (["apply_patch", "run_tests"], "turn_limit", False),  # never finished
        (["finish"], "finished", False),
        ([], "token_budget", False),
    ],
)
def test_tested_before_finish(calls, end, expected):
    result = episode(calls, end=end)
    assert episodes.tested_before_finish(result.steps, end) is expected
    assert result.parts["tested"] == float(expected)


@pytest.mark.parametrize(
    ("calls", "failed", "expected"),
    [
        (["run_tests", "apply_patch", "run_tests", "finish"], "", True),
        (["write_file", "finish"], "", True),
        (
            ["run_tests", "apply_patch", "run_tests", "finish"],
            "apply_patch",
            False,
        ),  # the patch did not apply
        (["read_file", "run_tests", "finish"], "", False),
        ([None, "run_shell", "finish"], "", False),  # a shell command is not an edit the task means
    ],
)
def test_edited_counts_only_edits_that_applied(calls, failed, expected):
    result = episode(calls, failed=failed)
    assert episodes.edited(result.steps) is expected
    assert result.parts["edited"] == float(expected)


def test_agent_scores_per_domain_and_habits():
    rows = [{"prompt": "a", "domain": "repo_fix"}, {"prompt": "b", "domain": "repo_fix"}, {"prompt": "c"}]
    results = [
        episode(["run_tests", "apply_patch", "run_tests", "finish"], passed=3),
        episode([None, "apply_patch", "finish"], passed=1),
        episode([None, None], end="turn_limit", passed=2),
    ]
    scores = agent_scores(rows, results)
    assert scores["eval/repo_fix"] == 0.5 and scores["eval/all"] == 0.0
    assert scores["eval/mean"] == scores["eval_agent/solved"] == pytest.approx(1 / 3)
    assert scores["eval_agent/tests"] == pytest.approx((1 + 1 / 3 + 2 / 3) / 3)
    assert scores["eval_agent/tested_before_finish"] == pytest.approx(1 / 3)
    assert scores["eval_agent/edited"] == pytest.approx(2 / 3)
    assert scores["eval_agent/edited_then_tested"] == pytest.approx(1 / 3)
    assert scores["eval_agent/valid_calls"] == pytest.approx((1 + 2 / 3 + 0) / 3)
    assert scores["eval_agent/turns"] == 3 and scores["eval_agent/episodes"] == 3


def test_testing_without_an_edit_is_the_habit_but_not_edited_then_tested():
    rows = [{"prompt": "a", "domain": "repo_fix"}] * 3
    results = [
        episode(["run_tests", "finish"]),  # never touched the code
        episode(
            ["run_tests", "apply_patch", "run_tests", "finish"], failed="apply_patch"
        ),  # its patch failed
        episode(["write_file", "run_tests", "finish"], passed=3),
    ]
    scores = agent_scores(rows, results)
    assert scores["eval_agent/tested_before_finish"] == 1.0
    assert scores["eval_agent/edited"] == pytest.approx(1 / 3)
    assert scores["eval_agent/edited_then_tested"] == pytest.approx(1 / 3)
