"""The trusted side of a code check (loaded by boot.py, the sandbox's main program; standard library only).

Three processes, so that no process that runs model-written code holds the report channel, the nonce or the
decision:
- the judge (this process, made non-dumpable by boot.py: no ptrace, no /proc/<pid>/mem or fd by the same
  uid) forks the zygote *before* it reads its input from stdin, keeps stdout (the report channel) to itself, and
  decides every verdict from plain values (codec.py) that it compares with expected values only it holds;
- the zygote never runs model code: it forks a runner per program and, for io tests, relays the runner's
  output;
- runners (runner.py) run the program under the guard's audit hook, with the request and reply pipes only.

Input (stdin, one JSON document): {"nonce", "mode": "tests" | "custom", "time_s", ...}; see run_tests and
run_custom. Output: one line REPORT_PREFIX + JSON with the nonce, written last, on the original stdout.

Past 400 lines on purpose, for now: every module of the judge travels into the sandbox and is loaded by name
(boot.py, sandboxes/preload.py), so a split means a longer list there; the sections below (zygote, channel,
python_tests forms, agent unittest, custom_python) are the seams to split along.
"""

import gc
import json
import math
import os
import re
import select
import signal
import sys
import time

import codec
import native
import runner

REPORT_PREFIX = "ANNEAL_REPORT "
PR_SET_CHILD_SUBREAPER = 36
# The judge's own files (boot.py compiles them under /anneal-judge/): trusted callers, names no program may
# compile code under. main() adds the main program's path.
PROTECTED_FILES = tuple(
    f"/anneal-judge/{name}.py" for name in ("codec", "guard", "runner", "native", "judge")
)
OUTPUT_CAP = 1 << 20  # bytes of an io test's stdout the judge compares
PRINTED_CHARS = 2000  # of what a runner printed, kept to show with its sample
MARGIN_S = 0.25  # the judge reports this long before the sandbox's wall clock would kill everything
IPC_RMID = 0  # shmctl, semctl and msgctl's command that removes the object
WIPE_S = 2.0  # for the zygote to empty /tmp between two samples of a batch
ERROR_LINE = re.compile(r"[A-Za-z_.]*(Error|Exception)\b")  # "TypeError: ...", a runtime's named error
PRELOAD_S = 9.0  # for the zygote to import a python-science run's libraries (the verifier gives the run 10 s)
STOP_CHECK_S = 0.1  # while waiting on the zygote, how often the judge checks it was not stopped
COMPILED_TESTS = {}  # (assert script, its index) -> its code object, for this run (_compiled_test)
COMPILED_TESTS_KEPT = 256


def main(boot_file):
    """Judge the input on stdin (after the head boot.py read). `boot_file`: the main program's path."""
    global PROTECTED_FILES
    PROTECTED_FILES = (*PROTECTED_FILES, boot_file)
    job_r, job_w = os.pipe()
    out_r, out_w = os.pipe()
    # What the runners of a batch print: one pipe for all, which the judge drains and sorts by sample (a runner
    # prints only while it is the one serving; whatever it left running is swept before the next starts).
    printed_r, printed_w = os.pipe()
    zygote_pid = os.fork()
    if zygote_pid == 0:
        os.close(job_w)
        os.close(out_r)
        os.close(printed_r)
        zygote(job_r, out_w, printed_w)
    os.close(job_r)
    os.close(out_w)
    os.close(printed_w)
    payload = json.loads(_read_exactly(None))
    report_fd = os.dup(1)
    os.dup2(2, 1)  # prints of a test script go to stderr: only the report reaches stdout
    deadline = time.monotonic() + float(payload["time_s"]) - MARGIN_S
    channel = Channel(job_w, out_r, zygote_pid, printed_r)
    if payload.get("preload"):
        # python-science: the zygote loads the libraries; the judge numpy alone (its assert scripts may use it).
        _preload(
            {**payload["preload"], "modules": [m for m in payload["preload"]["modules"] if m == "numpy"]}
        )
        token = os.urandom(16).hex()
        channel.send({"mode": "preload", "t": token, **payload["preload"]})
        channel.receive(token, time.monotonic() + PRELOAD_S)
    if payload["mode"] == "custom":
        report = run_custom(payload, channel, deadline)
    elif payload["mode"] == "unittest":
        report = run_unittest_files(payload, channel, deadline)
    elif payload["mode"] == "tests_batch":
        report = run_test_batch(payload, channel)
    else:
        report = run_tests(payload, channel, deadline)
    report["nonce"] = payload["nonce"]
    report["tampering"] = channel.tampering
    os.write(report_fd, (REPORT_PREFIX + json.dumps(report) + "\n").encode())
    os._exit(0)


def _read_exactly(count):
    """`count` bytes of stdin (all the rest when None), as text."""
    chunks, left = [], count
    while left is None or left > 0:
        chunk = os.read(0, 1 << 20 if left is None else min(left, 1 << 20))
        if not chunk:
            break
        chunks.append(chunk)
        if left is not None:
            left -= len(chunk)
    return b"".join(chunks).decode()


# --- the zygote ------------------------------------------------------------------------------------------


