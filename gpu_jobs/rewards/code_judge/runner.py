"""The untrusted side of a code check (sent as runner.py; standard library only).

Runs in a process the judge's zygote forks, which holds no report channel, no nonce and no expected value:
only a request pipe from the judge and a reply pipe to it. Whatever the program does here, the judge (another,
non-dumpable process) decides from plain values alone. Two ways to run a program:

- `serve`: run it once as module `solution`, list what it defined, then answer the judge's calls
  ({"call": name, "args", "kwargs"}) with plain values, until {"finish"}; every reply echoes the request's
  token, which lives only in this function's frame (the guard refuses the ways to read it).
- `run_main`: run it as `python main.py` would, on the stdin, stdout and stderr it was given (an io test).

Just past 400 lines: the serve loop, the unittest run and run_program/run_function share the guard's set-up
and the reply encoding, and stay beside them.
"""

import ast
import builtins
import os
import select
import signal
import sys
import time
import types

import codec
import guard

PROGRAM_FILE = "<program>"
TAMPER_FD = 3  # run_main: where the guard writes what it refused, one line each
READ_CHUNK = 1 << 16
MAX_MESSAGE = 64 << 20
PREPARED = None  # prepared()'s (send, report, snapshot, arm) from the zygote; serve() takes it once


def compile_program(source, *, bind_result=True):
    """The program, with the value of its last statement bound to `result` when that is an expression.
    `bind_result=False` (the verifier found no such statement): compiled as it is, without building its tree
    (a fresh runner pays for each object it makes in pages copied from the zygote)."""
    if not bind_result:
        return compile(source, PROGRAM_FILE, "exec", dont_inherit=True)
    tree = ast.parse(source, filename=PROGRAM_FILE)
    if tree.body and isinstance(tree.body[-1], ast.Expr):
        last = tree.body[-1]
        tree.body[-1] = ast.copy_location(
            ast.Assign(targets=[ast.Name(id="result", ctx=ast.Store())], value=last.value), last
        )
        ast.fix_missing_locations(tree)
    return compile(tree, PROGRAM_FILE, "exec")


def describe(exc):
    try:
        text = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
    except BaseException:  # noqa: BLE001 - a hostile __str__
        text = type(exc).__name__
    return text[:300]


def serve(job, job_r, out_w, protected_files):
    """Run `job["program"]` and answer calls on the pipes until told to finish. Never returns."""
    global PREPARED
    token = job["t"]
    encode = codec.encode
    decode = codec.decode
    loads = __import__("json").loads
    not_plain = codec.NotPlain
    send, report, taken, arm = PREPARED or prepared(out_w, protected_files)
    PREPARED = None  # held in locals only from here: the program cannot reach the snapshot to rewrite it
    arm()  # the guard's hook, added in the zygote, watches from here on
    namespace = {"__name__": "solution", "__builtins__": builtins}
    if job.get("helpers"):
        namespace["run_program"] = run_program
        namespace["run_function"] = run_function
    error = None
    try:
        if "code" in job:  # compiled by the judge (judge._compiled_program)
            code = __import__("marshal").loads(bytes.fromhex(job["code"]))
        else:
            code = compile_program(job["program"], bind_result=job.get("bind", True))
        exec(code, namespace)
    except BaseException as exc:  # noqa: BLE001 - SystemExit too: a program that exits must not pass
        error = describe(exc)
    send({"t": token, "names": _names(namespace, report), "error": error})
    tests_namespace = None

    def plain_check(value):
        items = list(value) if type(value) in (list, tuple, set, frozenset) else []
        for item in [value, *items[:1000]]:
            if _claims_any_equality(item):
                report("compared an object that claims to equal anything")
                raise AssertionError("tampering: an object that claims to equal anything")
        return value

    pending = b""
    while True:
        line, pending = _read_line(job_r, pending)
        if line is None:
            os._exit(0)
        try:
            request = loads(line)
        except ValueError:
            continue
        if not isinstance(request, dict) or request.get("t") != token:
            continue
        if request.get("finish"):
            send({"t": token, "changed": guard.changed_globals(taken)})
            os._exit(0)
        if "test" in request:
            if tests_namespace is None:
                # The tests' own globals: the program's functions keep theirs, so they cannot reach the
                # test's (or rebind __anneal_plain__ under it).
                tests_namespace = dict(namespace, __anneal_plain__=plain_check)
            send({"t": token, **run_test(request["test"], tests_namespace)})
            continue
        reply = {"t": token}
        try:
            function = namespace.get(request["call"])
            args = decode(request.get("args") or [])
            kwargs = decode(request.get("kwargs") or {})
            value = function(*args, **kwargs)
        except BaseException as exc:  # noqa: BLE001 - the program's exception, reported as data
            reply["raised"] = [type(exc).__name__, describe(exc)]
        else:
            try:
                reply["value"] = encode(value)
            except not_plain as problem:
                reply["not_plain"] = str(problem)
                if _claims_any_equality(problem.value):
                    reply["tampering"] = "returned an object that claims to equal anything"
            except RecursionError:
                reply["not_plain"] = "a value nested too deep"
        send(reply)


