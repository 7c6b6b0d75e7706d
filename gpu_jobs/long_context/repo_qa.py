"""Question answering over a repository given whole in the prompt, built from the repo-fix task pack's
modules and tests (gpu_jobs.agent.taskpack).

The repository holds the asked file, other packages of the pack, and, when the length asks for more
than the pack holds, renamed copies of them (every top-level name gets a made-up suffix, so each name is
still defined in one file only); a CHANGELOG.md of short entries closes the gap to the length. Two kinds
of question, both answered by the file's own text: which file defines a function, and how many test
methods a test file holds. Answers come from Python's ast, not from the generator's bookkeeping.
"""

from __future__ import annotations

import ast
import random
import re
from functools import cache

from gpu_jobs.long_context.text import CountTokens, LengthError, Sample, distinct_words, number

FILE_MARK = "### file: "


@cache
def _pack_files() -> tuple[tuple[str, str, str], ...]:
    """(module name, module source, tests source) of every task, from the repo-fix pack."""
    from gpu_jobs.agent.taskpack import TASKS

    return tuple((task.module.removesuffix(".py"), task.source, task.tests) for task in TASKS)


def _top_level_names(source: str) -> list[str]:
    tree = ast.parse(source)
    return [node.name for node in tree.body if isinstance(node, ast.FunctionDef | ast.ClassDef)]


def _test_methods(source: str) -> int:
    return sum(
        isinstance(node, ast.FunctionDef) and node.name.startswith("test")
        for cls in ast.parse(source).body
        if isinstance(cls, ast.ClassDef)
        for node in cls.body
    )


def _package(rng: random.Random, index: int, package: str, *, renamed: bool) -> list[tuple[str, str]]:
    """The two files of task ``index`` under folder ``package``, with names suffixed when ``renamed``."""
    module, source, tests = _pack_files()[index]
    if renamed:
        suffix = distinct_words(rng, 1, syllables=2)[0]
        for name in _top_level_names(source):
            pattern = re.compile(rf"\b{re.escape(name)}\b")
            source = pattern.sub(f"{name}_{suffix}", source)
            tests = pattern.sub(f"{name}_{suffix}", tests)
    return [(f"{package}/{module}.py", source), (f"{package}/tests/test_{module}.py", tests)]


def _render(path: str, text: str) -> str:
    return f"{FILE_MARK}{path}\n{text.rstrip()}"


def repo_qa(rng: random.Random, length: int, count: CountTokens) -> Sample:
    tasks = len(_pack_files())
    asked_task = rng.randrange(tasks)
    packages = distinct_words(rng, tasks * (2 + length // 4096), syllables=3)
    asked = _package(rng, asked_task, packages[0], renamed=False)
    kind = rng.choice(("defines", "tests"))
    if kind == "defines":
        names = _top_level_names(asked[0][1])
        name = rng.choice(names)
        question = f"which file of the repository defines the function or class {name}? give its path."
        answer = asked[0][0]
    else:
        question = f"how many test methods does the file {asked[1][0]} define? give the number."
        answer = str(_test_methods(asked[1][1]))
    head = "below is a python repository, file by file. read it, then answer the question after it."
    tail = f"question: {question}\nanswer:"
    # The other packages, in a seeded order: the pack's own first, then renamed copies, as needed.
    order = [i for i in range(tasks) if i != asked_task]
    rng.shuffle(order)
    files: list[str] = [_render(*pair) for pair in asked]
    used = count(head + "\n") + count(tail) + sum(count(text + "\n") for text in files)
    if used > length:
        # The shortest prompts hold only the file asked about, not its companion (module or tests).
        files = [files[0] if kind == "defines" else files[1]]
        used = count(head + "\n") + count(tail) + count(files[0] + "\n")
    if used > length:
        raise LengthError(f"the question and the file it asks about take {used} tokens, over {length}")
    package_index = 1
    copy = 0
    while package_index < len(packages):
        task = order[copy % len(order)]
        renamed = copy >= len(order)
        pair = _package(rng, task, packages[package_index], renamed=renamed)
        rendered = [_render(*item) for item in pair]
        size = sum(count(text + "\n") for text in rendered)
        if used + size > length:
            break
        files.extend(rendered)
        used += size
        package_index += 1
        copy += 1
    rng.shuffle(files)
    # The gap the whole files left is closed by the changelog, a file every repository has.
    entries = [f"{FILE_MARK}CHANGELOG.md"]
    used += count(entries[0] + "\n")
    while used <= length:
        entry = _changelog_entry(rng, packages)
        size = count(entry + "\n")
        if used + size > length:
            break
        entries.append(entry)
        used += size
    if len(entries) > 1:
        files.append("\n".join(entries))
    prompt = head + "\n" + "".join(text + "\n" for text in files) + tail
    return Sample(prompt=prompt, answer=answer, metadata={"kind": kind, "files": len(files)})


def _changelog_entry(rng: random.Random, packages: list[str]) -> str:
    verb = rng.choice(("fix", "tidy", "document", "test", "speed up", "rename a helper in"))
    return f"- 2024-{rng.randint(1, 12):02d}-{rng.randint(1, 28):02d}: {verb} {rng.choice(packages)} (#{number(rng, 3)})"
