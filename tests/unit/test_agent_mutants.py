"""More bugs in the repo-fix pack's repositories: one-token mutants its tests catch, for training and warm-up."""

import re
import shutil

import pytest

from gpu_jobs.agent.episode import ScriptedPolicy, run_episode
from gpu_jobs.agent.spec import validate_environment
from gpu_jobs.agent.taskpack import TASKS, buggy_source, held_out_rows, pack_rows, task_row, with_mutants
from gpu_jobs.agent.taskpack.mutants import candidate_bugs, mutant_counts, mutant_tasks, repo_of
from gpu_jobs.agent.tools import ToolCall
from gpu_jobs.agent.warmup import minimal_fix_edits
from sandboxes.session import SessionPool
from tests.world import api_client

SPEC = validate_environment({"max_turns": 3, "observation_chars": 4000})
SOURCE = '''def window(values, size):
    """Slices of size < 3 are "short"; 2 + 2 stays in the docstring."""
    if size <= 0 or not values:
        return []
    return [values[i : i + size] for i in range(len(values) - size + 1)]
'''


def test_candidates_are_one_token_changes_of_code_never_of_text():
    bugs = candidate_bugs(SOURCE)
    assert ("    if size <= 0 or not values:", "    if size < 0 or not values:") in bugs
    assert ("    if size <= 0 or not values:", "    if size <= 0 and not values:") in bugs
    assert ("    if size <= 0 or not values:", "    if size <= 0 or values:") in bugs
    assert ("    if size <= 0 or not values:", "    if size <= 1 or not values:") in bugs
    ret = "    return [values[i : i + size] for i in range(len(values) - size + 1)]"
    assert (ret, ret.replace("- size + 1", "+ size + 1")) in bugs
    assert (ret, ret.replace("size + 1)", "size + 2)")) in bugs
    assert all('"""' not in old for old, _ in bugs)  # nothing in the docstring
    for old, new in bugs:
        assert SOURCE.count(old) == 1 and old != new
        changed = [
            pair for pair in zip(old.splitlines(), new.splitlines(), strict=True) if pair[0] != pair[1]
        ]
        assert len(changed) == 1


@pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap is not installed")
def test_every_kept_mutant_fails_some_tests_passes_others_and_its_fix_passes_all():
    """The committed mutants.json holds when run again: each is a task by the pack's own rule."""
    counts = mutant_counts()
    assert sum(counts.values()) >= 100 and sum(n > 0 for n in counts.values()) >= 20
    pool = SessionPool(size=2, tmpfs_mb=SPEC.tmpfs_mb)
    try:
        for task in TASKS:
            candidates = candidate_bugs(task.source)
            for mutant in mutant_tasks(task):
                assert mutant.bug in candidates and repo_of(mutant.name) == task.name
                assert buggy_source(mutant) != buggy_source(task)  # never the pack's own bug
                # One episode: the tests on the mutant (unittest's report), then its fix, then the verdict.
                row = task_row(mutant)
                policy = ScriptedPolicy([ToolCall("run_tests"), *minimal_fix_edits(row)])
                result = run_episode(row, SPEC, policy, pool=pool)
                report = result.steps[0].observation
                ran = int(re.search(r"^Ran (\d+) tests?", report, re.MULTILINE).group(1))
                failed = sum(int(n) for n in re.findall(r"(?:failures|errors)=(\d+)", report))
                assert 0 < failed < ran, (mutant.name, report)
                assert f"{mutant.hint.split(' fails', 1)[0]} " in report
                assert result.reward == 1.0, (mutant.name, result.verdict.reason)
    finally:
        pool.close()


def test_a_repository_any_row_holds_is_never_held_out_or_warmed_up_on():
    rows = pack_rows()
    counts = mutant_counts()
    some = [row for row in rows if counts[row["task"]] >= 3][:2] + [
        row for row in rows if not counts[row["task"]]
    ][:1]
    grown = with_mutants(some, 2)
    first, second, none = (row["task"] for row in some)
    # Two of each repository's list, spread over it (the first and the one halfway), named by their place.
    halfway = [f"~{counts[name] // 2 + 1}" for name in (first, second)]
    assert [row["task"] for row in grown] == [first, f"{first}~1", first + halfway[0], second, f"{second}~1",
                                              second + halfway[1], none]  # fmt: skip
    every = mutant_tasks({task.name: task for task in TASKS}[first], limit=40)
    assert [task.name for task in every] == [f"{first}~{n}" for n in range(1, counts[first] + 1)]
    assert grown[1]["files"] != grown[0]["files"] and grown[1]["solution"] == grown[0]["solution"]
    # A job trained on a repository's mutants alone holds that repository: the warm-up leaves it out.
    mutants_only = grown[1:3]
    assert first not in {row["task"] for row in held_out_rows(mutants_only)}
    assert len(held_out_rows(mutants_only)) == len(rows) - 1
    assert with_mutants(rows[:3], 0) == rows[:3]
    assert with_mutants([{"prompt": "1+1="}], 5) == [{"prompt": "1+1="}]


@pytest.mark.parametrize(
    ("value", "message"),
    [
        (-1, "environment.warmup_mutants: must be a whole number >= 0, got -1"),
        (True, "environment.warmup_mutants: must be a whole number >= 0, got True"),
        (33, "environment.warmup_mutants: at most 32 per repository, got 33"),
    ],
)
def test_bad_warmup_mutants_name_the_option_and_the_limit(value, message):
    with pytest.raises(ValueError) as raised:
        validate_environment({"warmup_mutants": value})
    assert str(raised.value) == message


@pytest.mark.django_db
def test_a_training_pack_with_mutants_holds_more_tasks_of_the_same_repositories(world):
    from anneal.datasets.models import DatasetVersion

    api = api_client(world["owner"])
    made = api.post(
        "/api/v1/datasets/packs/agent", {"name": "grown", "limit": 3, "mutants": 2}, format="json"
    )
    assert made.status_code == 201, made.content
    version = DatasetVersion.objects.get(pk=made.json()["dataset_version"]["id"])
    expected = [row["task"] for row in with_mutants(pack_rows()[:3], 2)]
    assert version.pack["tasks"] == expected and version.pack["mutants"] == 2 and version.row_count > 3
    assert {repo_of(name) for name in expected} == {task.name for task in TASKS[:3]}
    for bad in (-1, 33, "many"):
        refused = api.post("/api/v1/datasets/packs/agent", {"name": "p", "mutants": bad}, format="json")
        assert refused.status_code == 400 and refused.json()["errors"][0]["field"] == "mutants"
