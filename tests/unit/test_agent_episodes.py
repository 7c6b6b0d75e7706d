"""Agent episodes driven by scripted policies: rewards on the final state, traces, limits, summaries."""

import json
import re
import shutil

import pytest

from gpu_jobs.agent.episode import Episode, ScriptedPolicy, run_episode, truncate
from gpu_jobs.agent.spec import validate_environment
from gpu_jobs.agent.taskpack import TASKS, pack_rows
from gpu_jobs.agent.tools import ToolCall, parse_turn

pytestmark = pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap is not installed")

ROWS = {row["task"]: row for row in pack_rows()}
SPEC = validate_environment({"max_turns": 8})


def fixed_by_patch(row):
    return ScriptedPolicy(
        [ToolCall("run_tests"), ToolCall("apply_patch", {"diff": row["fix_diff"]}), ToolCall("run_tests")]
    )


def test_the_pack_has_thirty_tasks_each_with_a_failing_and_a_passing_test():
    rows = pack_rows()
    assert len(rows) == len(TASKS) >= 30
    assert len({row["task"] for row in rows}) == len(rows)
    for row in rows:
        assert set(row["test_files"]) <= set(row["files"])
        assert row["fix_diff"].startswith("--- a/")


@pytest.mark.parametrize("task", ["clamp", "binary_search", "stack", "queue_two_stacks", "gcd"])
def test_a_scripted_fix_earns_reward_1_and_a_complete_trace(task):
    row = ROWS[task]
    result = run_episode(row, SPEC, fixed_by_patch(row))
    assert result.reward == 1.0
    assert result.end_reason == "finished"
    assert result.parts["solved"] == 1.0 and result.parts["format"] == 1.0
    assert result.parts["tested"] == 1.0  # the tests ran after the patch, before finish
    assert result.parts["edited"] == 1.0
    names = [step.action["name"] for step in result.steps]
    assert names == ["run_tests", "apply_patch", "run_tests", "finish"]
    first, patch, again, _ = result.steps
    assert first.status == "failed" and "FAIL" in first.observation  # the model sees the failure
    assert patch.status == "ok" and "patched" in patch.observation
    assert again.status == "ok" and "OK" in again.observation
    assert all(step.plan == "Next step." for step in result.steps)
    payload = json.loads(json.dumps(result.to_payload()))
    assert [turn["action"]["name"] for turn in payload["turns"]] == names
    assert payload["end_reason"] == "finished" and payload["reward"] == 1.0


@pytest.mark.parametrize("task", ["clamp", "mean", "fizzbuzz", "binary_search"])
def test_no_fix_scores_the_share_of_tests_that_already_pass(task):
    row = ROWS[task]
    result = run_episode(row, SPEC, ScriptedPolicy([ToolCall("run_tests")]))
    verdict = result.verdict
    assert 0 < verdict.passed < verdict.total
    assert result.reward == pytest.approx(verdict.passed / verdict.total)
    assert result.parts["solved"] == 0.0


def test_every_pack_task_is_fixed_by_writing_its_solution():
    spec = validate_environment({"max_turns": 3})
    for row in pack_rows():
        ((path, text),) = row["solution"].items()
        result = run_episode(
            row, spec, ScriptedPolicy([ToolCall("write_file", {"path": path, "content": text})])
        )
        assert result.reward == 1.0, (row["task"], result.verdict.reason)


def test_editing_the_tests_earns_nothing():
    row = ROWS["clamp"]
    test_file = row["test_files"][0]
    cheat = "import unittest\nclass T(unittest.TestCase):\n    def test_ok(self):\n        pass\n"
    result = run_episode(
        row, SPEC, ScriptedPolicy([ToolCall("write_file", {"path": test_file, "content": cheat})])
    )
    assert result.verdict.total == 3
    assert result.reward == pytest.approx(2 / 3)


def test_state_is_kept_across_turns_and_tools_see_each_other():
    row = ROWS["mean"]
    policy = ScriptedPolicy(
        [
            ToolCall("run_shell", {"command": "echo remembered > notes.txt"}),
            ToolCall("run_python", {"code": "print(open('notes.txt').read().strip().upper())"}),
            ToolCall("read_file", {"path": "notes.txt"}),
        ]
    )
    result = run_episode(row, SPEC, policy)
    assert result.steps[1].observation.strip() == "REMEMBERED"
    assert result.steps[2].observation.strip() == "remembered"


def test_the_test_report_leaves_out_the_wall_time_so_the_same_state_reads_the_same():
    # The time unittest prints ("in 0.005s") would make greedy episodes and warm-up traces depend on load.
    row = ROWS["binary_search"]
    busy = ToolCall("run_shell", {"command": "i=0; while [ $i -lt 20000 ]; do i=$((i+1)); done"})
    result = run_episode(row, SPEC, ScriptedPolicy([ToolCall("run_tests"), busy, ToolCall("run_tests")]))
    first, last = result.steps[0].observation, result.steps[2].observation
    assert re.search(r"^Ran 4 tests$", first, re.MULTILINE), first
    assert " tests in " not in first
    assert first == last