def zygote(job_r, out_w, printed_w):
    """Forks a runner per job; never runs model code itself. Never returns. A serving runner prints to
    `printed_w`, which the judge drains.

    Kept lean on purpose: after every fork each page the zygote writes is copied (or at least faulted) once
    more, so between a runner's start and its end it only waits, and it reports a runner's start to nobody
    (the judge finds the runner among its children when it must kill it).

    The zygote is a child subreaper: after each runner exits, every process below it is killed, so nothing a
    program left running (a daemon that left its session) reaches the next job. Nothing outside its own
    descendants is touched, so the judge is safe to run unsandboxed (the benchmark's baseline does).
    """
    import ctypes  # before any runner exists; the guard drops it from the runners' modules

    # Orphans of runners (a daemon that left its session) are re-parented here, so the sweep finds them.
    ctypes.CDLL(None, use_errno=True).prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
    # A serving runner is forked by the C library's fork, without Python's at-fork work in the child
    # (reseeding random, resetting threading's and logging's state), which copies ~50 pages more per runner:
    # the zygote has one thread and holds no lock when it forks, so there is nothing to reset. PyDLL keeps the
    # GIL held through the call, as os.fork does. A local: nothing a runner can reach by name holds it.
    fork = ctypes.PyDLL(None, use_errno=True).fork
    # How wipe() removes a System V object a sample left (a local, as fork: no runner can reach it by name).
    libc = ctypes.CDLL(None, use_errno=True)
    removers = {
        "shm": lambda ident: libc.shmctl(ident, IPC_RMID, None),
        "sem": lambda ident: libc.semctl(ident, 0, IPC_RMID),
        "msg": lambda ident: libc.msgctl(ident, IPC_RMID, None),
    }

    def remove_sysv(kind, ident):
        removers[kind](ident)

    native.remember()
    os.close(0)
    os.dup2(2, 1)  # the report channel is the judge's alone
    pending = b""
    while True:
        line, pending = runner._read_line(job_r, pending)
        if line is None:
            os._exit(0)
        job = json.loads(line)
        if job.get("mode") == "preload":
            _preload(job)
            _tell_judge(out_w, {"t": job["t"], "preloaded": True})
            continue
        if job.get("mode") == "serve" and runner.PREPARED is None:
            runner.prepare(out_w, PROTECTED_FILES)
            gc.freeze()  # the zygote's objects stay out of every runner's collections: fewer pages copied
        if job.get("last"):
            # The judge needs no other runner: this process becomes it, which saves a fork (and the copy of
            # every page the interpreter touches) on each check.
            os.setpgid(0, 0)
            if job.get("mode") == "serve":
                runner.serve(job, job_r, out_w, PROTECTED_FILES)
            runner.run_unittest(job, out_w, PROTECTED_FILES)
        if job.get("mode") == "serve":
            pid = fork()
            if pid < 0:
                raise OSError(ctypes.get_errno(), "fork failed")
            if pid == 0:
                os.setpgid(0, 0)
                os.dup2(printed_w, 1)  # what the program prints goes to the judge, kept with its sample
                os.dup2(printed_w, 2)
                os.close(printed_w)
                runner.serve(job, job_r, out_w, PROTECTED_FILES)
            _, status = os.waitpid(pid, 0)
            _sweep()
            exited = {"exited": _status_text(status), "t": job["t"]}
            if job.get("wipe"):  # the sample's last runner: /tmp emptied now saves the judge a round trip
                exited["wiped"] = native.wipe(remove_sysv)
            _tell_judge(out_w, exited)
        elif job.get("mode") == "unittest":
            pid = os.fork()
            if pid == 0:
                os.setpgid(0, 0)
                runner.run_unittest(job, out_w, PROTECTED_FILES)
            _tell_judge(out_w, {"started": pid, "t": job["t"]})
            _, status = os.waitpid(pid, 0)
            _sweep()
            _tell_judge(out_w, {"exited": _status_text(status), "t": job["t"]})
        elif job.get("mode") == "io":
            result = _run_io(job)
            _sweep()
            _tell_judge(out_w, {"t": job["t"], "io": result})
        elif job.get("mode") == "exec":
            result = native.run_exec(job)
            _sweep()
            _tell_judge(out_w, {"t": job["t"], "io": result})
        elif job.get("mode") == "wipe":
            _sweep()
            _tell_judge(out_w, {"t": job["t"], "wiped": native.wipe(remove_sysv)})


def _preload(job):
    """In the zygote, before any runner (python-science): the libraries' folders on the path, the libraries
    imported (so each runner inherits them rather than importing them under the guard, which refuses the
    ctypes that numpy loads), numpy's types allowed across as plain values."""
    sys.path.extend(path for path in job["paths"] if path not in sys.path)
    import guard

    guard.LIBRARY_FOLDERS[:] = [path.rstrip("/") + "/" for path in job["paths"]]
    for name in job["modules"]:
        __import__(name)
    numpy = sys.modules.get("numpy")
    if numpy is not None:
        codec.allow_exact([numpy.ndarray, *set(numpy.sctypeDict.values())])


def _run_io(job):
    pid, fds = runner.spawn_main(job["program"], job["stdin"], PROTECTED_FILES, tamper=True)
    result = runner.collect(fds, time.monotonic() + job["time_s"], OUTPUT_CAP)
    if result["timed_out"] or result["flooded"]:
        _kill_group(pid)
    _, status = os.waitpid(pid, 0)
    _kill_group(pid)
    result["exit"] = _status_text(status)
    result["tampering"] = [line for line in result["tampering"].splitlines() if line][:5]
    result["stderr"] = result["stderr"][-2000:]
    return result


def _sweep():
    """Kill every process below the zygote (runners and whatever they left running), reaping them."""
    try:
        os.waitpid(-1, os.WNOHANG)  # reaps one that exited, if any; the loop below sees to the rest
    except ChildProcessError:
        return  # no child, so nothing below: the usual case, one system call
    for _ in range(100):  # a fork bomb may race the sweep; the sandbox's own limits bound it
        below = _descendants(os.getpid())
        if not below:
            return
        for pid in below:
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
        while True:
            try:
                if os.waitpid(-1, os.WNOHANG)[0] == 0:
                    break
            except ChildProcessError:
                break
        time.sleep(0.001)


