"""python_tests' three test forms, judged by code_judge in a real bubblewrap sandbox: what passes, what fails
and what a person reads about it."""

import shutil

import pytest

from gpu_jobs.rewards import build_scorer, validate_spec
from gpu_jobs.rewards.base import SpecError
from gpu_jobs.rewards.code_judge.codec import NotPlain, decode, encode
from sandboxes.backends.bwrap import BwrapBackend

pytestmark = pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap is not installed")


class Warm:
    backend = None

    def run_many(self, requests):
        if Warm.backend is None:
            Warm.backend = BwrapBackend(pool_size=1)
        return Warm.backend.run_many(requests)


def score(tests, program, **spec):
    scorer = build_scorer({"type": "python_tests", "scoring": "fraction", **spec}, sandbox=Warm())
    return scorer.score({"tests": tests}, program)


ADD = "def add(a, b):\n    return a + b\n"
ECHO_SUM = "import sys\nprint(sum(int(x) for x in sys.stdin.read().split()))\n"


def test_io_tests_compare_stdout_by_lines_exactly_or_by_tokens():
    tests = [{"stdin": "1 2\n", "stdout": "3"}, {"stdin": "5 5", "stdout": "10\n\n"}]
    result = score(tests, ECHO_SUM)
    assert (result.score, result.output["tests"]) == (1.0, "2 stdin/stdout")
    assert score(tests, ECHO_SUM, io_compare="exact").score == 0.0
    tokens = [{"stdin": "", "stdout": "0.3333333 done"}]
    assert score(tokens, "print(1/3, 'done')", io_compare="tokens").score == 1.0
    wrong = score([{"stdin": "1 2", "stdout": "4"}], ECHO_SUM)
    assert wrong.reason == "0/1 tests passed; test 1: wrong output: got '3\\n', expected '4'"


def test_call_tests_compare_json_values_with_float_tolerance():
    tests = [
        {"call": "add", "args": [1, 2], "expected": 3},
        {"call": "add", "args": [0.1, 0.2], "expected": 0.3},
        {"call": "add", "args": [[1], [2]], "expected": [1, 2]},
        {"call": "add", "kwargs": {"a": "x", "b": "y"}, "args": [], "expected": "xy"},
    ]
    assert score(tests, ADD).score == 1.0
    pair = score([{"call": "pair", "args": [], "expected": [1, 2]}], "def pair():\n    return (1, 2)\n")
    assert pair.score == 1.0  # a tuple is a list after a JSON round trip
    strict = score([{"call": "add", "args": [0, 1], "expected": True}], ADD)
    assert strict.reason == "0/1 tests passed; test 1: add(0, 1) returned 1, expected true"


def test_assert_scripts_get_plain_values_and_the_programs_exceptions():
    program = (
        "def split(xs):\n    return tuple(xs[:1]), set(xs[1:]), {1: 'one'}\n"
        "def check(x):\n    if x < 0:\n        raise ValueError('negative')\n    return x\n"
    )
    tests = [
        "assert split([1, 2, 2]) == ((1,), {2}, {1: 'one'})",
        "try:\n    check(-1)\nexcept ValueError as exc:\n    assert 'negative' in str(exc)\nelse:\n    raise AssertionError",
        "def helper(f):\n    assert f(3) == 3\nhelper(check)",
    ]
    result = score(tests, program)
    assert (result.score, result.reason, result.output["tests"]) == (
        1.0,
        "all 3 tests passed",
        "3 assert scripts",
    )


def test_the_programs_exception_reaches_the_test_with_its_own_message():
    program = "def check(x):\n    if x < 0:\n        raise ValueError('negative')\n    if x == 0:\n        raise KeyError\n"
    caught = "try:\n    check(-1)\nexcept ValueError as exc:\n    assert str(exc) == 'negative', str(exc)\n"
    bare = "try:\n    check(0)\nexcept KeyError as exc:\n    assert exc.args == (), exc.args\n"
    assert score([caught, bare], program).score == 1.0
    failed = score(["assert check(-2) == 0"], program)
    assert failed.reason == "0/1 tests passed; test 1: ValueError: negative"


