"""More bugs in the pack's repositories: one-token mutations of each correct module, kept where its tests fail.

The pack has one planted bug per repository. Training an agent on 12 repositories means 12 fixes to learn
from; a warm-up on the others, 13 traces. Mutation testing's operators give each repository many more bugs of
the same kinds the pack plants (a comparison's boundary, an operator, a constant off by one, ``and`` for
``or``), and so many more tasks and traces, without a repository the held-out set holds ever being seen.

- ``candidate_bugs(source)``: every one-token mutation of a module, as the ``(old, new)`` text replacement a
  ``Task`` plants: the whole line changed (two lines where one is not unique), so the fix is that line.
- ``MUTANTS``: the candidates whose tests fail (at least one), found by running each repository's tests
  on each candidate in a sandbox (``scripts/build_mutants.py``, which writes ``mutants.json``; a test runs
  them again). A candidate every test still passes is equivalent or untested, and is not a task. The hint is
  what the failing test reported.
- ``mutant_tasks(task)``: those as ``Task``s named ``<task>~<n>``; ``repo_of`` names the repository either way.
"""

from __future__ import annotations

import ast
import json
from dataclasses import replace
from functools import cache
from itertools import pairwise
from pathlib import Path

from gpu_jobs.agent.taskpack.tasks import TASKS, Task

DATA = Path(__file__).with_name("mutants.json")
SEPARATOR = "~"
MAX_MUTANTS = 32  # per repository, wherever mutants are asked for (a pack, a warm-up)

SWAPS = {
    ast.Lt: ("<", "<="), ast.LtE: ("<=", "<"), ast.Gt: (">", ">="), ast.GtE: (">=", ">"),
    ast.Eq: ("==", "!="), ast.NotEq: ("!=", "=="), ast.Add: ("+", "-"), ast.Sub: ("-", "+"),
    ast.Mult: ("*", "+"), ast.FloorDiv: ("//", "/"), ast.Div: ("/", "//"), ast.Mod: ("%", "//"),
}  # fmt: skip
BOOL_SWAPS = {ast.And: ("and", "or"), ast.Or: ("or", "and")}
# Names and attributes swapped for their opposite (True and False: with the constants).
WORD_SWAPS = {
    "min": "max", "max": "min", "any": "all", "all": "any", "lower": "upper", "upper": "lower",
    "lstrip": "rstrip", "rstrip": "lstrip",
}  # fmt: skip


def _offset(lines: list[str], line: int, col: int) -> int:
    """The character offset of (1-based `line`, UTF-8 byte `col`) in the text of `lines`."""
    before = sum(len(text) for text in lines[: line - 1])
    return before + len(lines[line - 1].encode()[:col].decode())