def _descendants(root):
    """Every process below `root`, from the kernel's list of each task's children: a sweep after a runner
    that left nothing running reads one short file, not every process's stat."""
    below, frontier = set(), [root]
    while frontier:
        pid = frontier.pop()
        try:
            tasks = os.listdir(f"/proc/{pid}/task")
        except OSError:
            continue  # gone, and reaped
        for task in tasks:  # a thread that forked is its children's parent
            try:
                with open(f"/proc/{pid}/task/{task}/children", encoding="utf-8") as f:
                    children = [int(child) for child in f.read().split()]
            except (OSError, ValueError):
                continue
            for child in children:
                if child not in below:
                    below.add(child)
                    frontier.append(child)
    return below


def _kill_group(pid):
    try:
        os.killpg(pid, signal.SIGKILL)
    except OSError:
        pass


def _kill(pid):
    try:
        os.kill(pid, signal.SIGKILL)
    except OSError:
        pass


def _status_text(status):
    if os.WIFSIGNALED(status):
        return f"killed by signal {os.WTERMSIG(status)}"
    return f"exit code {os.waitstatus_to_exitcode(status)}"


def _send(fd, message):
    data = (json.dumps(message) + "\n").encode()
    while data:
        data = data[os.write(fd, data) :]


def _tell_judge(fd, message):
    try:
        _send(fd, message)
    except BrokenPipeError:  # the judge reported and left: nothing is listening
        os._exit(0)


# --- talking to runners ----------------------------------------------------------------------------------


class ProgramGone(Exception):
    """The runner exited or ran out of time; str() says which, after "the program"."""

    def __init__(self, what, status=""):
        super().__init__(f"{what} ({status})" if status else what)
        self.what = what
        self.status = status


EOF = {}  # Channel._next's answer once every writer of the reply pipe is gone


class Channel:
    """The judge's end of the pipes to the zygote and its runners. Collects tampering reports as it reads."""

    def __init__(self, job_w, out_r, zygote_pid, printed_r):
        self.job_w = job_w
        self.out_r = out_r
        self.printed_r = printed_r  # what serving runners print, one after the other
        self.printing = b""  # the end of what the serving runner printed so far
        self.zygote_pid = zygote_pid  # the runner's pid too, after a job marked "last"
        self.pending = b""
        self.tampering = []
        self.known = set()  # every token issued: a late message of an earlier job is not a forgery
        self.started = {}  # token -> the runner's pid
        self.printed = {}  # token -> what that runner printed (the end of it), once it exited
        self.wiped = set()  # tokens of runners after whose exit the zygote emptied /tmp

    def send(self, message):
        self.known.add(message["t"])
        try:
            _send(self.job_w, message)
        except BrokenPipeError:
            raise ProgramGone("lost its sandbox (the zygote died)") from None

    def receive(self, token, deadline):
        """The next message for `token`; ProgramGone on time out, or when the runner exited first."""
        while True:
            message = self._next(deadline)
            if message is None:
                raise ProgramGone("ran past its time limit")
            if message is EOF:
                raise ProgramGone("exited", "its process ended")
            if "tampering" in message and len(message) == 1:
                self.flag(message["tampering"])
            elif message.get("t") not in self.known:
                self.flag("forged a message to the judge")
            elif "started" in message:
                self.started[message["t"]] = message["started"]
            elif "exited" in message:
                self._drain_printed()  # the runner and all below it are gone: what it printed is all here
                self.printed[message["t"]] = self.printing.decode(errors="replace")
                self.printing = b""
                if message.get("wiped") is True:
                    self.wiped.add(message["t"])
                if message["t"] != token:
                    continue
                raise ProgramGone("exited", message["exited"])
            elif message["t"] != token:
                continue  # a late word from an earlier job, which already ended
            else:
                return message

    def _continue_if_stopped(self):
        """A program may stop the zygote (the same uid may signal it): the judge continues it, and says so."""
        try:
            with open(f"/proc/{self.zygote_pid}/stat", encoding="utf-8") as f:
                state = f.read().rsplit(")", 1)[1].split()[0]
        except (OSError, IndexError):
            return
        if state in ("T", "t"):
            self.flag("stopped the judge's zygote")
            try:
                os.kill(self.zygote_pid, signal.SIGCONT)
            except OSError:
                pass

    def _read_printed(self):
        chunk = os.read(self.printed_r, 1 << 16)
        self.printing = (self.printing + chunk)[-PRINTED_CHARS:]
        return chunk

    def _drain_printed(self):
        os.set_blocking(self.printed_r, False)
        try:
            while self._read_printed():
                pass
        except BlockingIOError:
            pass
        finally:
            os.set_blocking(self.printed_r, True)

    def runner_pids(self):
        """The zygote's children: the serving runner, and whatever it left running that came back to it."""
        try:
            with open(f"/proc/{self.zygote_pid}/task/{self.zygote_pid}/children", encoding="utf-8") as f:
                return [int(pid) for pid in f.read().split()]
        except (OSError, ValueError):
            return []

    def flag(self, what):
        what = str(what)[:200]
        if what not in self.tampering and len(self.tampering) < 10:
            self.tampering.append(what)

    def _next(self, deadline):
        while b"\n" not in self.pending:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return None
            ready, _, _ = select.select([self.out_r, self.printed_r], [], [], min(remaining, STOP_CHECK_S))
            if not ready:
                self._continue_if_stopped()
                continue
            if self.printed_r in ready:
                self._read_printed()
                if self.out_r not in ready:
                    continue
            chunk = os.read(self.out_r, 1 << 16)
            if not chunk:
                return EOF
            self.pending += chunk
            if len(self.pending) > runner.MAX_MESSAGE:
                self.flag("flooded the judge's channel")
                return None
        line, _, self.pending = self.pending.partition(b"\n")
        try:
            message = json.loads(line)
        except (ValueError, RecursionError):
            return {"tampering": "forged a message to the judge"}
        return message if isinstance(message, dict) else {"tampering": "forged a message to the judge"}