def prepare(out_w, protected_files):
    """In the zygote, before it forks the first runner that serves a program: what serve() sets up before it
    runs one, done once (unittest's strict asserts, the snapshot of the watched modules, the guard's hook,
    idle until a runner arms it), so each runner inherits it instead of copying the pages that doing it
    dirties. The zygote never runs model code, so what it snapshots is what every runner starts from."""
    global PREPARED
    PREPARED = prepared(out_w, protected_files)


def prepared(out_w, protected_files):
    """(send, report, snapshot, arm) for a runner replying on `out_w`: arm() starts the guard."""
    send, report = _replies(out_w)
    _strict_equality(unittest_case(), report)  # for assert scripts run here that use unittest's asserts
    taken = guard.snapshot()
    return send, report, taken, guard.install(report, protected_files=protected_files, armed=False)


def run_unittest(job, out_w, protected_files):
    """Run the repository's unittest modules `job["files"]` from the working directory and reply with the
    ids of the tests that passed. Never returns.

    The test files were restored by the caller; their code is trusted, the repository's is not. The working
    directory goes last on sys.path, so a repository module cannot stand in for a standard-library one, and a
    test passes only if its method is still the test file's own code.
    """
    token = job["t"]
    workdir = os.getcwd()
    paths = [os.path.join(workdir, name) for name in job["files"]]
    names = [name[:-3].replace("/", ".") for name in job["files"] if name.endswith(".py")]
    send, report = _replies(out_w)

    import unittest

    class Result(unittest.TextTestResult):
        def addSuccess(self, test):  # noqa: N802 - unittest's name
            super().addSuccess(test)
            self.passed_tests.append(test)

    result_methods = dict(vars(Result))  # reachable through TextTestResult.__subclasses__(): checked after
    _strict_equality(unittest.TestCase, report)
    guard.install(report, protected_files=(*protected_files, *paths), protected_modules=names)
    taken = guard.snapshot()
    sys.path.append(workdir)
    result = Result(unittest.runner._WritelnDecorator(sys.stderr), True, 1)
    result.passed_tests = []
    try:
        suite = unittest.TestSuite(unittest.defaultTestLoader.loadTestsFromName(name) for name in names)
        suite.run(result)
        result.printErrors()
        print(f"\nRan {result.testsRun} tests: {len(result.passed_tests)} passed", file=sys.stderr)
    except BaseException as exc:  # noqa: BLE001 - the repository's code broke the run itself
        print(f"the test run failed: {describe(exc)}", file=sys.stderr)
    passed, replaced = [], []
    for test in result.passed_tests:
        method = getattr(type(test), getattr(test, "_testMethodName", ""), None)
        code = getattr(getattr(method, "__func__", method), "__code__", None)
        (passed if code is not None and code.co_filename in paths else replaced).append(test.id())
    changed = guard.changed_globals(taken)
    now = dict(vars(Result))
    if now.keys() != result_methods.keys() or any(now[key] is not result_methods[key] for key in now):
        changed.append("the judge's test result class")
    message = {"t": token, "passed": passed, "ran": result.testsRun, "changed": changed}
    message["replaced"] = replaced
    send(message)
    os._exit(0)


def _replies(out_w):
    """(send, report) for the reply pipe: send(message) writes one JSON line, report(what) a tampering line
    and never raises. Made before the program runs: they hold os.write and codec.dumps in closure cells,
    out of reach of a program that rebinds the modules' names."""
    write = os.write
    dumps = codec.dumps

    def send(message):
        data = (dumps(message) + "\n").encode()
        while data:
            data = data[write(out_w, data) :]

    def report(what):
        try:
            write(out_w, (dumps({"tampering": str(what)[:200]}) + "\n").encode())
        except BaseException:  # noqa: BLE001 - reporting must never break the refusal itself
            pass

    return send, report


