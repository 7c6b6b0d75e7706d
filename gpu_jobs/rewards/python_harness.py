"""Runs inside the sandbox as main.py: execs a program, then its tests, and reports with the run's nonce.

Not imported by Anneal: python_tests.py sends this file's source. It must use only the standard library of
the sandbox's system Python. Inputs: the nonce on the first line of stdin, {"program", "tests"} in
payload.json. Output: one line `ANNEAL_REPORT {json}` on the original stdout, written only after every test
ran, so a program that exits early (sys.exit, os._exit, a crash) leaves no report and scores 0.
"""

import ast
import json
import os
import sys

REPORT_PREFIX = "ANNEAL_REPORT "
# Not "__main__": a solution's `if __name__ == "__main__":` block usually reads stdin, which is empty here.
PROGRAM_MODULE_NAME = "solution"


def describe(exc: BaseException) -> str:
    try:
        text = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
    except Exception:  # a hostile __str__
        text = type(exc).__name__
    return text[:300]


def compile_program(source: str):
    """The program, with the value of its last statement bound to `result` when that is an expression."""
    tree = ast.parse(source, filename="<program>")
    if tree.body and isinstance(tree.body[-1], ast.Expr):
        last = tree.body[-1]
        tree.body[-1] = ast.copy_location(
            ast.Assign(targets=[ast.Name(id="result", ctx=ast.Store())], value=last.value), last
        )
        ast.fix_missing_locations(tree)
    return compile(tree, "<program>", "exec")


def main() -> None:
    nonce = sys.stdin.readline().strip()
    with open("payload.json", encoding="utf-8") as f:
        payload = json.load(f)
    report_fd = os.dup(1)
    os.dup2(2, 1)  # the program's prints go to stderr: they can neither forge nor flood the report line
    namespace = {"__name__": PROGRAM_MODULE_NAME}
    program_error = None
    # A program may patch the assert helpers its tests call (unittest.TestCase.assertEqual = no-op):
    # put them back before the tests run.
    import unittest

    helpers = dict(vars(unittest.TestCase))
    try:
        exec(compile_program(payload["program"]), namespace)
    except BaseException as exc:  # SystemExit too: a program that exits must not pass its tests
        program_error = describe(exc)
    try:
        for name in [name for name in vars(unittest.TestCase) if name not in helpers]:
            delattr(unittest.TestCase, name)
        for name, value in helpers.items():
            if vars(unittest.TestCase).get(name) is not value and name not in ("__dict__", "__weakref__"):
                setattr(unittest.TestCase, name, value)
    except BaseException as exc:
        program_error = program_error or "could not restore unittest after the program: " + describe(exc)
    passed, errors = [], []
    for index, test in enumerate(payload["tests"]):
        if program_error is not None:
            passed.append(False)
            errors.append("not run: the program failed")
            continue
        try:
            exec(compile(test, f"<test {index + 1}>", "exec"), namespace)
        except BaseException as exc:
            passed.append(False)
            errors.append(describe(exc))
        else:
            passed.append(True)
            errors.append(None)
    report = {"nonce": nonce, "passed": passed, "errors": errors, "program_error": program_error}
    os.write(report_fd, (REPORT_PREFIX + json.dumps(report) + "\n").encode())
    os._exit(0)  # skip whatever atexit hooks or threads the program left behind


if __name__ == "__main__":
    main()
