"""Checks gpu_jobs/program_problems.json natively, without a sandbox: its shape, then every reference solution.

Shape: the file is UTF-8 JSON written with 2-space indentation and keys in the documented order; at least 36
problems, with ids unique and kebab-case, difficulties 0..3 and at least 8/10/10/8 problems per difficulty; each
problem has at least 5 tests, every expected stdout ends with a newline, not all of its tests expect the same
stdout (so a program that prints a constant cannot pass), and it has all four solutions.

Solutions: each is compiled (gcc -O2 -std=c17, g++ -O2 -std=c++17) or interpreted (node, /usr/bin/python3)
in a temporary folder and run on every test with a 5 s timeout; its stdout must equal the expected stdout
byte for byte. One line is printed per failing problem and language, then a summary; the exit status is 1 on
any failure. Needs gcc, g++ and node on PATH.

Run: python bench/check_program_problems.py [--only ID,ID,...]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

PROBLEMS = Path(__file__).resolve().parents[1] / "gpu_jobs" / "program_problems.json"
LANGUAGES = ("c", "cpp", "javascript", "python")
PROBLEM_KEYS = ["id", "title", "difficulty", "statement", "tests", "solutions"]
MIN_PER_DIFFICULTY = {0: 8, 1: 10, 2: 10, 3: 8}
MIN_PROBLEMS = 36
MIN_TESTS = 5
TIMEOUT_S = 5
KEBAB = re.compile(r"[a-z0-9]+(-[a-z0-9]+)*")
PYTHON = "/usr/bin/python3" if Path("/usr/bin/python3").exists() else shutil.which("python3")


def shape_errors(text: str) -> list[str]:
    doc = json.loads(text)
    errors = []
    if text != json.dumps(doc, indent=2, ensure_ascii=False) + "\n":
        errors.append("file is not json.dumps(doc, indent=2, ensure_ascii=False) plus a newline")
    if list(doc) != ["about", "problems"]:
        errors.append(f"top-level keys are {list(doc)}, not ['about', 'problems']")
    problems = doc.get("problems", [])
    if len(problems) < MIN_PROBLEMS:
        errors.append(f"{len(problems)} problems, fewer than {MIN_PROBLEMS}")
    seen = set()
    for problem in problems:
        name = problem.get("id", "?")
        if list(problem) != PROBLEM_KEYS:
            errors.append(f"{name}: keys are {list(problem)}, not {PROBLEM_KEYS}")
            continue
        if name in seen or not KEBAB.fullmatch(name):
            errors.append(f"{name}: id is repeated or not kebab-case")
        seen.add(name)
        if problem["difficulty"] not in MIN_PER_DIFFICULTY:
            errors.append(f"{name}: difficulty {problem['difficulty']!r} is not one of 0..3")
        tests = problem["tests"]
        if len(tests) < MIN_TESTS:
            errors.append(f"{name}: {len(tests)} tests, fewer than {MIN_TESTS}")
        for number, test in enumerate(tests, 1):
            if list(test) != ["stdin", "stdout"] or not test["stdout"].endswith("\n"):
                errors.append(
                    f"{name}: test {number} is not {{stdin, stdout}} with stdout ending in a newline"
                )
        if len({test.get("stdout") for test in tests}) < 2:
            errors.append(f"{name}: every test expects the same stdout, so a constant program passes")
        if sorted(problem["solutions"]) != sorted(LANGUAGES):
            errors.append(f"{name}: solutions are {sorted(problem['solutions'])}, not {list(LANGUAGES)}")
    for difficulty, least in MIN_PER_DIFFICULTY.items():
        count = sum(1 for problem in problems if problem.get("difficulty") == difficulty)
        if count < least:
            errors.append(f"difficulty {difficulty}: {count} problems, fewer than {least}")
    return errors


def prepare(language: str, source: str, folder: Path) -> tuple[list[str] | None, str]:
    """Writes the source into folder; returns the command that runs it, or None and the compiler's message."""
    filename = {"c": "main.c", "cpp": "main.cpp", "javascript": "main.js", "python": "main.py"}[language]
    path = folder / filename
    path.write_text(source, encoding="utf-8")
    program = str(folder / "prog")
    compile_command = {
        "c": ["gcc", "-O2", "-std=c17", "-o", program, str(path), "-lm"],
        "cpp": ["g++", "-O2", "-std=c++17", "-o", program, str(path)],
    }.get(language)
    if compile_command is None:
        return (["node", str(path)] if language == "javascript" else [PYTHON, str(path)]), ""
    result = subprocess.run(compile_command, capture_output=True, text=True)
    if result.returncode != 0:
        return None, result.stderr.strip().splitlines()[0] if result.stderr.strip() else "compiler failed"
    return [program], ""


def failure(problem: dict, language: str) -> str | None:
    """Runs one solution on all of its problem's tests; returns a line describing the failure, or None."""
    with tempfile.TemporaryDirectory() as folder:
        command, message = prepare(language, problem["solutions"][language], Path(folder))
        if command is None:
            return f"{problem['id']} {language}: does not compile: {message}"
        failed = []
        for number, test in enumerate(problem["tests"], 1):
            try:
                result = subprocess.run(
                    command, input=test["stdin"].encode(), capture_output=True, timeout=TIMEOUT_S
                )
            except subprocess.TimeoutExpired:
                failed.append(f"test {number} ran past {TIMEOUT_S} s")
                continue
            got = result.stdout.decode(errors="replace")
            if result.returncode != 0:
                failed.append(f"test {number} exited {result.returncode}: {result.stderr.decode()[-200:]!r}")
            elif got != test["stdout"]:
                failed.append(f"test {number} expected {test['stdout'][:60]!r}, got {got[:60]!r}")
    if not failed:
        return None
    return (
        f"{problem['id']} {language}: {len(failed)} of {len(problem['tests'])} tests fail; first: {failed[0]}"
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", default="", help="comma-separated problem ids to run (default: all)")
    args = parser.parse_args()
    text = PROBLEMS.read_text(encoding="utf-8")
    errors = shape_errors(text)
    for error in errors:
        print(error)
    problems = json.loads(text)["problems"]
    if args.only:
        problems = [problem for problem in problems if problem["id"] in args.only.split(",")]
    jobs = [(problem, language) for problem in problems for language in LANGUAGES]
    with ThreadPoolExecutor(max_workers=os.cpu_count() or 2) as pool:
        failures = [line for line in pool.map(lambda job: failure(*job), jobs) if line]
    for line in failures:
        print(line)
    tests = sum(len(problem["tests"]) for problem in problems)
    summary = f"{len(problems)} problems, {tests} tests, {len(LANGUAGES)} languages"
    if errors or failures:
        print(f"{summary}: {len(errors)} shape errors, {len(failures)} failing solutions")
        return 1
    print(f"{summary}: all pass")
    return 0


if __name__ == "__main__":
    sys.exit(main())
