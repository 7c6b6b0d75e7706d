"""Tampering watch for the process that runs model-written code (sent as guard.py; standard library only).

The verdict never depends on this module: the judge decides in another process that the program cannot
reach. The guard is how a reach for the grader becomes a signal (`tampering: <what>`) instead of a silent
zero. `install(report)` adds a Python audit hook, which nothing can remove once added, and neutralises
signal handlers (a handler receives the interrupted frame, a way to other frames that no audit event sees).
Refused, and reported through `report(what)`:

- frame walking: sys._getframe, frame/traceback/generator frame attributes, unless the caller is
  standard-library code that uses frames for its own ends (warnings, logging, collections, typing, enum,
  unittest) or the judge's own; inspect and traceback act for whoever called them, who then decides;
- tracing and profiling hooks, sys._current_frames, scans of the garbage collector's objects;
- ctypes (raw memory), opening another process's or its own memory, descriptors or environment under /proc;
- compiling code under a standard-library or judge file name (to pass for trusted code);
- importing ctypes (raw memory): the modules are dropped from sys.modules first, so the import is seen;
- replacing a function's code, and installing a signal handler.
`changed_globals()` lists what was rebound in the watched modules and their classes (builtins.compile = ...,
unittest.TestCase.assertEqual = ...), which no audit event reports.
"""

import operator
import os
import re
import signal
import sys

STDLIB = os.path.realpath(os.path.dirname(os.__file__)) + os.sep
# Standard-library files whose use of frames stays inside them; inspect and traceback are left out on purpose.
# Folders of libraries a python-science run preloaded (judge.py, _preload): their own frame walking (pandas's
# stack levels and eval scopes, sympy's decorators) is theirs, as the standard library's FRAME_USERS are. Such a
# run takes no verdict from its runners (numpy holds ctypes there), so the guard is a second line only.
LIBRARY_FOLDERS = []
# collections.namedtuple sets __module__ on each class it makes, after type() made it one of collections': a
# program's namedtuple (or one the standard library makes on import, decimal's DecimalTuple) is not a patch.
NAMEDTUPLE_FILE = os.path.join(STDLIB, "collections", "__init__.py")
FRAME_USERS = tuple(
    STDLIB + name
    for name in (
        "warnings.py",
        "logging/__init__.py",
        "collections/__init__.py",
        "typing.py",
        "enum.py",
        "dataclasses.py",
        "functools.py",
        "abc.py",
        "unittest/",
        "doctest.py",
        "contextlib.py",
        "threading.py",
    )
)
PASS_THROUGH = {STDLIB + "inspect.py", STDLIB + "traceback.py"}
FRAME_ATTRIBUTES = {"tb_frame", "gi_frame", "cr_frame", "ag_frame", "f_code", "gi_code", "cr_code", "ag_code"}
ALWAYS_REFUSED = {
    "sys.settrace": "installing a trace function (frame walking)",
    "sys.setprofile": "installing a profile function (frame walking)",
    "sys._current_frames": "reading other threads' frames",
    "gc.get_objects": "scanning the interpreter's objects (gc.get_objects)",
    "gc.get_referrers": "scanning the interpreter's objects (gc.get_referrers)",
    "gc.get_referents": "scanning the interpreter's objects (gc.get_referents)",
}
RAW_MEMORY_MODULES = {"ctypes", "_ctypes", "_testcapi", "_testinternalcapi", "_testbuffer"}
PROC_SECRETS = re.compile(
    r"^/proc/(self|thread-self|\d+)(/task/\d+)?/(mem|maps|smaps|pagemap|environ|fd|fdinfo|syscall|stack|auxv)\b"
    r"|^/dev/(mem|kmem|port)$"
)
# Modules whose namespaces (and classes) are snapshotted: builtins, json and unittest, which forgers patch,
# and the runner's own. Kept short: the snapshot is taken and compared on every check.
WATCHED_MODULES = (
    "builtins", "json", "json.encoder", "json.decoder", "unittest", "unittest.case", "unittest.result",
    "codec", "guard", "runner",
)  # fmt: skip
WATCHED_CLASSES = {
    "json.encoder": ("JSONEncoder",),
    "json.decoder": ("JSONDecoder",),
    "unittest.case": ("TestCase",),
    "unittest.result": ("TestResult",),
}
SNAPSHOT_KINDS = (type(len), type(lambda: 0), type, type(os))


