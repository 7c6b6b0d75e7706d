"""The replace_text tool's program (gpu_jobs/agent/replacing.py, run in the sandbox), on files in a temp
folder: the old text must occur once; written without its indentation it still matches one place and the new
lines take that place's indentation; anything else changes nothing and says why."""

import pytest

from gpu_jobs.agent import replacing
from tests.unit.test_agent_patching import FIXED, SOURCE  # the same module and fix as the patcher's tests


@pytest.fixture
def repo(tmp_path):
    (tmp_path / "calc.py").write_text(SOURCE)
    return tmp_path


def replace(repo, old, new, path="calc.py"):
    return replacing.apply({"path": path, "old": old, "new": new}, str(repo))


@pytest.mark.parametrize(
    ("old", "new", "done"),
    [
        ("        out -= v", "        out += v", "replaced line 4 of calc.py"),
        ("out -= v", "out += v", "replaced line 4 of calc.py"),  # part of a line, as written
        ("out -= v\n", "out += v\n", "replaced line 4 of calc.py"),
        # Whole lines without their indentation (what small models write): matched blanks ignored, and the
        # new lines take the file's indentation, relative indentation kept.
        ("for v in values:\n    out -= v", "for v in values:\n    out += v", "replaced lines 3-4 of calc.py"),
        ("  for v in values:\n      out -= v  ", "for v in values:\n    out += v", "replaced lines 3-4"),
    ],
)
def test_the_one_place_holding_the_old_text_gets_the_new_text(repo, old, new, done):
    assert replace(repo, old, new).startswith(done)
    assert (repo / "calc.py").read_text() == FIXED


@pytest.mark.parametrize(
    ("old", "message"),
    [
        ("out", "old occurs 3 times in calc.py; include more of its lines"),
        ("out -= w", "old does not occur in calc.py; the closest line is 4: '        out -= v'"),
        ("", "old must hold the text to replace; it is empty"),
        ("  \n", "old must hold the text to replace"),
    ],
)
def test_old_text_that_is_absent_or_not_unique_changes_nothing_and_says_why(repo, old, message):
    with pytest.raises(replacing.ReplaceError, match="^" + message.replace("(", r"\(").replace(")", r"\)")):
        replace(repo, old, "x")
    assert (repo / "calc.py").read_text() == SOURCE


def test_lines_that_match_twice_blanks_ignored_change_nothing(repo):
    (repo / "twice.py").write_text("if a:\n    x = 1\nif b:\n        x = 1\n")
    with pytest.raises(replacing.ReplaceError, match="occurs 2 times in twice.py \\(blanks ignored\\)"):
        replace(repo, "x  = 1".replace("  ", " ").strip() + " ", "x = 2", path="twice.py")
    assert (repo / "twice.py").read_text() == "if a:\n    x = 1\nif b:\n        x = 1\n"


@pytest.mark.parametrize("path", ["/etc/passwd", "../calc.py", "a/../../calc.py", ""])
def test_a_path_out_of_the_repository_is_refused(repo, path):
    with pytest.raises(replacing.ReplaceError, match="must be relative and stay inside the repository"):
        replace(repo, "out -= v", "out += v", path=path)


def test_a_missing_or_binary_file_is_named(repo):
    with pytest.raises(replacing.ReplaceError, match="^nothing.py: cannot read it"):
        replace(repo, "a", "b", path="nothing.py")
    (repo / "blob.bin").write_bytes(b"\xff\xfe\x00")
    with pytest.raises(replacing.ReplaceError, match="^blob.bin: cannot read it"):
        replace(repo, "a", "b", path="blob.bin")


def test_replacing_with_nothing_deletes_the_lines(repo):
    assert replace(repo, "    for v in values:\n        out -= v\n", "").startswith("replaced lines 3-4")
    assert (repo / "calc.py").read_text() == "def total(values):\n    out = 0\n    return out\n"
