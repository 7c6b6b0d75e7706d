"""Applies a unified diff to the files of the current folder; stdlib only, because it runs in the sandbox.

The environment sends this file's source as the program and the diff on stdin. All files are patched or
none: every hunk is checked before anything is written. A hunk's context must match exactly; it may sit up
to MAX_OFFSET lines away from where its header says (files change between turns). Paths may carry git's
a/ and b/ prefixes; /dev/null creates or deletes a file; a path leading out of the folder is refused.
A hunk whose header miscounts its lines is read to its last ' ', '-' or '+' line instead (git apply
--recount): models write the lines right more often than the counts (SmolLM2 wrote "@@ -11,0 +12 @@" over
one removed and one added line).
"""

from __future__ import annotations

import os
import re
import sys

MAX_OFFSET = 200
_HUNK = re.compile(r"^@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@")


class PatchError(ValueError):
    pass


def _path(header: str) -> str | None:
    name = header.split("\t")[0].strip()
    if name == "/dev/null":
        return None
    if name.startswith(("a/", "b/")):
        name = name[2:]
    parts = name.split("/")
    if not name or name.startswith("/") or ".." in parts:
        raise PatchError(f"path {name!r} must be relative and stay inside the repository")
    return name


def parse(text: str) -> list[tuple[str | None, str | None, list[list[str]]]]:
    """[(old path, new path, hunks)]: each hunk is its lines with their ' ', '-' or '+' marks."""
    lines = text.splitlines()
    files: list[tuple[str | None, str | None, list[list[str]]]] = []
    i = 0
    while i < len(lines):
        if _file_header(lines, i):
            old, new = _path(lines[i][4:]), _path(lines[i + 1][4:])
            files.append((old, new, []))
            i += 2
            continue
        match = _HUNK.match(lines[i])
        if match:
            if not files:
                raise PatchError(f"line {i + 1}: a hunk before any '--- a/FILE' / '+++ b/FILE' header")
            counts = (int(match.group(2) or 1), int(match.group(4) or 1))
            end, hunk = _hunk(lines, i, counts)
            if end is None:  # the header miscounts: read the lines that follow it instead
                end, hunk = _hunk(lines, i, None)
            if len(hunk) == 1:
                raise PatchError(f"hunk {hunk[0]!r} holds no ' ', '-' or '+' line")
            files[-1][2].append(hunk)
            i = end if end is not None else len(lines)  # a recount always ends somewhere
            continue
        i += 1
    if not files:
        raise PatchError("no '--- a/FILE' / '+++ b/FILE' header found: is this a unified diff?")
    return files


def _hunk(lines: list[str], i: int, counts: tuple[int, int] | None) -> tuple[int | None, list[str]]:
    """The hunk whose header is lines[i] and the index after it: read to `counts` (old, new) lines, or, with
    None, to the last line marked ' ', '-' or '+' before the next hunk or file header. (None, ...) when the
    lines do not give the counts, or a removed or added line follows them."""
    hunk = [lines[i]]
    i += 1
    seen_old = seen_new = 0
    while i < len(lines) and (counts is None or seen_old < counts[0] or seen_new < counts[1]):
        line = lines[i]
        if line.startswith("\\"):  # "\ No newline at end of file"
            i += 1
            continue
        mark = line[:1] or " "
        if mark not in " -+" or (counts is None and (_file_header(lines, i) or _HUNK.match(line))):
            break
        seen_old += mark in " -"
        seen_new += mark in " +"
        hunk.append(mark + line[1:])
        i += 1
    if counts is None:
        while len(hunk) > 1 and hunk[-1] == " ":  # blank lines after the hunk are not context
            hunk.pop()
            i -= 1
        return i, hunk
    follows = i < len(lines) and lines[i][:1] in "-+" and not _file_header(lines, i)
    return (i if (seen_old, seen_new) == counts and not follows else None), hunk


def _file_header(lines: list[str], i: int) -> bool:
    return lines[i].startswith("--- ") and i + 1 < len(lines) and lines[i + 1].startswith("+++ ")


def apply_hunks(text: str, hunks: list[list[str]], name: str) -> str:
    lines = text.splitlines(keepends=True)
    offset = 0
    for hunk in hunks:
        header = _HUNK.match(hunk[0])
        assert header is not None  # hunks start at a line _HUNK matched (above)
        start = int(header.group(1))
        old = [line[1:] for line in hunk[1:] if line[0] in " -"]
        new = [line[1:] for line in hunk[1:] if line[0] in " +"]
        stripped = [line.rstrip("\r\n") for line in lines]
        want = max(start - 1, 0) + offset if old else max(start, 0) + offset
        at = None
        for delta in range(MAX_OFFSET + 1):
            for pos in (want - delta, want + delta):
                if 0 <= pos <= len(lines) - len(old) and stripped[pos : pos + len(old)] == old:
                    at = pos
                    break
            if at is not None:
                break
        if at is None:
            raise PatchError(
                f"{name}: hunk {hunk[0]} does not match the file (context or removed lines differ)"
            )
        lines[at : at + len(old)] = [line + "\n" for line in new]
        offset = at - (start - 1) + len(new) - len(old)
    return "".join(lines)


def apply(text: str, root: str = ".") -> list[str]:
    """Patch the files under `root`; what was done, one line a file. PatchError and nothing written on failure."""
    writes: list[tuple[str, str | None]] = []
    done = []
    for old, new, hunks in parse(text):
        target = new or old
        if target is None:
            raise PatchError("a file cannot go from /dev/null to /dev/null")
        path = os.path.join(root, target)
        if old is None:
            current = ""
            if os.path.exists(path):
                raise PatchError(f"{target}: the diff creates it but it exists")
        else:
            try:
                with open(os.path.join(root, old), encoding="utf-8") as f:
                    current = f.read()
            except OSError as exc:
                raise PatchError(f"{old}: cannot read it ({exc.strerror})") from None
        if new is None:
            writes.append((path, None))
            done.append(f"deleted {old}")
            continue
        writes.append((path, apply_hunks(current, hunks, target)))
        done.append(f"patched {target} ({len(hunks)} hunk{'s' if len(hunks) != 1 else ''})")
    for path, content in writes:
        if content is None:
            os.unlink(path)
            continue
        folder = os.path.dirname(path)
        if folder:
            os.makedirs(folder, exist_ok=True)
        with open(path, "w", encoding="utf-8") as f:
            f.write(content)
    return done


def main() -> int:
    try:
        done = apply(sys.stdin.read())
    except PatchError as exc:
        print(f"patch not applied: {exc}", file=sys.stderr)
        return 1
    print("\n".join(done))
    return 0


if __name__ == "__main__":
    sys.exit(main())