def install(report, *, protected_files=(), protected_modules=(), drop=None, armed=True):
    """Start watching. `report(what)` is called once per refused attempt; it must not raise.

    `drop`: the raw_memory_modules() to drop, when the caller listed them already (a zygote before forking).

    `armed=False` (a zygote, before it forks runners): the hook is added (and the modules dropped, and signal
    handlers taken away) but stays idle in this process, and the function returned arms it where it is
    called: in each runner, which so inherits all of it instead of doing it anew (each page a fresh runner
    writes is a page copied). A hook once added cannot be removed, and nothing a program can reach holds the
    function that arms it or the state it clears (both live in closures and the caller's locals), so a
    runner cannot disarm it.

    `protected_files`: file names (the judge's own) that count as trusted callers and must not be spoofed.
    `protected_modules`: module names (besides the standard library's) whose classes must not be patched.
    """
    protected_files = tuple(protected_files)
    protected_modules = frozenset(protected_modules) | {"codec", "guard", "runner"}
    getframe = sys._getframe
    realpath = os.path.realpath
    # Non-empty while the hook itself runs (its own sys._getframe must not recurse), and until arm().
    busy = [] if armed else [1]

    def refuse(what):
        report(what)
        raise PermissionError("tampering: " + what)

    def audited_frame():
        """The Python frame that made the audited call (None: none did), found from the hook's own frame, so
        whichever helper of the hook asks. Called with `busy` set: its own sys._getframe is not audited."""
        frame = getframe(1)
        while frame is not None and frame.f_code is not hook.__code__:
            frame = frame.f_back
        return frame.f_back if frame is not None else None

    def caller_file():
        busy.append(1)
        try:
            frame = audited_frame()
            # inspect and traceback act for whoever called them: that caller decides.
            while frame is not None and frame.f_code.co_filename in PASS_THROUGH:
                frame = frame.f_back
            return frame.f_code.co_filename if frame is not None else ""
        finally:
            busy.pop()

    def initialising_its_own(target):
        """The caller is a standard-library module's top-level code (the module is being imported, as a cold
        sandbox imports what the program asks for) setting up what it defines: typing's `io.__name__ = ...`."""
        busy.append(1)
        try:
            frame = audited_frame()
            if frame is None or frame.f_code.co_name != "<module>":
                return False
            if not frame.f_code.co_filename.startswith(STDLIB):
                return False
            return getattr(target, "__module__", None) == frame.f_globals.get("__name__")
        finally:
            busy.pop()

    frame_users = FRAME_USERS + tuple(LIBRARY_FOLDERS)

    def library_did_it():
        """The audited call is a preloaded library's doing: the nearest frame above the hook that is neither
        importlib's nor the standard library's is the library's own code (scipy importing ctypes, pybind11
        naming its types while scipy imports), not the program's."""
        if not LIBRARY_FOLDERS:
            return False
        busy.append(1)
        try:
            frame = audited_frame()
            while frame is not None:
                filename = frame.f_code.co_filename
                if filename.startswith(tuple(LIBRARY_FOLDERS)):
                    return True
                if not (filename.startswith("<frozen importlib") or filename.startswith(STDLIB)):
                    return False
                frame = frame.f_back
            return False
        finally:
            busy.pop()

    def trusted_caller():
        filename = caller_file()
        return filename in protected_files or filename.startswith(frame_users)

    def protected(target):
        module = getattr(target, "__module__", None) if isinstance(target, type) else None
        if module is None and callable(target) and not isinstance(target, type):
            module = getattr(target, "__module__", None)
        if type(module) is not str:
            return isinstance(target, type)
        top = module.split(".")[0]
        return module in protected_modules or top in protected_modules or top in sys.stdlib_module_names

    def hook(event, args):
        if busy:
            return
        if event in ALWAYS_REFUSED:
            refuse(ALWAYS_REFUSED[event])
        elif event == "sys._getframe":
            if not trusted_caller():
                refuse("walking the interpreter's frames (sys._getframe)")
        elif event == "object.__getattr__":
            if args[1] in FRAME_ATTRIBUTES and not trusted_caller():
                refuse(f"walking the interpreter's frames ({args[1]})")
        elif event.startswith("ctypes."):
            if not library_did_it():
                refuse(f"raw memory access through ctypes ({event})")
        elif event == "import":
            if args[0] in RAW_MEMORY_MODULES or str(args[0]).startswith("ctypes."):
                if not library_did_it():
                    refuse(f"raw memory access through {args[0]}")
        elif event == "open":
            path = args[0]
            if isinstance(path, bytes):
                path = path.decode(errors="replace")
            if isinstance(path, str):
                busy.append(1)
                try:
                    resolved = realpath(path)
                finally:
                    busy.pop()
                if PROC_SECRETS.match(resolved) or PROC_SECRETS.match(path):
                    refuse(f"reading process memory or descriptors ({path})")
        elif event == "compile":
            filename = args[1]
            if isinstance(filename, bytes):
                filename = filename.decode(errors="replace")
            if isinstance(filename, str) and (filename.startswith(STDLIB) or filename in protected_files):
                # The import system compiles a module under its own path: a protected file's real content.
                if not caller_file().startswith("<frozen importlib"):
                    refuse(f"compiling code under a trusted file name ({filename})")
        elif event in ("object.__setattr__", "object.__delattr__"):
            target, name = args[0], args[1]
            if name == "__module__" and event == "object.__setattr__" and caller_file() == NAMEDTUPLE_FILE:
                return  # namedtuple() naming the class it just made (type() made it a class of collections)
            if (isinstance(target, type) or callable(target)) and protected(target):
                if initialising_its_own(target) or library_did_it():
                    return
                owner = getattr(target, "__qualname__", type(target).__name__)
                refuse(f"patching {owner}.{name}")

    def no_signal_handlers(*args, **kwargs):
        refuse("installing a signal handler")

    # Imported ctypes modules are dropped, so that a program's import of them is seen (and refused).
    for name in raw_memory_modules() if drop is None else drop:
        sys.modules.pop(name, None)
    sys.addaudithook(hook)
    signal.signal = no_signal_handlers
    sys.modules["_signal"].signal = no_signal_handlers
    if armed:
        busy.clear()
        return None
    return busy.clear


