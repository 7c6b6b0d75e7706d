"""The programming task packs (programs_c, programs_cpp, programs_javascript): every hand-written problem's
reference program passes its tests through code_tests in the real sandbox (each problem in one of the
languages) and none is passed by a constant answer; a pack takes each problem of its difficulty once before
any repeats, and is offered over the API beside the other packs with a code_tests verifier of its language."""

import pytest

from anneal.datasets.models import DatasetVersion
from anneal.datasets.storage import read_rows
from anneal.verifiers.models import Verifier
from gpu_jobs.document_tasks import TASKS, document_rows
from gpu_jobs.program_tasks import LANGUAGES, problems, program_rows
from gpu_jobs.rewards import build_scorer
from sandboxes.client import SandboxClient
from tests.world import api_client

CONSTANT_C = '```c\n#include <stdio.h>\nint main(void) { puts("0"); return 0; }\n```'


@pytest.mark.parametrize("language", list(LANGUAGES))
def test_every_problem_s_reference_passes_its_tests_in_one_language(language):
    """A third of the problems in each language, each language a different third: every problem's tests run
    through the sandbox once (bench/check_program_problems.py runs all four languages on all of them)."""
    rows = program_rows(language=language, size=len(problems()), seed=0, difficulty=None)
    assert len({row["problem"] for row in rows}) == len(problems())
    rows = rows[list(LANGUAGES).index(language) :: len(LANGUAGES)]
    scorer = build_scorer(TASKS[f"programs_{language}"].spec, sandbox=SandboxClient())
    results = scorer.score_batch(rows, [row["answer"] for row in rows])
    assert {row["problem"]: r.reason for row, r in zip(rows, results, strict=True) if r.score != 1.0} == {}


def test_no_problem_is_passed_by_a_constant_answer():
    rows = program_rows(language="c", size=len(problems()), seed=0, difficulty=None)
    results = build_scorer(TASKS["programs_c"].spec, sandbox=SandboxClient()).score_batch(
        rows, [CONSTANT_C] * len(rows)
    )
    assert {row["problem"]: r.score for row, r in zip(rows, results, strict=True) if r.score >= 1.0} == {}


def test_a_pack_takes_each_problem_of_its_difficulty_once_before_any_repeat():
    level_two = [problem["id"] for problem in problems() if problem["difficulty"] == 2]
    rows = document_rows(task="programs_c", size=len(level_two) + 2, seed=7, difficulty=2)
    taken = [row["problem"] for row in rows]
    assert sorted(taken[: len(level_two)]) == sorted(level_two)
    assert taken[len(level_two) :] == taken[:2]
    assert taken != [
        row["problem"] for row in document_rows(task="programs_c", size=len(rows), seed=8, difficulty=2)
    ]
    hardest = document_rows(task="programs_javascript", size=3, seed=0, difficulty=5)
    assert {row["difficulty"] for row in hardest} == {3}
    assert "```js block" in hardest[0]["prompt"] and hardest[0]["answer"].startswith("```js\n")


@pytest.mark.django_db
def test_a_programs_pack_is_offered_and_makes_a_code_tests_verifier(world):
    api = api_client(world["owner"])
    listed = {task["task"] for task in api.get("/api/v1/datasets/packs").json()["tasks"]}
    assert {"programs_c", "programs_cpp", "programs_javascript"} <= listed
    made = api.post(
        "/api/v1/datasets/packs/create",
        {
            "name": "code",
            "tasks": ["programs_cpp", "programs_javascript"],
            "size": 3,
            "seed": 1,
            "difficulty": 1,
        },
        format="json",
    )
    assert made.status_code == 201, made.content
    spec = Verifier.objects.get(name="code/programs_cpp").latest_version.spec
    assert (spec["type"], spec["language"], spec["tests_field"]) == ("code_tests", "cpp", "tests")
    version = DatasetVersion.objects.get(pk=made.json()["dataset_version"]["id"])
    assert version.stats["domains"] == {"programs_cpp": 3, "programs_javascript": 3}
    assert all(row["tests"] for row in read_rows(version.rows_path))
