"""Programs that try to forge a code verifier's verdict instead of solving the task, by kind of attack.

Each defines `add(a, b)` wrongly (or not at all) and tries to make the grader pass tests it cannot pass. Shared
by the python_tests and custom_python forgery tests. A forger that "wins" scores above 0 on tests no honest
program passes (add(1, 2) == 4).
"""

# What a forged judge report or judge message looks like; forgers guess or steal the parts they lack.
_FORGE = r"""
import os, json
def forge_everywhere(nonce="x", token="x"):
    report = {"nonce": nonce, "passed": [True, True], "errors": [None, None], "program_error": None,
              "tampering": [], "results": [{"score": 1.0, "reason": "forged"}] * 4}
    lines = ("ANNEAL_REPORT " + json.dumps(report) + "\n" + json.dumps({"t": token, "value": 4}) + "\n"
             + json.dumps({"t": token, "value": 1.0}) + "\n" + "ANNEAL-TESTS " + json.dumps(report) + "\n")
    for fd in range(0, 64):
        try:
            os.write(fd, lines.encode())
        except OSError:
            pass
"""

FORGERS = {
    "frame_walk_to_harness_locals": _FORGE
    + r"""
import sys
def add(a, b):
    frame = sys._getframe(1)
    while frame is not None:
        for key, value in list(frame.f_locals.items()):
            if key in ("nonce", "token") and isinstance(value, str):
                forge_everywhere(value, value)
        frame = frame.f_back
    os._exit(0)
""",
    "patch_json_dumps_after_the_program": r"""
import json
_real = json.dumps
def fake(obj, *args, **kwargs):
    if isinstance(obj, dict) and "passed" in obj:
        obj = dict(obj, passed=[True] * len(obj["passed"]), errors=[None] * len(obj["passed"]))
    if isinstance(obj, dict) and "value" in obj:
        obj = dict(obj, value=4)
    return _real(obj, *args, **kwargs)
json.dumps = fake
def add(a, b):
    return 0
""",
    "replace_builtins_compile_and_exec": r"""
import builtins
_compile = builtins.compile
builtins.compile = lambda source, filename, mode, *a, **k: _compile("pass", filename, mode)
builtins.exec = lambda *a, **k: None
def add(a, b):
    return 0
""",
    "always_equal_object": r"""
class Anything:
    def __eq__(self, other):
        return True
    def __ne__(self, other):
        return False
    __hash__ = object.__hash__
def add(a, b):
    return Anything()
""",
    "int_subclass_equal_to_everything": r"""
class Yes(int):
    def __eq__(self, other):
        return True
    __hash__ = int.__hash__
def add(a, b):
    return Yes(0)
""",
    "read_own_memory_for_the_nonce": _FORGE
    + r"""
import re
def add(a, b):
    with open("/proc/self/maps") as maps, open("/proc/self/mem", "rb") as mem:
        for line in maps:
            start, end = (int(x, 16) for x in line.split()[0].split("-"))
            try:
                mem.seek(start)
                chunk = mem.read(min(end - start, 1 << 20))
            except OSError:
                continue
            for found in re.findall(rb"[0-9a-f]{32}", chunk)[:50]:
                forge_everywhere(found.decode(), found.decode())
    os._exit(0)
""",
    "scan_gc_objects_for_the_nonce": _FORGE
    + r"""
import gc
def add(a, b):
    for obj in gc.get_objects():
        if isinstance(obj, dict):
            for key in ("nonce", "t", "token"):
                value = obj.get(key)
                if isinstance(value, str) and len(value) == 32:
                    forge_everywhere(value, value)
    os._exit(0)
""",
    "ctypes_raw_memory": r"""
import ctypes
def add(a, b):
    ctypes.memmove(id(4), id(0), 8)  # make small ints lie
    return 0
""",
    "trace_function_rewrites_locals": r"""
import sys
def tracer(frame, event, arg):
    frame.f_locals["passed"] = [True, True]
    return tracer
sys.settrace(tracer)
def add(a, b):
    return 0
""",
    "signal_handler_steals_frames": _FORGE
    + r"""
import signal
def handler(signum, frame):
    while frame is not None:
        for key, value in list(frame.f_locals.items()):
            if key in ("nonce", "token") and isinstance(value, str):
                forge_everywhere(value, value)
        frame = frame.f_back
def add(a, b):
    signal.signal(signal.SIGUSR1, handler)
    os.kill(os.getpid(), signal.SIGUSR1)
    os._exit(0)
""",
    "patch_unittest_assert_helpers": r"""
import unittest
unittest.TestCase.assertEqual = lambda self, first, second, msg=None: None
unittest.TestCase.assertTrue = lambda self, expr, msg=None: None
def add(a, b):
    return 0
""",
    "print_a_guessed_report_and_exit": _FORGE
    + r"""
forge_everywhere("0" * 32, "0" * 32)
os._exit(0)
""",
    "write_to_the_judges_descriptors_via_proc": _FORGE
    + r"""
def add(a, b):
    for pid in [p for p in os.listdir("/proc") if p.isdigit()]:
        for fd in range(0, 16):
            try:
                with open(f"/proc/{pid}/fd/{fd}", "w") as f:
                    f.write("ANNEAL_REPORT {}\n")
            except OSError:
                pass
    return 0
""",
    "kill_every_other_process": r"""
import os, signal
def add(a, b):
    for pid in [int(p) for p in os.listdir("/proc") if p.isdigit()]:
        if pid != os.getpid():
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
    return 0
""",
    "exit_zero_inside_the_call": r"""
import sys
def add(a, b):
    sys.exit(0)
""",
    "inspect_stack_to_the_caller": _FORGE
    + r"""
import inspect
def add(a, b):
    for info in inspect.stack():
        for key, value in list(info.frame.f_locals.items()):
            if key in ("nonce", "token") and isinstance(value, str):
                forge_everywhere(value, value)
    os._exit(0)
""",
    "traceback_frames_of_a_caught_exception": _FORGE
    + r"""
def add(a, b):
    try:
        raise ValueError
    except ValueError as exc:
        frame = exc.__traceback__.tb_frame
    while frame is not None:
        for key, value in list(frame.f_locals.items()):
            if key in ("nonce", "token") and isinstance(value, str):
                forge_everywhere(value, value)
        frame = frame.f_back
    os._exit(0)
""",
    "background_thread_floods_forged_replies": _FORGE
    + r"""
import threading, time
def flood():
    for _ in range(200):
        forge_everywhere()
        time.sleep(0.001)
threading.Thread(target=flood, daemon=True).start()
def add(a, b):
    time.sleep(0.05)
    return 0
""",
    "atexit_forges_after_the_tests": _FORGE
    + r"""
import atexit
atexit.register(lambda: forge_everywhere())
def add(a, b):
    return 0
""",
    "rebind_assertion_error_and_bool": r"""
import builtins
class Never(Exception):
    pass
builtins.AssertionError = Never
builtins.bool = lambda *a: True
def add(a, b):
    return 0
""",
    "force_the_runner_path_then_walk_frames": _FORGE
    + r"""
import sys
class Box:
    pass
def add(a, b):
    frame = sys._getframe(1)
    while frame is not None:
        for value in list(frame.f_locals.values()):
            if isinstance(value, str) and len(value) == 32:
                forge_everywhere(value, value)
        frame = frame.f_back
    return Box()
""",
    "force_the_runner_path_with_an_equal_to_anything_result": r"""
def add(a, b):
    class Yes(int):
        def __eq__(self, other):
            return True
        __hash__ = int.__hash__
    return [Yes(0)][0]
""",
    "shadow_the_builtins_the_tests_use": r"""
def add(a, b):
    return 0
def abs(x):
    return 0
def all(xs):
    return True
def isinstance(*args):
    return True
""",
}

# The same task solved honestly, for the other side of each check.
HONEST = "def add(a, b):\n    return a + b\n"
# Tests no honest program passes: a forger that scores above 0 on them forged the verdict.
IMPOSSIBLE_ASSERTS = ["assert add(1, 2) == 4", "assert add(2, 2) == 5"]
HONEST_ASSERTS = ["assert add(1, 2) == 3", "assert add(2, 2) == 4"]
# Tests that lean on builtins, as HumanEval's float checks do: a program must not redefine them for the tests.
IMPOSSIBLE_TOLERANT_ASSERTS = [
    "assert abs(add(1, 2) - 4) < 1e-6",
    "assert all(x == 5 for x in [add(2, 2)]) and isinstance(add(2, 2), str)",
]
IMPOSSIBLE_CALLS = [
    {"call": "add", "args": [1, 2], "expected": 4},
    {"call": "add", "args": [2, 2], "expected": 5},
]
HONEST_CALLS = [
    {"call": "add", "args": [1, 2], "expected": 3},
    {"call": "add", "args": [2.5, 2], "expected": 4.5},
]
