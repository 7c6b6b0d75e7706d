"""The apply_patch tool's patcher (gpu_jobs/agent/patching.py, run in the sandbox), on files in a temp folder:
hunks whose header miscounts their lines are read to their last line (git apply --recount), and a diff that
does not match still changes nothing."""

import re

import pytest

from gpu_jobs.agent import patching

SOURCE = "def total(values):\n    out = 0\n    for v in values:\n        out -= v\n    return out\n"
FIXED = SOURCE.replace("out -= v", "out += v")


@pytest.fixture
def repo(tmp_path):
    (tmp_path / "calc.py").write_text(SOURCE)
    return tmp_path


@pytest.mark.parametrize(
    "header",
    [
        "@@ -4 +4 @@",  # right
        "@@ -11,0 +12 @@",  # what SmolLM2 wrote: counts and place both wrong
        "@@ -4,3 +4,3 @@",  # counts too high: the next hunk or the end comes first
        "@@ -1,1 +1,0 @@",
    ],
)
def test_a_hunk_is_applied_when_its_lines_are_right_whatever_its_header_counts(repo, header):
    diff = f"--- a/calc.py\n+++ b/calc.py\n{header}\n-        out -= v\n+        out += v\n"
    assert patching.apply(diff, str(repo)) == ["patched calc.py (1 hunk)"]
    assert (repo / "calc.py").read_text() == FIXED


def test_recounted_hunks_stop_at_the_next_hunk_and_the_next_file(repo):
    (repo / "other.py").write_text("a = 1\nb = 2\n")
    diff = (
        "--- a/calc.py\n+++ b/calc.py\n@@ -1,9 +1,9 @@\n-def total(values):\n+def total(values):  # sum\n"
        "@@ -4 +4 @@\n-        out -= v\n+        out += v\n\n"
        "--- a/other.py\n+++ b/other.py\n@@ -2,5 +2 @@\n-b = 2\n+b = 3\n"
    )
    assert patching.apply(diff, str(repo)) == ["patched calc.py (2 hunks)", "patched other.py (1 hunk)"]
    assert (repo / "calc.py").read_text() == FIXED.replace("(values):", "(values):  # sum")
    assert (repo / "other.py").read_text() == "a = 1\nb = 3\n"


@pytest.mark.parametrize(
    ("diff", "message"),
    [
        ("--- a/calc.py\n+++ b/calc.py\n@@ -5,8 +5 @@\n", "holds no ' ', '-' or '+' line"),
        (
            "--- a/calc.py\n+++ b/calc.py\n@@ -4 +4 @@\n-        out *= v\n+        out += v\n",
            "does not match",
        ),
    ],
)
def test_a_diff_that_cannot_apply_says_why_and_changes_nothing(repo, diff, message):
    with pytest.raises(patching.PatchError, match=re.escape(message)):
        patching.apply(diff, str(repo))
    assert (repo / "calc.py").read_text() == SOURCE
