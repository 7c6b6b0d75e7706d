"""code_tests: compile and run the completion's program in C, C++ or JavaScript against the row's tests.

The same judge as python_tests (code_judge/judge.py, native.py), in the sandbox profile of the language
(c-cpp or javascript, sandboxes/profiles.py): the program is built once (a compiler error is the program's
failure, with the compiler's first error as the reason, never a sandbox error), then judged by trusted code
in another process than the program:
- `io`: {"stdin": ..., "stdout": ...}: the built program runs afresh on each stdin; its stdout is compared;
- `call` (JavaScript only): {"call": "f", "args": [...], "expected": value}: the program's function called
  with JSON arguments, its result compared as JSON (floats within `float_tolerance`).
A row's tests may also be APPS-style {"inputs": [...], "outputs": [...]} (stdin and expected stdout).
"""

from __future__ import annotations

import re
from typing import ClassVar

from gpu_jobs.rewards import code_judge
from gpu_jobs.rewards.base import SpecError, SpecField
from gpu_jobs.rewards.python_tests import PythonTests
from sandboxes.profiles import PROFILES
from sandboxes.types import RunRequest

# language -> (sandbox profile, the tags a fenced block of it may carry)
LANGUAGES = {
    "c": ("c-cpp", ("c",)),
    "cpp": ("c-cpp", ("cpp", "c++", "cc", "cxx")),
    "javascript": ("javascript", ("javascript", "js", "node", "nodejs")),
}
CALL_LANGUAGES = ("javascript",)
_FENCE = re.compile(r"```([A-Za-z0-9+#_-]*)[ \t]*\n(.*?)(?:```|\Z)", re.DOTALL)


def extract_code(text: str, language: str) -> str:
    """The first fenced block tagged with the language (an unclosed one runs to the end), else the first
    untagged block, else all of the text."""
    blocks = [(tag.lower(), body) for tag, body in _FENCE.findall(text)]
    tags = LANGUAGES[language][1]
    for tag, body in blocks:
        if tag in tags:
            return body
    for tag, body in blocks:
        if not tag:
            return body
    return text


def _shared(name: str) -> SpecField:
    """python_tests' field of that name: the two types score and compare outputs alike."""
    return next(field for field in PythonTests.fields if field.name == name)


class CodeTests(PythonTests):
    """Spec: `language` and exactly one of `tests_field` (default "tests", read from each row) or `tests`.

    `timeout_s` covers compiling, the program and all its tests together, per sample."""

    type_name = "code_tests"
    summary = (
        "Code tests: compile and run the model's C, C++ or JavaScript program against stdin/stdout tests"
    )
    example = {"type": "code_tests", "language": "c", "tests_field": "tests", "scoring": "fraction"}
    fields: ClassVar[tuple[SpecField, ...]] = (
        SpecField(
            "language",
            (str,),
            choices=tuple(LANGUAGES),
            help="c (gcc -O2 -std=c17), cpp (g++ -O2 -std=c++17) or javascript (Node.js).",
        ),
        SpecField(
            "tests_field",
            (str,),
            default=None,
            help="The column holding each row's tests: {stdin, stdout} pairs, or for JavaScript "
            "{call, args, expected} calls too; default tests.",
        ),
        SpecField("tests", (list, dict), default=None, help="Fixed tests for every row instead."),
        _shared("scoring"),
        SpecField(
            "timeout_s",
            (int, float),
            default=10,
            help="For compiling, the program and all its tests, per sample (max 60).",
        ),
        _shared("io_compare"),
        _shared("float_tolerance"),
    )

    @classmethod
    def normalise_spec(cls, spec: dict) -> dict:
        clean = super().normalise_spec(spec)
        if clean["tests"] is not None:
            problem = _language_problem(clean["tests"], clean["language"])
            if problem:
                raise SpecError("tests", problem)
        return clean

    def _tests_for(self, row: dict) -> tuple[list[dict], str]:
        tests, problem = super()._tests_for(row)
        if problem:
            return tests, problem
        problem = _language_problem(tests, self.spec["language"])
        field = self.spec["tests_field"]
        return (tests, f"row's {field!r}: {problem}") if problem and field else (tests, problem)

    def _program(self, completion: str) -> str:
        return extract_code(completion, self.spec["language"])

    def _request(self, chunk: list[tuple[int, str, list[dict]]], nonce: str) -> RunRequest:
        profile = LANGUAGES[self.spec["language"]][0]
        timeout = float(self.spec["timeout_s"])
        return code_judge.request(
            {**self._payload(chunk, nonce), "language": self.spec["language"]},
            time_s=timeout,
            run_s=timeout * len(chunk),
            profile=profile,
            memory_mb=PROFILES[profile].memory_mb,
        )


def _language_problem(tests: object, language: str) -> str:
    """Why tests of python_tests' forms cannot run in `language` ("" when they can)."""
    if not isinstance(tests, list):
        return ""  # as_tests reports it
    for number, test in enumerate(tests, start=1):
        kind = test.get("kind") if isinstance(test, dict) and "kind" in test else _kind_of(test)
        where = f"test {number}: " if len(tests) > 1 else ""
        if kind == "assert":
            return f"{where}assert scripts are Python; give {{stdin, stdout}} tests for {language}"
        if kind == "call" and language not in CALL_LANGUAGES:
            return f"{where}{language} has no call tests (only JavaScript does); give {{stdin, stdout}} tests"
        if kind == "call" and test.get("kwargs"):
            return f"{where}JavaScript functions take no keyword arguments: give args only"
    return ""


def _kind_of(item: object) -> str:
    if isinstance(item, str):
        return "assert"
    if isinstance(item, dict) and "call" in item:
        return "call"
    return "io"