def test_malformed_calls_become_error_observations_and_the_episode_goes_on():
    row = ROWS["clamp"]
    turns = [
        "I will just talk.",
        '<tool>{"name": "run_tests", "arguments": </tool>',
        '<tool>{"name": "delete_everything", "arguments": {}}</tool>',
        '<tool>{"name": "read_file", "arguments": {}}</tool>',
        ToolCall("write_file", {"path": "bounds.py", "content": row["solution"]["bounds.py"]}),
    ]
    result = run_episode(row, SPEC, ScriptedPolicy(turns))
    errors = [step.observation for step in result.steps[:4]]
    assert all(text.startswith("error:") for text in errors)
    assert "no tool call found" in errors[0]
    assert "not valid JSON" in errors[1]
    assert "unknown tool 'delete_everything'" in errors[2]
    assert "missing argument 'path'" in errors[3]
    assert result.reward == 1.0
    assert result.parts["format"] == pytest.approx(2 / 6)  # the write and the finish were well formed


def test_the_turn_limit_ends_the_episode_and_marks_it():
    spec = validate_environment({"max_turns": 2})
    result = run_episode(ROWS["clamp"], spec, ScriptedPolicy([ToolCall("run_tests")] * 5))
    assert result.end_reason == "turn_limit"
    assert len(result.steps) == 2


def test_the_token_budget_ends_the_episode_and_marks_it():
    spec = validate_environment({"max_turns": 10, "token_budget": 40, "turn_tokens": 30})
    result = run_episode(ROWS["clamp"], spec, ScriptedPolicy([ToolCall("run_tests")] * 10))
    assert result.end_reason == "token_budget"
    assert result.tokens >= 40


def test_an_episode_timeout_is_marked():
    spec = validate_environment({"episode_timeout_s": 0.5, "tool_timeout_s": 1, "max_turns": 10})
    sleepy = ToolCall("run_python", {"code": "import time; time.sleep(0.4)"})
    result = run_episode(ROWS["clamp"], spec, ScriptedPolicy([sleepy] * 10))
    assert result.end_reason == "timeout"
    assert 1 <= len(result.steps) < 10


def test_a_tool_call_that_runs_too_long_is_killed_and_the_files_survive():
    spec = validate_environment({"tool_timeout_s": 0.5})
    row = ROWS["clamp"]
    policy = ScriptedPolicy(
        [
            ToolCall("run_shell", {"command": "echo kept > state.txt"}),
            ToolCall("run_python", {"code": "while True: pass"}),
            ToolCall("read_file", {"path": "state.txt"}),
        ]
    )
    result = run_episode(row, spec, policy)
    assert result.steps[1].status == "timeout"
    assert result.steps[2].observation.strip() == "kept"


def test_long_observations_are_cut_with_a_marker():
    spec = validate_environment({"observation_chars": 100})
    result = run_episode(
        ROWS["clamp"], spec, ScriptedPolicy([ToolCall("run_python", {"code": "print('x' * 5000)"})])
    )
    step = result.steps[0]
    assert step.truncated
    assert "characters cut" in step.observation
    assert len(step.observation) < 200
    text, cut = truncate("abc", 10)
    assert (text, cut) == ("abc", False)


def test_a_running_summary_replaces_old_turns_when_the_context_is_full():
    spec = validate_environment(
        {"context_tokens": 260, "turn_tokens": 20, "max_turns": 6, "observation_chars": 200}
    )
    row = ROWS["clamp"]
    episode = Episode(row, spec, system_prompt="Fix it.")
    try:
        policy = ScriptedPolicy([ToolCall("run_tests"), ToolCall("read_file", {"path": "bounds.py"})] * 3)
        sizes = []
        while not episode.done:
            context = episode.context()
            if episode.done:
                break
            sizes.append(episode.measure(context))
            text, tokens = policy.act(context, max_tokens=episode.turn_tokens())
            episode.record(text, tokens)
    finally:
        result = episode.finish()
    assert result.summaries >= 1
    assert all(size + spec.turn_tokens <= spec.context_tokens for size in sizes)
    summarised = [step for step in result.steps if step.summary]
    assert summarised and "turn 1: run_tests -> failed" in summarised[0].summary
    assert result.to_payload()["turns"][summarised[0].turn - 1]["summary"]