def _strict_equality(case, report):
    """Make the equality assertions of `case` (unittest.TestCase) refuse an object that claims to equal
    anything, which would otherwise pass any assertEqual the tests make."""

    def strict(original):
        def check(self, first, second, *args, **kwargs):
            for value in (first, second):
                if _claims_any_equality(value):
                    report("compared an object that claims to equal anything")
                    raise self.failureException("tampering: an object that claims to equal anything")
            return original(self, first, second, *args, **kwargs)

        return check

    for name in ("assertEqual", "assertNotEqual", "assertIn", "assertNotIn", "assertCountEqual"):
        setattr(case, name, strict(getattr(case, name)))


def run_test(source, namespace):
    """An assert script run next to the program: {"passed": bool, "error": str | None}."""
    try:
        exec(compile(source, "<test>", "exec"), namespace)
    except BaseException as exc:  # noqa: BLE001 - a failing test, whatever it raised
        return {"passed": False, "error": describe(exc)}
    return {"passed": True, "error": None}


def unittest_case():
    import unittest

    return unittest.TestCase


def _claims_any_equality(value):
    """True when `value == <a brand-new object>` holds: no honest value equals an object it never saw."""

    class Stranger:
        pass

    try:
        return value is not None and (value == Stranger()) is True
    except BaseException:  # noqa: BLE001
        return False


def _names(namespace, report):
    """What the program defined, as the judge may use it: functions by name, plain values by value."""
    listed = {}
    for name, value in list(namespace.items()):
        if name.startswith("__") or name in ("run_program", "run_function"):
            continue
        if isinstance(value, types.ModuleType):
            module = getattr(value, "__name__", None)
            listed[name] = {"kind": "module", "name": module if type(module) is str else ""}
        elif isinstance(value, type):
            listed[name] = {"kind": "class"}
        elif callable(value):
            listed[name] = {"kind": "function"}
        else:
            try:
                listed[name] = {"kind": "value", "value": codec.encode(value)}
            except (codec.NotPlain, RecursionError):
                listed[name] = {"kind": "other"}
                if _claims_any_equality(value):
                    report(f"defined {name} as an object that claims to equal anything")
    return listed


def _read_line(fd, pending):
    while b"\n" not in pending:
        chunk = os.read(fd, READ_CHUNK)
        if not chunk or len(pending) > MAX_MESSAGE:
            return None, b""
        pending += chunk
    line, _, rest = pending.partition(b"\n")
    return line, rest


def run_main(program, protected_files):
    """Run `program` as __main__ on descriptors 0-2, as `python main.py` would; the exit code."""

    def report(what):
        try:
            os.write(TAMPER_FD, (str(what)[:200].replace("\n", " ") + "\n").encode())
        except BaseException:  # noqa: BLE001
            pass

    guard.install(report, protected_files=protected_files)
    module = types.ModuleType("__main__")
    module.__builtins__ = builtins
    sys.modules["__main__"] = module
    try:
        exec(compile(program, PROGRAM_FILE, "exec"), module.__dict__)
        code = 0
    except SystemExit as exc:
        code = _exit_code(exc)
    except BaseException as exc:  # noqa: BLE001
        # No traceback module here: it walks frames, which the guard counts as the program's reach.
        tb, line = exc.__traceback__, None
        while tb is not None:
            line, tb = tb.tb_lineno, tb.tb_next
        where = f"line {line}: " if line else ""
        _print_error(f"Traceback: {PROGRAM_FILE} {where}{describe(exc)}")
        code = 1
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    except BaseException:  # noqa: BLE001
        pass
    return code


def _exit_code(exc):
    if exc.code is None:
        return 0
    if type(exc.code) is int:
        return exc.code & 0xFF
    _print_error(str(exc.code))
    return 1


def _print_error(text):
    try:
        print(text, file=sys.stderr)
    except BaseException:  # noqa: BLE001
        pass


def run_program(code, stdin="", timeout_s=5.0):
    """For a custom verifier's score(): run `code` as a separate Python program and return what it did,
    {"stdout", "stderr", "exit_code", "timed_out"}. The program runs in its own process, with no way to the
    verifier's state or to the judge, so executing a completion this way cannot change the score."""
    if type(code) is not str or type(stdin) is not str:
        raise TypeError("run_program(code, stdin='') takes strings")
    pid, outputs = spawn_main(code, stdin, ())
    result = collect(outputs, time.monotonic() + float(timeout_s), 1 << 20)
    if result["timed_out"] or result["flooded"]:
        os.kill(pid, signal.SIGKILL)
    _, status = os.waitpid(pid, 0)
    return {
        "stdout": result["stdout"],
        "stderr": result["stderr"],
        "exit_code": os.waitstatus_to_exitcode(status),
        "timed_out": result["timed_out"],
    }


