"""Programming task packs in C, C++ and JavaScript, from Anneal's hand-written problems (program_problems.json:
each a statement, stdin/stdout tests and a reference solution per language, every one checked by
bench/check_program_problems.py), scored by the code_tests verifier in the language's sandbox profile.

A task per language (``programs_c``, ``programs_cpp``, ``programs_javascript``), offered beside the document
tasks (document_tasks.TASKS). A pack's rows take the problems of the difficulty asked for (0-3; 4 and 5 are 3)
in an order drawn from the seed, each once before any repeats; with no difficulty, every problem, easiest
first. A row's ``answer`` is the reference program, fenced as the verifier reads it.
"""

from __future__ import annotations

import json
import random
from functools import cache
from pathlib import Path

PROBLEMS_FILE = Path(__file__).with_name("program_problems.json")
# language -> (its name in a prompt, the fence tag of its block)
LANGUAGES = {
    "c": ("C (C17, gcc)", "c"),
    "cpp": ("C++ (C++17, g++)", "cpp"),
    "javascript": ("JavaScript (Node.js)", "js"),
}
HARDEST = 3


@cache
def problems() -> tuple[dict, ...]:
    return tuple(json.loads(PROBLEMS_FILE.read_text(encoding="utf-8"))["problems"])


def task_name(language: str) -> str:
    return f"programs_{language}"


def spec(language: str) -> dict:
    return {"type": "code_tests", "language": language, "tests_field": "tests", "scoring": "fraction"}


def prompt(problem: dict, language: str) -> str:
    name, tag = LANGUAGES[language]
    return (
        f"{problem['title']}\n\n{problem['statement']}\n\n"
        f"Write a complete {name} program that reads the input from standard input and prints the answer to "
        f"standard output. Give the whole program in one ```{tag} block."
    )


def program_rows(*, language: str, size: int, seed: int, difficulty: int | None) -> list[dict]:
    """``size`` rows of the language's task (see the module's docstring for which problems)."""
    if difficulty is None:
        chosen = sorted(problems(), key=lambda problem: problem["difficulty"])
    else:
        level = max(0, min(HARDEST, difficulty))
        chosen = [problem for problem in problems() if problem["difficulty"] == level]
        random.Random(f"{language}|{seed}|{level}").shuffle(chosen)
    _, tag = LANGUAGES[language]
    rows = []
    for index in range(size):
        problem = chosen[index % len(chosen)]
        rows.append(
            {
                "prompt": prompt(problem, language),
                "tests": [dict(test) for test in problem["tests"]],
                "answer": f"```{tag}\n{problem['solutions'][language]}```",
                "problem": problem["id"],
                "domain": task_name(language),
                "difficulty": problem["difficulty"] if difficulty is not None else "default",
            }
        )
    return rows


def row_is_sound(row: dict) -> bool:
    """A row's tests are stdin/stdout pairs the verifier reads (its reference passes them: checked by
    bench/check_program_problems.py and the tests, in the sandbox)."""
    tests = row.get("tests")
    return (
        bool(row.get("prompt"))
        and isinstance(tests, list)
        and bool(tests)
        and all(isinstance(t, dict) and isinstance(t.get("stdin"), str) and isinstance(t.get("stdout"), str)
                for t in tests)
    )  # fmt: skip