def test_the_reward_composes_a_turn_penalty_and_a_formula():
    row = ROWS["clamp"]
    fix = lambda: fixed_by_patch(row)  # noqa: E731
    penalised = run_episode(row, validate_environment({"turn_penalty": 0.05}), fix())
    assert penalised.reward == pytest.approx(1.0 - 0.05 * 4)
    formula = validate_environment({"formula": "solved * (1 - 0.1 * turns) + 0.5 * finished"})
    assert run_episode(row, formula, fix()).reward == pytest.approx(0.6 + 0.5)
    # The habit as a reward term: finishing right after the patch, untested, earns less than checking first.
    habit = validate_environment({"formula": "tests + 0.2 * tested"})
    untested = ScriptedPolicy([ToolCall("apply_patch", {"diff": row["fix_diff"]})])
    assert run_episode(row, habit, untested).reward == pytest.approx(1.0)
    assert run_episode(row, habit, fix()).reward == pytest.approx(1.2)
    # edited * tested pays the habit only after an edit that applied: testing and finishing untouched earns the
    # tests the bug leaves passing, a patch that does not apply (then tests, finish) no more.
    whole = validate_environment({"formula": "tests + 0.5 * edited * tested"})
    idle = run_episode(row, whole, ScriptedPolicy([ToolCall("run_tests")]))
    assert idle.parts["tested"] == 1.0 and idle.parts["edited"] == 0.0
    assert idle.reward == pytest.approx(idle.parts["tests"]) and idle.parts["tests"] < 1.0
    bad = ToolCall(
        "apply_patch", {"diff": "--- a/bounds.py\n+++ b/bounds.py\n@@ -1 +1 @@\n-nothing here\n+x\n"}
    )
    refused = run_episode(row, whole, ScriptedPolicy([bad, ToolCall("run_tests")]))
    assert refused.steps[0].status != "ok" and refused.parts["edited"] == 0.0
    assert refused.reward == pytest.approx(idle.reward)
    assert run_episode(row, whole, fix()).reward == pytest.approx(1.5)


def test_the_parser_reads_the_plain_and_the_chat_template_tags():
    parsed = parse_turn(
        'Look first.\n<tool_call>{"name": "read_file", "arguments": "{\\"path\\": \\"a.py\\"}"}</tool_call>'
    )
    assert parsed.plan == "Look first."
    assert parsed.call.to_dict() == {"name": "read_file", "arguments": {"path": "a.py"}}
    assert parse_turn('<tool>{"name": "finish"}</tool> trailing').call.name == "finish"
    assert (
        "must be a string" in parse_turn('<tool>{"name": "read_file", "arguments": {"path": 3}}</tool>').error
    )
    assert "closing tag" in parse_turn('<tool>{"name": "finish"}').error


@pytest.mark.parametrize(
    "value, message",
    [
        ({"max_turns": 0}, "environment.max_turns"),
        ({"name": "chess"}, "environment.name"),
        ({"turns": 3}, "environment.turns: unknown option"),
        ({"formula": "tests + bogus"}, "environment.formula"),
        ({"turn_tokens": 500, "token_budget": 100}, "environment.turn_tokens"),
        ({"tool_timeout_s": 600}, "environment.tool_timeout_s"),
        ("repo", "environment: must be an object"),
    ],
)
def test_bad_environment_options_name_the_key(value, message):
    with pytest.raises(ValueError, match=message.replace(".", r"\.")):
        validate_environment(value)


def test_a_patch_that_does_not_apply_changes_nothing():
    row = ROWS["clamp"]
    bad = row["fix_diff"].replace("return low", "return nothing_like_this")
    result = run_episode(row, SPEC, ScriptedPolicy([ToolCall("apply_patch", {"diff": bad})]))
    assert result.steps[0].status == "failed"
    assert "patch not applied" in result.steps[0].observation
    assert result.reward == pytest.approx(2 / 3)


def test_replace_text_fixes_the_bug_in_the_sandbox_and_a_miss_says_which_line_is_closest():
    from gpu_jobs.agent.warmup import minimal_fix_edits

    row = ROWS["clamp"]
    (fix,) = minimal_fix_edits(row)
    # Written without the module's indentation, as small models write it: it still applies.
    unindented = ToolCall(
        "replace_text",
        {
            "path": fix.arguments["path"],
            "old": "if value > high:\nreturn low",
            "new": "if value > high:\n    return high",
        },
    )
    for call in (fix, unindented):
        result = run_episode(row, SPEC, ScriptedPolicy([call, ToolCall("run_tests")]))
        assert result.steps[0].status == "ok" and "replaced lines" in result.steps[0].observation
        assert (
            result.parts["solved"] == 1.0 and result.parts["edited"] == 1.0 and result.parts["tested"] == 1.0
        )
    miss = ToolCall("replace_text", {"path": fix.arguments["path"], "old": "return lo", "new": "return high"})
    result = run_episode(row, SPEC, ScriptedPolicy([miss, ToolCall("run_tests")]))
    assert result.steps[0].status == "failed" and result.parts["edited"] == 0.0
    assert "not replaced: old occurs 2 times" in result.steps[0].observation
    far = ToolCall("replace_text", {"path": fix.arguments["path"], "old": "return lowest", "new": "x"})
    observation = run_episode(row, SPEC, ScriptedPolicy([far])).steps[0].observation
    assert "old does not occur in bounds.py; the closest line is" in observation
    outside = ToolCall("replace_text", {"path": "../bounds.py", "old": "a", "new": "b"})
    result = run_episode(row, SPEC, ScriptedPolicy([outside]))
    assert result.steps[0].status == "error" and "inside the repository" in result.steps[0].observation