def _token_edits(tree: ast.AST, lines: list[str]) -> list[tuple[int, int, str]]:
    """(start, end, replacement) character spans of the one-token mutations in the parsed module."""
    text = "".join(lines)
    edits: list[tuple[int, int, str]] = []

    def between(left: ast.expr, right: ast.expr, old: str, new: str) -> None:
        start = _offset(lines, left.end_lineno or 0, left.end_col_offset or 0)
        end = _offset(lines, right.lineno, right.col_offset)
        gap = text[start:end]
        at = gap.find(old)
        # The operator is the gap's only token (brackets aside): never a longer operator that contains it.
        if at >= 0 and gap.replace(old, "", 1).strip(" ()") == "":
            edits.append((start + at, start + at + len(old), new))

    for node in ast.walk(tree):
        if isinstance(node, ast.Compare):
            for left, op, right in zip(
                [node.left, *node.comparators[:-1]], node.ops, node.comparators, strict=True
            ):
                if type(op) in SWAPS:
                    between(left, right, *SWAPS[type(op)])
        elif isinstance(node, ast.BinOp) and type(node.op) in SWAPS:
            between(node.left, node.right, *SWAPS[type(node.op)])
        elif isinstance(node, ast.AugAssign) and type(node.op) in SWAPS:
            old, new = SWAPS[type(node.op)]
            between(node.target, node.value, old + "=", new + "=")
        elif isinstance(node, ast.BoolOp) and type(node.op) in BOOL_SWAPS:
            for left, right in pairwise(node.values):
                between(left, right, *BOOL_SWAPS[type(node.op)])
        elif isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
            start = _offset(lines, node.lineno, node.col_offset)
            if text.startswith("not ", start):
                edits.append((start, start + len("not "), ""))
        elif isinstance(node, ast.Name | ast.Attribute) and node.lineno == node.end_lineno:
            word = node.id if isinstance(node, ast.Name) else node.attr
            end = _offset(lines, node.end_lineno, node.end_col_offset or 0)
            if word in WORD_SWAPS and text[end - len(word) : end] == word:
                edits.append((end - len(word), end, WORD_SWAPS[word]))
        elif (
            isinstance(node, ast.Constant)
            and type(node.value) in (bool, int)
            and node.lineno == node.end_lineno
        ):
            start = _offset(lines, node.lineno, node.col_offset)
            end = _offset(lines, node.end_lineno, node.end_col_offset or 0)
            if text[start:end] != str(node.value):
                continue
            number = node.value
            if isinstance(number, bool):
                edits.append((start, end, str(not number)))
            elif isinstance(number, int) and number <= 100:
                edits += [(start, end, str(value)) for value in (number + 1, number - 1) if value >= 0]
    return sorted(set(edits))


def _as_bug(source: str, edit: tuple[int, int, str]) -> tuple[str, str] | None:
    """The edit as a `Task.bug`: the whole changed line (with the next where one is not unique)."""
    start, end, new = edit
    line_start = source.rfind("\n", 0, start) + 1
    for extra in (0, 1):
        line_end = source.find("\n", end)
        for _ in range(extra):
            line_end = source.find("\n", line_end + 1)
        if line_end < 0:
            return None
        old = source[line_start:line_end]
        if source.count(old) == 1:
            return old, old[: start - line_start] + new + old[end - line_start :]
    return None


def candidate_bugs(source: str) -> list[tuple[str, str]]:
    """Every one-token mutation of `source` (a correct module) as an (old, new) replacement, in source order;
    none inside a docstring or a string, none that no longer parses."""
    lines = source.splitlines(keepends=True)
    found: list[tuple[str, str]] = []
    for edit in _token_edits(ast.parse(source), lines):
        bug = _as_bug(source, edit)
        if bug is None or bug in found:
            continue
        try:
            ast.parse(source.replace(bug[0], bug[1], 1))
        except SyntaxError:
            continue
        found.append(bug)
    return found


def repo_of(task_name: str) -> str:
    """The pack repository a task (a pack task or one of its mutants) is a bug in."""
    return task_name.split(SEPARATOR, 1)[0]


@cache
def _kept() -> dict[str, list[list[str]]]:
    return json.loads(DATA.read_text()) if DATA.is_file() else {}


def mutant_tasks(task: Task, limit: int | None = None) -> list[Task]:
    """The kept mutants of `task`'s repository (its tests fail on each), as tasks ``<name>~<n>`` (n: the
    mutant's place in the repository's list, whatever `limit`); with `limit`, that many spread evenly over
    the list, so they are not all on the module's first lines. The pack's own planted bug is never among them."""
    kept = list(enumerate(_kept().get(task.name, []), start=1))
    if limit is not None and limit < len(kept):
        kept = [kept[i * len(kept) // limit] for i in range(limit)]
    return [
        replace(task, name=f"{task.name}{SEPARATOR}{n}", bug=(old, new), hint=hint)
        for n, (old, new, hint) in kept
    ]


def mutant_counts() -> dict[str, int]:
    """Kept mutants per pack task, in pack order."""
    return {task.name: len(_kept().get(task.name, [])) for task in TASKS}


__all__ = ["MAX_MUTANTS", "SEPARATOR", "candidate_bugs", "mutant_counts", "mutant_tasks", "repo_of"]