class Session:
    """One runner serving one program: the names it defined, and calls into it that return plain values."""

    def __init__(self, channel, program, deadline, *, helpers=False, last=False, bind=True, wipe=False):
        """`last`: no other runner will be needed, so the zygote itself becomes this one. `bind=False`: the
        program has no last expression statement to bind to `result` (runner.compile_program). `wipe`: the
        zygote empties /tmp once this runner exited (`wiped()` says whether it did)."""
        self.channel = channel
        self.deadline = deadline
        self.token = os.urandom(16).hex()
        self.gone = None
        self.last = last
        if last:
            channel.started[self.token] = channel.zygote_pid
        job = {
            "mode": "serve",
            "t": self.token,
            "program": program,
            "helpers": helpers,
            "last": last,
            "bind": bind,
            "wipe": wipe,
        }
        code = _compiled_program(program, bind)
        if code is not None:
            job["code"] = code
        channel.send(job)
        self.names, self.error, self.failed = {}, None, None
        try:
            first = self._receive()
        except ProgramGone as gone:
            self.failed = gone  # it never got to its first reply; the caller says so, printed() still works
            return
        self.names = first.get("names") or {}
        self.error = first.get("error")

    def call(self, name, args=(), kwargs=None):
        if self.gone:
            raise ProgramGone(self.gone)  # already said what happened
        try:
            request = {
                "call": name,
                "args": codec.encode(list(args)),
                "kwargs": codec.encode(dict(kwargs or {})),
            }
        except codec.NotPlain as problem:
            raise CannotCross(f"{name}() was passed {problem}") from None
        request["t"] = self.token
        self.channel.send(request)
        reply = self._receive()
        if "tampering" in reply:
            self.channel.flag(reply["tampering"])
        if "raised" in reply:
            raise _exception(*reply["raised"])
        if "not_plain" in reply:
            if "tampering" in reply:
                raise TypeError(f"{name}() returned {reply['not_plain']}")
            raise CannotCross(f"{name}() returned {reply['not_plain']}")
        try:
            return codec.decode(reply["value"])
        except (KeyError, TypeError, ValueError, RecursionError):
            self.channel.flag("forged a message to the judge")
            raise ProgramGone("sent a reply that was not a plain value") from None

    def run_test(self, source):
        """Run an assert script in the runner, next to the program (the hardened, weaker form); (ok, error)."""
        if self.gone:
            raise ProgramGone(self.gone)
        self.channel.send({"test": strict_asserts(source), "t": self.token})
        reply = self._receive()
        if reply.get("passed") is True:
            return True, None
        return False, str(reply.get("error") or "the test failed")[:300]

    def finish(self):
        """Ask the runner what the program rebound in the judge's modules; the runner then exits."""
        if self.gone:
            return
        self.channel.send({"finish": True, "t": self.token})
        try:
            reply = self._receive()
        except ProgramGone:
            return
        for name in reply.get("changed") or []:
            self.channel.flag(f"patching {name}")

    def printed(self):
        """What the program printed (its end), once its runner exited; "" when the zygote became it."""
        if not self.last and self.token not in self.channel.printed:
            # A runner killed at its deadline is reported by the zygote a moment later.
            grace = max(self.deadline, time.monotonic() + 0.2)
            try:
                while True:
                    self.channel.receive(self.token, grace)
            except ProgramGone:
                pass
        return self.channel.printed.pop(self.token, "")

    def wiped(self):
        """True once the zygote reported /tmp emptied after this runner exited (asked for with `wipe`)."""
        return self.token in self.channel.wiped

    def _receive(self):
        try:
            return self.channel.receive(self.token, self.deadline)
        except ProgramGone as gone:
            self.gone = str(gone)
            started = self.channel.started.get(self.token)
            for pid in [started] if started else self.channel.runner_pids():
                _kill_group(pid)
                _kill(pid)  # one that left its group
            raise


def _compiled_program(program, bind):
    """The program's code object, marshalled (hex), or None when it does not compile here (its runner then
    compiles it and reports why, as it would have). Compiling runs none of the program's code, so the judge may
    do it: a fresh runner then only loads the code, and copies fewer of the zygote's pages than compiling
    (parsing, the syntax tree, the compiler's tables) would."""
    import marshal

    try:
        return marshal.dumps(runner.compile_program(program, bind_result=bind)).hex()
    except (SyntaxError, ValueError, OverflowError, RecursionError, MemoryError):
        return None


def _exception(type_name, message):
    """The program's exception as the test sees it: the builtin class of that name when there is one, with the
    program's message (runner.describe's, less the class name it starts with)."""
    import builtins

    kind = getattr(builtins, str(type_name), None)
    if isinstance(kind, type) and issubclass(kind, Exception) and not issubclass(kind, (SystemExit,)):
        text = str(message)
        try:
            if text == type_name:
                return kind()
            return kind(text.removeprefix(f"{type_name}: "))
        except Exception:  # noqa: BLE001 - a builtin exception that wants other arguments
            pass
    return RuntimeError(f"the program raised {message}")