def run_function(code, name, *args, timeout_s=5.0, **kwargs):
    """For a custom verifier's score(): define `code` in a separate process, call its function `name` with
    plain arguments and return the plain value it returned (a copy: an object that claims to equal anything
    cannot come back). RuntimeError when it raised, exited, ran past `timeout_s` or returned something else."""
    if type(code) is not str or type(name) is not str:
        raise TypeError("run_function(code, name, *args) takes the code and the function's name as strings")
    call = codec.dumps(codec.encode([name, list(args), kwargs]))
    driver = (
        "import codec as _codec, sys as _sys\n"
        f"_name, _args, _kwargs = _codec.decode(_codec.json.loads({call!r}))\n"
        "exec(compile(_sys.stdin.read(), '<program>', 'exec'), _ns := {'__name__': 'solution'})\n"
        "_value = _ns[_name](*_args, **_kwargs)\n"
        "print('\\n' + _codec.dumps(_codec.encode(_value)))\n"
    )
    done = run_program(driver, code, timeout_s)
    if done["timed_out"]:
        raise RuntimeError(f"{name}() ran past {timeout_s:g} s")
    if done["exit_code"] != 0:
        tail = done["stderr"].strip().splitlines()[-1:] or ["no error printed"]
        raise RuntimeError(f"{name}() failed: {tail[0][:200]}")
    lines = done["stdout"].rstrip("\n").splitlines()
    try:
        return codec.decode(codec.json.loads(lines[-1]))
    except (IndexError, ValueError, TypeError, RecursionError):
        raise RuntimeError(f"{name}() did not return a plain value") from None


def spawn_main(program, stdin, protected_files, *, tamper=False):
    """Fork a process that runs `program` through run_main with `stdin`; (pid, {"stdout": fd, "stderr": fd
    [, "tampering": fd]}) with the read ends, which the caller closes (collect does)."""
    stdin_fd = os.memfd_create("stdin", 0)
    os.write(stdin_fd, stdin.encode())
    os.lseek(stdin_fd, 0, os.SEEK_SET)
    pipes = {name: os.pipe() for name in ("stdout", "stderr", *(("tampering",) if tamper else ()))}
    pid = os.fork()
    if pid == 0:
        os.setpgid(0, 0)
        os.dup2(stdin_fd, 0)
        os.dup2(pipes["stdout"][1], 1)
        os.dup2(pipes["stderr"][1], 2)
        if tamper:
            os.dup2(pipes["tampering"][1], TAMPER_FD)
        os.closerange(TAMPER_FD + 1 if tamper else 3, 1 << 16)
        sys.stdin = open(0, closefd=False, encoding="utf-8", errors="replace")
        sys.stdout = open(1, "w", closefd=False, encoding="utf-8", errors="replace", buffering=1)
        sys.stderr = open(2, "w", closefd=False, encoding="utf-8", errors="backslashreplace", buffering=1)
        os._exit(run_main(program, protected_files))
    os.close(stdin_fd)
    for _, write_end in pipes.values():
        os.close(write_end)
    return pid, {name: read_end for name, (read_end, _) in pipes.items()}


def collect(fds, deadline, cap):
    """Read every descriptor of `fds` ({name: fd}) until all close, `deadline` passes or one passes `cap`
    bytes; closes them. {name: text, "timed_out": bool, "flooded": bool}."""
    buffers = {fd: bytearray() for fd in fds.values()}
    open_fds = set(buffers)
    timed_out = flooded = False
    while open_fds and not flooded:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            timed_out = True
            break
        ready, _, _ = select.select(list(open_fds), [], [], remaining)
        for fd in ready:
            chunk = os.read(fd, READ_CHUNK)
            if not chunk:
                open_fds.discard(fd)
                continue
            buffers[fd] += chunk
            flooded = flooded or len(buffers[fd]) > cap
    for fd in buffers:
        os.close(fd)
    result = {name: bytes(buffers[fd][:cap]).decode(errors="replace") for name, fd in fds.items()}
    result.update(timed_out=timed_out, flooded=flooded)
    return result