def raw_memory_modules():
    """The imported modules that reach raw memory (ctypes and its submodules), which install() drops."""
    return [name for name in sys.modules if name in RAW_MEMORY_MODULES or name.startswith("ctypes.")]


def snapshot():
    """The watched modules' namespaces, and those of the classes they define, as they are now: each value
    by identity, in a dict that the program cannot reach (the caller keeps it in a local).

    With each, what `changed_globals` compares first: a getter of the watched keys and the values it gave.
    That comparison runs in C over the values alone (never their keys, never a Python loop), so a fresh
    runner copies few pages of the zygote's memory to make it."""
    taken = {}
    for name in WATCHED_MODULES:
        module = sys.modules.get(name)
        if module is None:
            continue
        namespace = dict(vars(module))
        keys = [key for key, value in namespace.items() if isinstance(value, SNAPSHOT_KINDS)]
        taken[name] = (namespace, namespace, _quick(keys, namespace))
        for key in WATCHED_CLASSES.get(name, ()):
            value = namespace.get(key)
            if isinstance(value, type):
                members = dict(vars(value))
                taken[f"{name}.{key}"] = (value, members, _quick(list(members), members))
    return taken


def _quick(keys, namespace):
    """(getter, values, count): getter(namespace) gives the values of `keys`, a tuple."""
    getter = operator.itemgetter(*keys) if len(keys) > 1 else (lambda mapping: (mapping[keys[0]],))
    return getter, getter(namespace) if keys else (), len(namespace)


def changed_globals(taken):
    """What was rebound, added to a class or deleted since `snapshot()`: ["builtins.compile", ...]."""
    if all(_unchanged(name, owner, quick) for name, (owner, _, quick) in taken.items()):
        return []
    changed = []
    for name, (owner, before, _) in taken.items():
        if isinstance(owner, dict):
            module = sys.modules.get(name)
            now = vars(module) if module is not None else {}
            keys = [key for key, value in before.items() if isinstance(value, SNAPSHOT_KINDS)]
        else:
            now = vars(owner)
            keys = set(before) | set(now)
        for key in keys:
            if now.get(key, changed) is not before.get(key, changed):
                changed.append(f"{name}.{key}")
    return changed


def _same(values, before):
    """Each value is the very object it was (never ==, which a replacement could answer with True)."""
    return len(values) == len(before) and all(map(operator.is_, values, before))


def _unchanged(name, owner, quick):
    """The quick check: every watched key still holds its value, and a class has no member more."""
    getter, values, count = quick
    try:
        if isinstance(owner, dict):
            module = sys.modules.get(name)
            return module is not None and (not values or _same(getter(vars(module)), values))
        now = vars(owner)
        return len(now) == count and _same(getter(now), values)
    except Exception:  # noqa: BLE001 - a key gone, or a hostile mapping: the full comparison says what
        return False
