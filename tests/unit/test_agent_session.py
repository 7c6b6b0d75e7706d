"""The persistent sandbox session under agent episodes: state across calls, isolation between sessions."""

import os
import shutil
import signal

import pytest

from sandboxes.session import SESSION_LOST, SandboxSession
from sandboxes.types import Limits, Status
from tests.security.hostile import children_of

pytestmark = pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap is not installed")


def test_files_and_changes_persist_across_calls_but_processes_do_not():
    with SandboxSession(files={"pkg/mod.py": "VALUE = 1\n"}) as session:
        assert session.run("shell", "echo 2 > pkg/extra.txt; sleep 30 &").status == Status.OK
        out = session.run("python", "import pkg.mod, os; print(pkg.mod.VALUE, open('pkg/extra.txt').read())")
        assert out.stdout.split() == ["1", "2"]
        procs = session.run("shell", "cat /proc/[0-9]*/comm")
        assert "sleep" not in procs.stdout.split() and "python3" in procs.stdout.split()  # the fork server
        # Writing through the session overwrites; the program file of a call is not left in the repository.
        session.write_files({"pkg/mod.py": "VALUE = 3\n"})
        listing = session.run("shell", "find . -type f | sort")
        assert listing.stdout.split() == ["./pkg/extra.txt", "./pkg/mod.py"]
        assert session.stats.calls == 6  # the first write of the files, then five calls


def test_two_sessions_do_not_see_each_other():
    with SandboxSession(files={"a.txt": "one"}) as first, SandboxSession(files={"b.txt": "two"}) as second:
        first.run("shell", "echo secret > /tmp/shared.txt")
        assert second.run("shell", "ls; cat /tmp/shared.txt").stdout.split() == ["b.txt"]


def test_a_killed_call_keeps_the_session_and_a_dead_sandbox_is_reported_not_replaced():
    with SandboxSession(files={"keep.txt": "kept"}, limits=Limits(wall_s=0.5)) as session:
        assert session.run("python", "while True: pass").status == Status.TIMEOUT
        assert session.run("shell", "cat keep.txt").stdout == "kept"
        # The sandbox dies from outside: its fork server (bwrap's child, pid 1 inside) is killed.
        server = children_of(session._sandbox._launcher.pid)
        assert server, "the sandbox's fork server was not found"
        for child in server:
            os.kill(child, signal.SIGKILL)
        dying = session.run("shell", "cat keep.txt")
        assert dying.status == Status.SANDBOX_ERROR and "died during this call" in dying.stderr
        assert not session.alive and session.lost
        later = session.run("shell", "true")
        assert later.status == Status.SANDBOX_ERROR and SESSION_LOST in later.stderr


def test_bad_file_names_are_refused():
    with SandboxSession() as session, pytest.raises(ValueError):
        session.write_files({"../escape.txt": "x"})


def test_a_session_pool_hands_out_pre_started_isolated_sessions():
    from sandboxes.session import SessionPool

    pool = SessionPool(size=2)
    try:
        first = pool.session(files={"a.txt": "one"})
        second = pool.session(files={"b.txt": "two"})
        with first, second:
            first.run("shell", "echo mine > /tmp/x.txt")
            assert second.run("shell", "ls; cat /tmp/x.txt 2>/dev/null").stdout.split() == ["b.txt"]
            assert first.run("shell", "cat a.txt /tmp/x.txt").stdout == "onemine\n"
    finally:
        pool.close()
    with pytest.raises(ValueError):
        SessionPool(size=0)