class RemoteFunction:
    """Stands for a function of the program in a test: calls it in the runner, returns a plain value."""

    def __init__(self, session, name):
        self._session = session
        self._name = name
        self.__name__ = name

    def __call__(self, *args, **kwargs):
        return self._session.call(self._name, args, kwargs)

    def __repr__(self):
        return f"<function {self._name} of the program>"


class CannotCross(BaseException):
    """A test needs the program's objects (a class, a generator, a function as an argument): it is run in the
    runner instead. A BaseException, so that a test's own `except Exception` cannot swallow it."""


class RemoteOnly:
    """A name the program defined that cannot cross to the test (a class, an object): any use says why."""

    def __init__(self, name, kind):
        self._what = f"{name} is a {kind} of the program"

    def __getattr__(self, name):
        raise CannotCross(self._what)

    def __call__(self, *args, **kwargs):
        raise CannotCross(self._what)


# --- python_tests ----------------------------------------------------------------------------------------


def run_test_batch(payload, channel):
    """payload: {"samples": [{"program", "tests"}], "time_s" (each sample's), "io_compare", "float_tolerance"}:
    run_tests for each sample in turn, each in runners of its own. Report: {"results": [run_tests' report with
    "tampering" and "printed"]}. Batching spreads the cost of starting the judge over several checks."""
    results = []
    samples = payload["samples"]
    for sample in samples:
        deadline = time.monotonic() + float(payload["time_s"]) - MARGIN_S
        before = len(channel.tampering)
        # A lone sample's runner may be the zygote itself; in a batch each runner's prints are kept apart
        # (so that one sample's flood of output cannot end the run for the others).
        more = len(results) + 1 < len(samples)
        report = run_tests({**payload, **sample}, channel, deadline, last=len(samples) == 1, wipe=more)
        wiped = report.pop("wiped", False)
        report["tampering"] = channel.tampering[before:]
        del channel.tampering[before:]
        results.append(report)
        # Between samples, and after a native one's last (its folder goes: a judge run unsandboxed leaves
        # nothing behind). A lone Python sample's zygote became its runner, and is gone. The zygote usually
        # emptied /tmp already, when the sample's runner exited.
        if wiped:
            continue
        if (more and len(samples) > 1) or payload.get("language", "python") != "python":
            if not _wiped(channel) and more:
                # The sample killed or stopped the zygote, or left /tmp unclean: the samples after it are not
                # judged here (the verifier judges them in runs of their own).
                break
    return {"results": results}


def _wiped(channel):
    """After a sample of a batch: the zygote, still answering, has emptied /tmp and killed what was left."""
    token = os.urandom(16).hex()
    try:
        channel.send({"mode": "wipe", "t": token})
        return channel.receive(token, time.monotonic() + WIPE_S).get("wiped") is True
    except ProgramGone:
        return False


def run_tests(payload, channel, deadline, *, last=True, wipe=False):
    """payload: {"program", "tests": [test, ...], "io_compare", "float_tolerance"}; a test is
    {"kind": "assert", "source"} | {"kind": "call", "fn", "args", "kwargs", "expected"} |
    {"kind": "io", "stdin", "stdout"}. Report: {"passed": [bool], "errors": [str | None], "program_error"}."""
    if payload.get("language", "python") != "python":
        return run_native_tests(payload, channel, deadline)
    tests = payload["tests"]
    passed, errors = [], []
    session = namespace = None
    program_error = None
    if any(test["kind"] != "io" for test in tests):
        only_runner = last and all(test["kind"] != "io" for test in tests)
        try:
            session = Session(
                channel,
                payload["program"],
                deadline,
                last=only_runner,
                bind=payload.get("bind", True),
                wipe=wipe,
            )
        except ProgramGone as gone:  # the zygote is gone
            program_error = f"{gone}, before its tests ran"
        else:
            gone = session.failed
            if gone is not None:
                program_error = f"{gone.what} before its tests ran" + (
                    f" ({gone.status})" if gone.status else ""
                )
            else:
                program_error = f"raised {session.error}" if session.error else None
                namespace = _test_namespace(session)
    crossed = True  # False once an assert script needed the program's objects
    for index, test in enumerate(tests):
        if test["kind"] != "io" and program_error is not None:
            ok, error = False, "not run: the program failed"
        elif time.monotonic() >= deadline:
            ok, error = False, "not run: time ran out"
        elif test["kind"] == "io":
            ok, error = _io_test(test, payload, channel, deadline)
        elif test["kind"] == "call":
            ok, error = _call_test(test, session, payload)
        elif crossed:
            try:
                ok, error = _assert_test(test["source"], index, namespace)
            except CannotCross:
                crossed, ok, error = False, False, None
        else:
            ok, error = False, None
        passed.append(ok)
        errors.append(error)
    if not crossed and payload.get("preload"):
        # A python-science runner holds numpy's ctypes (raw memory): its own verdict on a test is not taken.
        for index, test in enumerate(tests):
            if test["kind"] == "assert":
                passed[index] = False
                errors[index] = "the test needs the program's objects; return plain values or numpy arrays"
    elif not crossed:
        _assert_tests_in_runner(payload["tests"], session, passed, errors)
    printed, wiped = "", False
    if session is not None:
        session.finish()
        printed = session.printed()
        wiped = session.wiped()
    report = {"passed": passed, "errors": errors, "program_error": program_error, "printed": printed}
    if wipe:
        report["wiped"] = wiped  # run_test_batch's to read: /tmp is empty for the next sample
    return report


