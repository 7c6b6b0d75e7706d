"""Replaces one passage of a file of the current folder; stdlib only, because it runs in the sandbox.

The environment sends this file's source as the program and {"path", "old", "new"} as JSON on stdin. The old
text must occur exactly once in the file, as written. When it does not occur as written, the file's lines are
compared with the old text's lines with their leading and trailing blanks ignored (small models drop or change
indentation); one such match is replaced, the new lines indented under the matched lines' first as they are
under their own first. Nothing is
written when there is no match or more than one; the message says which, and names the closest line when there
is none, so the next turn can copy it. This is the smallest edit a model can write: no diff headers, no counts.
"""

from __future__ import annotations

import difflib
import json
import os
import sys


class ReplaceError(ValueError):
    pass


def _indent(line: str) -> str:
    return line[: len(line) - len(line.lstrip(" \t"))]


def _closest(lines: list[str], wanted: str) -> str:
    stripped = [line.strip() for line in lines]
    found = difflib.get_close_matches(wanted.strip(), [line for line in stripped if line], n=1, cutoff=0.5)
    if not found:
        return ""
    number = stripped.index(found[0]) + 1
    return f"; the closest line is {number}: {lines[number - 1].rstrip()!r}"


def replace(text: str, old: str, new: str, name: str) -> tuple[str, str]:
    """`text` with the one occurrence of `old` replaced by `new`, and what was done. ReplaceError otherwise."""
    if not old.strip():
        raise ReplaceError("old must hold the text to replace; it is empty")
    count = text.count(old)
    if count == 1:
        body = old.strip("\n")
        at = text.index(old) + old.index(body)
        first = text.count("\n", 0, at) + 1
        last = first + body.count("\n")
        return text.replace(old, new, 1), f"replaced {_span(first, last)} of {name}"
    if count > 1:
        raise ReplaceError(
            f"old occurs {count} times in {name}; include more of its lines so that it occurs once"
        )
    lines = text.splitlines(keepends=True)
    wanted = old.strip("\n").splitlines()
    stripped_wanted = [line.strip() for line in wanted]
    stripped = [line.strip() for line in lines]
    size = len(wanted)
    matches = [i for i in range(len(lines) - size + 1) if stripped[i : i + size] == stripped_wanted]
    if not matches:
        first_wanted = next(line for line in wanted if line.strip())
        raise ReplaceError(f"old does not occur in {name}{_closest(lines, first_wanted)}")
    if len(matches) > 1:
        raise ReplaceError(
            f"old occurs {len(matches)} times in {name} (blanks ignored); include more of its lines so that it occurs once"
        )
    at = matches[0]
    # The new text's indentation is taken relative to its first line's and put under the matched lines'.
    new_lines = new.strip("\n").splitlines() if new.strip() else []
    base = next((_indent(line) for line in new_lines if line.strip()), "")
    target = _indent(next(lines[i] for i in range(at, at + size) if lines[i].strip()))
    replaced = []
    for line in new_lines:
        body = line[len(base) :] if line.startswith(base) else line.lstrip(" \t")
        replaced.append(target + body + "\n" if line.strip() else "\n")
    if replaced and not lines[at + size - 1].endswith("\n"):
        replaced[-1] = replaced[-1][:-1]
    lines[at : at + size] = replaced
    return "".join(lines), f"replaced {_span(at + 1, at + size)} of {name} (blanks ignored)"


def _span(first: int, last: int) -> str:
    return f"line {first}" if first == last else f"lines {first}-{last}"


def apply(args: dict, root: str = ".") -> str:
    """Replace in the file under `root` that args["path"] names; what was done. ReplaceError, nothing written."""
    name = args.get("path")
    if not isinstance(name, str) or not name or name.startswith("/") or ".." in name.split("/"):
        raise ReplaceError(f"path {name!r} must be relative and stay inside the repository")
    if not all(isinstance(args.get(key), str) for key in ("old", "new")):
        raise ReplaceError("old and new must be strings")
    path = os.path.join(root, name)
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
    except (OSError, UnicodeDecodeError) as exc:
        raise ReplaceError(f"{name}: cannot read it ({getattr(exc, 'strerror', None) or exc})") from None
    changed, done = replace(text, args["old"], args["new"], name)
    with open(path, "w", encoding="utf-8") as f:
        f.write(changed)
    return done


def main() -> int:
    try:
        args = json.load(sys.stdin)
        if not isinstance(args, dict):
            raise ReplaceError('send {"path": ..., "old": ..., "new": ...}')
        print(apply(args))
    except (ReplaceError, ValueError) as exc:
        print(f"not replaced: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