def test_asserts_that_need_the_programs_objects_run_next_to_it_and_still_refuse_equal_to_anything():
    program = (
        "class Stack:\n    def __init__(self):\n        self.items = []\n"
        "    def push(self, x):\n        self.items.append(x)\n    def size(self):\n        return len(self.items)\n"
        "def counter():\n    yield 1\n    yield 2\n"
    )
    tests = [
        "s = Stack()\ns.push(1)\nassert s.size() == 1",
        "assert list(counter()) == [1, 2]",
        "assert s.size() == 1",
    ]
    assert score(tests, program).score == 1.0
    liar = "class Anything:\n    def __eq__(self, other):\n        return True\ndef make():\n    return [Anything()]\n"
    forged = score(["assert make() == [5]", "assert 5 in make()"], liar)
    assert forged.score == 0.0
    assert forged.reason.startswith("tampering: ") and "claims to equal anything" in forged.reason


def test_a_slow_test_costs_only_itself_under_fraction_scoring():
    program = ADD + "def spin():\n    while True:\n        pass\n"
    result = score(["assert add(1, 1) == 2", "spin()"], program, timeout_s=1)
    assert result.score == 0.5
    assert "ran past its time limit" in result.reason


def test_apps_style_tests_become_io_or_call_tests():
    io = score({"inputs": ["1 2\n"], "outputs": ["3\n"]}, ECHO_SUM)
    call = score({"fn_name": "add", "inputs": [[1, 2], [2, 2]], "outputs": [[3], [4]]}, ADD)
    assert (io.score, call.score, call.output["tests"]) == (1.0, 1.0, "2 calls")


@pytest.mark.parametrize(
    ("tests", "message"),
    [
        ([{"stdin": 1, "stdout": "x"}], "an io test needs stdin and stdout as strings"),
        (
            ["assert 1", {"call": "not a name", "args": [], "expected": 1}],
            "test 2: call must name a function",
        ),
        (
            [{"call": "f", "args": []}],
            "a call test needs args (a list), optional kwargs (an object) and expected",
        ),
        ({"inputs": ["1"], "outputs": []}, "inputs and outputs must be lists of the same length"),
    ],
)
def test_bad_tests_are_refused_naming_the_test(tests, message):
    with pytest.raises(SpecError) as caught:
        validate_spec({"type": "python_tests", "tests": tests})
    assert message in str(caught.value)


def test_the_codec_refuses_subclasses_and_objects_and_round_trips_plain_values():
    value = [1, 2.5, "x", None, True, (1, 2), {3}, frozenset({4}), {1: "a"}, {"$tuple": 1}, b"\x00", 1j]
    assert decode(encode(value)) == value
    assert type(decode(encode((1,)))) is tuple

    class Yes(int):
        pass

    for bad in (Yes(1), object(), [float], {"k": Yes(2)}):
        with pytest.raises(NotPlain):
            encode(bad)


def test_in_a_batch_one_samples_flood_of_output_costs_only_itself():
    scorer = build_scorer({"type": "python_tests"}, sandbox=Warm())
    flood = "import sys\nwhile True:\n    sys.stdout.write('x' * 65536)\n"
    rows = [{"tests": ["assert add(1, 2) == 3"]}] * 3
    results = scorer.score_batch(rows, [ADD, ADD, flood])
    assert [r.score for r in results] == [1.0, 1.0, 0.0]
    assert results[1].output["stderr"] == "" and results[2].output["stderr"].startswith("x")