def _assert_tests_in_runner(tests, session, passed, errors):
    """Every assert script of the row again, in the runner next to the program (so they share its classes
    and objects), each rewritten so that an object claiming to equal anything fails it. The program's state
    is as the judge's calls left it: a test that needed its objects usually failed on the first of them."""
    for index, test in enumerate(tests):
        if test["kind"] != "assert":
            continue
        try:
            passed[index], errors[index] = session.run_test(test["source"])
        except ProgramGone as gone:
            passed[index], errors[index] = False, f"the program {gone}"


def strict_asserts(source):
    """`source` with every operand of ==, !=, in and not in, and every asserted value, passed through
    __anneal_plain__ (the runner's check that the value does not claim to equal anything)."""
    import ast

    class Strict(ast.NodeTransformer):
        def visit_Compare(self, node):  # noqa: N802 - ast's name
            self.generic_visit(node)
            if any(isinstance(op, (ast.Eq, ast.NotEq, ast.In, ast.NotIn)) for op in node.ops):
                node.left = _checked(node.left)
                node.comparators = [_checked(item) for item in node.comparators]
            return node

        def visit_Assert(self, node):  # noqa: N802
            self.generic_visit(node)
            node.test = _checked(node.test)
            return node

    try:
        tree = Strict().visit(ast.parse(source))
    except SyntaxError:
        return source  # the runner reports the syntax error as the test's failure
    return ast.unparse(ast.fix_missing_locations(tree))


def _checked(node):
    import ast

    return ast.Call(func=ast.Name(id="__anneal_plain__", ctx=ast.Load()), args=[node], keywords=[])


def _test_namespace(session):
    """The tests' globals: the program's functions as stand-ins and its plain values. A name of a builtin
    stays the builtin: a program's `def abs(x): return 0` must not decide `assert abs(f(x) - y) < 1e-6`."""
    import builtins

    namespace = {"__name__": "__main__"}
    for name, entry in session.names.items():
        if hasattr(builtins, name):
            continue
        kind = entry.get("kind")
        if kind == "function":
            namespace[name] = RemoteFunction(session, name)
        elif kind == "value":
            try:
                namespace[name] = codec.decode(entry.get("value"))
            except (TypeError, ValueError, RecursionError):
                namespace[name] = RemoteOnly(name, "value")
        elif kind == "module" and entry.get("name") in sys.stdlib_module_names:
            namespace[name] = __import__(entry["name"])
        else:
            namespace[name] = RemoteOnly(name, "class" if kind == "class" else "object")
    return namespace


def _assert_test(source, index, namespace):
    try:
        exec(_compiled_test(source, index), namespace)
    except ProgramGone as gone:
        return False, f"the program {gone}"
    except CannotCross:
        raise
    except BaseException as exc:  # noqa: BLE001 - a failing test, whatever it raised
        return False, runner.describe(exc)
    return True, None


def _compiled_test(source, index):
    """The test's code object, compiled once per run: a batch often holds one row's tests many times (a
    group's completions of one prompt). Code objects are immutable, so sharing one across samples shares
    nothing else; each sample's test still runs in a namespace of its own."""
    key = (source, index)
    code = COMPILED_TESTS.get(key)
    if code is None:
        if len(COMPILED_TESTS) >= COMPILED_TESTS_KEPT:
            COMPILED_TESTS.clear()
        code = COMPILED_TESTS[key] = compile(source, f"<test {index + 1}>", "exec")
    return code


def _call_test(test, session, payload):
    shown = f"{test['fn']}({_short(test['args'], 60)[1:-1]})"
    try:
        value = session.call(test["fn"], test["args"], test.get("kwargs") or {})
    except ProgramGone as gone:
        return False, f"{shown}: the program {gone}"
    except BaseException as exc:  # noqa: BLE001
        return False, f"{shown} raised {runner.describe(exc)}"
    actual = as_json(value)
    if same(actual, test["expected"], payload.get("float_tolerance", 1e-6)):
        return True, None
    return False, f"{shown} returned {_short(actual)}, expected {_short(test['expected'])}"


def _io_test(test, payload, channel, deadline):
    token = os.urandom(16).hex()
    remaining = max(deadline - time.monotonic(), 0.05)
    job = {
        "mode": "io",
        "t": token,
        "program": payload["program"],
        "stdin": test["stdin"],
        "time_s": remaining,
    }
    try:
        channel.send(job)
        result = channel.receive(token, deadline + MARGIN_S / 2)["io"]
    except (ProgramGone, KeyError, TypeError):
        return False, "time ran out"
    for what in result.get("tampering") or []:
        channel.flag(what)
    return _io_verdict(result, test, payload)


def _io_verdict(result, test, payload):
    """(ok, error) of an io test from what the program did: {"stdout", "stderr", "timed_out", "flooded",
    "exit"}."""
    if result.get("timed_out"):
        return False, "time ran out"
    if result.get("flooded"):
        return False, f"output passed {OUTPUT_CAP} bytes"
    if result.get("exit") != "exit code 0":
        # Node.js follows the line that names the error with a stack and its own version.
        lines = [line.strip() for line in (result.get("stderr") or "").splitlines() if line.strip()]
        named = [line for line in lines if ERROR_LINE.match(line)] or lines or [""]
        return False, f"the program failed ({result.get('exit')}) {named[-1][:200]}".strip()
    if outputs_match(result.get("stdout", ""), test["stdout"], payload.get("io_compare", "lines")):
        return True, None
    return False, f"wrong output: got {_short(result.get('stdout', ''))}, expected {_short(test['stdout'])}"