def test_the_judge_run_unsandboxed_touches_nothing_of_the_hosts_tmp_but_its_own_folders(tmp_path):
    """The benchmark's baseline runs the judge as a plain subprocess: emptying /tmp between the samples of a
    batch is for a sandbox's own /tmp (SANDBOX_TMP) only."""
    import subprocess
    import tempfile
    from pathlib import Path

    from gpu_jobs.rewards import code_judge

    keep = Path(tempfile.mkdtemp(prefix="anneal-judge-neighbour-"))
    (keep / "file").write_text("not the judge's")
    c_program = '#include <stdio.h>\nint main(void) { puts("7"); return 0; }\n'
    payload = {
        "nonce": "n" * 32,
        "mode": "tests_batch",
        "language": "c",
        "samples": [{"program": c_program, "tests": [{"kind": "io", "stdin": "", "stdout": "7\n"}]}] * 2,
    }
    request = code_judge.request(payload, time_s=20)
    (tmp_path / "main.py").write_text(request.code)
    before = {p.name for p in Path("/tmp").iterdir() if p.name.startswith("sample-")}
    done = subprocess.run(
        ["/usr/bin/python3", "-E", "-s", "-S", "main.py"],
        cwd=tmp_path, input=request.stdin, capture_output=True, text=True, timeout=60,
        env={"PATH": "/usr/bin:/bin"},
    )  # fmt: skip
    report = code_judge.find_report(done.stdout, "n" * 32)
    assert [entry["passed"] for entry in report["results"]] == [[True], [True]], done.stderr
    assert (keep / "file").read_text() == "not the judge's"
    assert {p.name for p in Path("/tmp").iterdir() if p.name.startswith("sample-")} <= before
    shutil.rmtree(keep)


@pytest.mark.parametrize(
    "program",
    [
        "from collections import namedtuple\nP = namedtuple('P', 'x y')\ndef f(a):\n    return P(a, 2)\n",
        "import typing\nclass P(typing.NamedTuple):\n    x: int\n    y: int = 0\ndef f(a):\n    return P(a)\n",
        "import decimal\ndef f(a):\n    return decimal.Decimal(a).as_tuple()\n",  # DecimalTuple, made on import
        "from typing import List\ndef f(a) -> List[int]:\n    return [a]\n",  # typing sets io.__name__ on import
    ],
    ids=["namedtuple", "typing.NamedTuple", "decimal imported cold", "typing imported cold"],
)
def test_an_honest_namedtuple_is_not_taken_for_patching_the_standard_library(program):
    # A cold sandbox has decimal not yet imported: its namedtuple is made while the guard watches.
    scorer = build_scorer({"type": "python_tests"}, sandbox=BwrapBackend(pool_size=0))
    result = scorer.score({"tests": ["assert f(1)[0] in (0, 1)"]}, program)
    assert (result.score, result.reason) == (1.0, "the test passed")


def test_renaming_a_standard_library_class_s_module_is_still_tampering():
    program = "import unittest\nunittest.TestCase.__module__ = '__main__'\nresult = 1\n"
    result = score(["assert result == 1"], program)
    assert result.reason == "tampering: patching TestCase.__module__"


def test_a_daemon_one_sample_leaves_is_gone_before_the_next_sample_of_its_batch_runs():
    """The zygote sweeps every process below it after each runner (orphans come back to it, a subreaper): a
    double-forked daemon that waits for the next sample, then plants a file in /tmp, never gets to."""
    daemon = (
        "import os, time\n"
        "def plant():\n"
        "    if os.fork() == 0:\n"
        "        os.setsid()\n"
        "        if os.fork() == 0:\n"
        "            time.sleep(0.15)\n"  # past the wipe between the samples
        "            for _ in range(100):\n"
        "                open('/tmp/planted', 'w').close()\n"
        "                time.sleep(0.005)\n"
        "        os._exit(0)\n"
        "    return True\n"
    )
    looks = (
        "import os, time\ndef planted():\n    time.sleep(0.4)\n    return os.path.exists('/tmp/planted')\n"
    )
    scorer = build_scorer({"type": "python_tests"}, sandbox=Warm())
    rows = [{"tests": ["assert plant() is True"]}, {"tests": ["assert planted() is False"]}]
    results = scorer.score_batch(rows, [daemon, looks])
    assert [r.score for r in results] == [1.0, 1.0], [r.reason for r in results]


@pytest.mark.parametrize(
    "program, bound",
    [("x = 2\nx + 1\n", True), ("def f():\n    return 3\n", False), ("def f(:\n", True), ("", False)],
)
def test_the_verifier_tells_the_runner_when_there_is_a_last_expression_to_bind(program, bound):
    from gpu_jobs.rewards.python_tests import binds_result

    assert binds_result(program) is bound
    # Either way the program runs as written: `result` holds the last expression's value when there is one.
    if bound and program.startswith("x"):
        assert score(["assert result == 3"], program).score == 1.0
    elif not bound and program:
        assert score(["assert f() == 3"], program).score == 1.0


def test_a_batch_is_cut_into_runs_that_spread_over_the_sandbox_workers():
    from gpu_jobs.rewards.python_tests import CHUNK, MIN_CHUNK, RUNS, chunk_size

    assert [chunk_size(n) for n in (1, 6, 128, 129, 256, 328)] == [8, 8, 8, 9, 16, 21]
    assert (MIN_CHUNK, chunk_size(100 * RUNS * CHUNK)) == (8, CHUNK)
    # Where CHUNK caps a run, the batch is shared out evenly: 328 as 6 runs of 55 (not 5 of 64 and one of 8).
    assert [chunk_size(n, runs=4) for n in (6, 128, 328, 512)] == [8, 32, 55, CHUNK]
    assert [chunk_size(n, runs=2) for n in (6, 74, 128)] == [8, 37, 64]


def test_the_runs_planned_follow_the_workers_of_a_local_sandbox_and_not_of_a_remote_one():
    from gpu_jobs.rewards.python_tests import CHUNK, RUNS, planned_runs
    from sandboxes.backends.bwrap import BwrapBackend
    from sandboxes.client import SandboxClient

    # As few runs as CHUNK allows, a whole number a worker: one each up to 3 * CHUNK samples on 3 workers.
    backend = BwrapBackend(pool_size=3)
    counts = (1, 3 * CHUNK, 3 * CHUNK + 1, 6 * CHUNK, 6 * CHUNK + 1)
    assert [planned_runs(backend, n) for n in counts] == [3, 3, 6, 6, 9]
    local = SandboxClient(mode="local", backend="bwrap")
    assert planned_runs(local, 1) == local.workers
    assert planned_runs(local, local.workers * CHUNK + 1) == 2 * local.workers
    remote = SandboxClient(
        mode="remote", broker_url="redis://127.0.0.1:6379/15", result_backend_url="redis://127.0.0.1:6379/15"
    )
    assert remote.workers is None and planned_runs(remote, 1) == planned_runs(remote, 100 * CHUNK) == RUNS
    assert planned_runs(object(), 64) == RUNS  # a stand-in that says nothing of its workers


def test_a_batch_goes_to_the_sandbox_as_a_few_runs_per_worker_with_every_verdict_right():
    class Counting(Warm):
        workers = 2

        def __init__(self):
            self.runs = []

        def run_many(self, requests):
            self.runs.append(len(requests))
            return super().run_many(requests)

    sandbox = Counting()
    scorer = build_scorer({"type": "python_tests"}, sandbox=sandbox)
    for count, runs in ((64, 2), (200, 4)):
        programs = [ADD if i % 3 else "def add(a, b):\n    return a - b\n" for i in range(count)]
        results = scorer.score_batch([{"tests": ["assert add(2, 3) == 5"]}] * count, programs)
        # One run_many call: 64 as 2 runs of 32 (one a worker), 200 as 4 of 50 (CHUNK caps a run at 64);
        # 16 runs of 8 or more before the workers were asked.
        assert sandbox.runs.pop() == runs
        assert [r.score for r in results] == [1.0 if i % 3 else 0.0 for i in range(count)]