# --- code_tests: C, C++ and JavaScript (native.py) --------------------------------------------------------


def run_native_tests(payload, channel, deadline):
    """payload: {"language": "c" | "cpp" | "javascript", "program", "tests" (io, and call for javascript),
    "io_compare", "float_tolerance"}: the program is built once (a compiler's error is the program's error),
    then every io test runs the built program afresh and the calls share one run of the call driver. The
    same report as run_tests."""
    language = native.LANGUAGES[payload["language"]]
    tests = payload["tests"]
    folder = f"{native.TMP}/sample-{os.urandom(8).hex()}"
    files = {language["source"]: payload["program"]}
    program_error = None
    if language["build"] is not None:
        built = _exec(channel, folder, language["build"], "", deadline, files=files)
        files = {}
        if built is None or built.get("timed_out"):
            program_error = "ran past its time limit while compiling"
        elif built.get("exit") != "exit code 0":
            program_error = "did not compile: " + _compiler_error(built.get("stderr", ""))
    calls = [test for test in tests if test["kind"] == "call"]
    replies = {}
    if calls and program_error is None:
        driver = {
            **files,
            "anneal_calls.js": native.CALL_DRIVER,
            "anneal_calls.json": native.calls_file(calls),
        }
        files = {}
        ran = _exec(channel, folder, ["/usr/bin/node", "anneal_calls.js"], "", deadline, files=driver,
                    replies=True)  # fmt: skip
        replies, program_error = _call_replies(ran, len(calls))
    passed, errors = [], []
    call_index = 0
    for test in tests:
        if program_error is not None:
            ok, error = False, "not run: the program failed"
        elif test["kind"] == "call":
            ok, error = _native_call_verdict(test, replies.get(call_index), payload)
            call_index += 1
        elif time.monotonic() >= deadline:
            ok, error = False, "not run: time ran out"
        else:
            ran = _exec(channel, folder, language["run"], test["stdin"], deadline, files=files)
            files = {}
            ok, error = (False, "time ran out") if ran is None else _io_verdict(ran, test, payload)
        passed.append(ok)
        errors.append(error)
    return {"passed": passed, "errors": errors, "program_error": program_error, "printed": ""}


def _exec(channel, folder, argv, stdin, deadline, *, files, replies=False):
    """Run `argv` in the sample's folder through the zygote; its result (native.run_exec), None when the
    zygote did not answer in time."""
    token = os.urandom(16).hex()
    job = {"mode": "exec", "t": token, "dir": folder, "files": files, "argv": argv, "stdin": stdin,
           "time_s": max(deadline - time.monotonic(), 0.05), "replies": replies}  # fmt: skip
    try:
        channel.send(job)
        result = channel.receive(token, deadline + MARGIN_S / 2)["io"]
    except (ProgramGone, KeyError, TypeError):
        return None
    return result if isinstance(result, dict) else None


def _compiler_error(stderr):
    """The compiler's (or linker's) first error, without the file and line prefix; else its last line."""
    lines = [line.strip() for line in stderr.splitlines() if line.strip()]
    errors = [line for line in lines if ": error:" in line or "undefined reference" in line]
    first = errors[0] if errors else (lines[-1] if lines else "no message")
    if ": error:" in first:
        first = "error:" + first.split(": error:", 1)[1]
    elif "undefined reference" in first:
        first = "undefined reference" + first.split("undefined reference", 1)[1]
    return first[:300]


def _call_replies(ran, count):
    """({call index: reply}, program_error) from the call driver's run."""
    if ran is None or ran.get("timed_out"):
        return {}, "ran past its time limit"
    replies = {}
    for line in (ran.get("replies") or "").splitlines():
        try:
            message = json.loads(line)
        except (ValueError, RecursionError):
            continue
        if not isinstance(message, dict):
            continue
        if "error" in message and not replies:
            return {}, f"raised {str(message['error'])[:300]}"
        index = message.get("i")
        if type(index) is int and 0 <= index < count and index not in replies:
            replies[index] = message  # the first reply for a call counts: all are the program's own claims
    if not replies and ran.get("exit") != "exit code 0":
        tail = (ran.get("stderr") or "").strip().splitlines()[-1:] or [""]
        return {}, f"failed ({ran.get('exit')}) {tail[0][:200]}".strip()
    return replies, None


def _native_call_verdict(test, reply, payload):
    shown = f"{test['fn']}({_short(test['args'], 60)[1:-1]})"
    if reply is None:
        return False, f"{shown}: the program ended before it returned"
    if reply.get("missing"):
        return False, f"{shown}: the program defines no function {test['fn']}"
    if "raised" in reply:
        return False, f"{shown} threw {_short(str(reply['raised']))}"
    if "value" not in reply:
        return False, f"{shown} returned a {reply.get('not_plain', 'value')} that is not JSON"
    if same(reply["value"], test["expected"], payload.get("float_tolerance", 1e-6)):
        return True, None
    return False, f"{shown} returned {_short(reply['value'])}, expected {_short(test['expected'])}"


def outputs_match(actual, expected, how, tolerance=1e-6):
    """exact; lines: trailing spaces of each line and trailing blank lines ignored; tokens: any whitespace,
    numbers within `tolerance`."""
    if how == "exact":
        return actual == expected
    if how == "tokens":
        got, want = actual.split(), expected.split()
        return len(got) == len(want) and all(
            _token_equal(a, b, tolerance) for a, b in zip(got, want, strict=False)
        )
    return _lines(actual) == _lines(expected)


def _lines(text):
    lines = [line.rstrip() for line in text.replace("\r\n", "\n").split("\n")]
    while lines and not lines[-1]:
        lines.pop()
    return lines


def _token_equal(got, want, tolerance):
    if got == want:
        return True
    try:
        a, b = float(got), float(want)
    except ValueError:
        return False
    return math.isclose(a, b, rel_tol=tolerance, abs_tol=tolerance)


def as_json(value):
    """What a JSON round trip makes of a plain value: tuples and sets as lists, dict keys as strings."""
    kind = type(value)
    if kind in (list, tuple):
        return [as_json(item) for item in value]
    if kind in (set, frozenset):
        items = [as_json(item) for item in value]
        try:
            return sorted(items)
        except TypeError:
            return items
    if kind is dict:
        return {_json_key(key): as_json(item) for key, item in value.items()}
    if kind in (bytes, complex):
        return repr(value)
    return value


def _json_key(key):
    if type(key) is bool:
        return "true" if key else "false"
    return "null" if key is None else str(key)


def same(actual, expected, tolerance):
    """Equal as JSON values, floats within `tolerance` (relative or absolute); a bool is never a number."""
    if type(expected) is bool or type(actual) is bool:
        return type(actual) is type(expected) and actual == expected
    if type(expected) in (int, float) and type(actual) in (int, float):
        if type(expected) is int and type(actual) is int:
            return actual == expected
        return math.isclose(actual, expected, rel_tol=tolerance, abs_tol=tolerance)
    if type(expected) is list and type(actual) is list:
        return len(actual) == len(expected) and all(
            same(a, e, tolerance) for a, e in zip(actual, expected, strict=False)
        )
    if type(expected) is dict and type(actual) is dict:
        return actual.keys() == expected.keys() and all(
            same(actual[k], expected[k], tolerance) for k in expected
        )
    return type(actual) is type(expected) and actual == expected


def _short(value, limit=120):
    text = value if isinstance(value, str) else json.dumps(value)
    text = repr(text) if isinstance(value, str) else text
    return text if len(text) <= limit else text[: limit - 3] + "..."


# --- agent episodes: a repository's unittest modules ------------------------------------------------------


def run_unittest_files(payload, channel, deadline):
    """payload: {"files": [test module paths]}. Report: {"passed": [test ids], "ran", "error"}."""
    token = os.urandom(16).hex()
    try:
        channel.started[token] = channel.zygote_pid
        channel.send({"mode": "unittest", "t": token, "files": payload["files"], "last": True})
        reply = channel.receive(token, deadline)
    except ProgramGone as gone:
        return {"passed": [], "ran": 0, "error": f"the test run {gone}"}
    for name in reply.get("changed") or []:
        channel.flag(f"patching {name}")
    for test_id in reply.get("replaced") or []:
        channel.flag(f"replacing the test {test_id}")
    passed = reply.get("passed")
    if not isinstance(passed, list) or not all(isinstance(test_id, str) for test_id in passed):
        channel.flag("forged a message to the judge")
        passed = []
    return {"passed": passed, "ran": reply.get("ran"), "error": None}


# --- custom_python ---------------------------------------------------------------------------------------


def run_custom(payload, channel, deadline):
    """payload: {"code", "samples": [{"row", "completion"}]}: score(row, completion) of the user's code, each
    sample in a fresh runner. Report: {"results": [{"score", "reason", "tampering"}]}."""
    results = []
    for sample in payload["samples"]:
        before = len(channel.tampering)
        entry = _custom_one(payload["code"], sample, channel, deadline)
        caught = channel.tampering[before:]
        del channel.tampering[before:]
        if caught:
            entry = {"score": 0.0, "reason": "", "tampering": caught}
        results.append(entry)
    return {"results": results}


def _custom_one(code, sample, channel, deadline):
    if time.monotonic() >= deadline:
        return {"score": None, "reason": "not run: time ran out"}
    try:
        session = Session(channel, code, deadline, helpers=True)
    except ProgramGone as gone:  # the zygote is gone
        return {"score": None, "reason": f"the verifier code {gone}"}
    if session.failed is not None:
        return {"score": None, "reason": f"the verifier code {session.failed}"}
    if session.error:
        session.finish()
        return {"score": None, "reason": "the verifier code failed: " + session.error}
    if session.names.get("score", {}).get("kind") != "function":
        session.finish()
        return {
            "score": None,
            "reason": "the verifier code failed: it must define a function score(row, completion)",
        }
    try:
        value = session.call("score", (sample["row"], sample["completion"]))
    except ProgramGone as gone:
        timeout = "timeout: " if gone.what == "ran past its time limit" else ""
        return {"score": None, "reason": f"{timeout}score() {gone}"}
    except BaseException as exc:  # noqa: BLE001
        session.finish()
        return {"score": None, "reason": "score() raised " + runner.describe(exc)}
    session.finish()
    score, reason = _as_score(value)
    return {"score": score, "reason": reason}


def _as_score(value):
    """(score, reason) from what score() returned: a number, (number, reason) or {"score", "reason"}."""
    reason = ""
    if isinstance(value, dict):
        value, reason = value.get("score"), str(value.get("reason", ""))
    elif isinstance(value, (tuple, list)) and len(value) == 2:
        value, reason = value[0], str(value[1])
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        return None, f"score() returned {type(value).__name__} {str(value)[:60]}, not a finite number"
    return float(value), reason[:300]


if __name__ == "__main__":
    main()
