"""Programs that try to forge python_tests' verdict score 0, on every sandbox backend; honest ones score 1.

The forgers (tests/security/forgers.py) each try one kind of attack on the grader: walking frames to the
harness, patching what it calls, objects that equal anything, reading memory, writing forged reports to every
descriptor, killing the judge. Each runs against tests no honest program passes, in the assert form and the
call form, with `fraction` scoring so that one forged test would show.
"""

import pytest

from gpu_jobs.rewards import build_scorer
from tests.security.forgers import (
    FORGERS,
    HONEST,
    HONEST_ASSERTS,
    HONEST_CALLS,
    IMPOSSIBLE_ASSERTS,
    IMPOSSIBLE_CALLS,
    IMPOSSIBLE_TOLERANT_ASSERTS,
)
from tests.security.hostile import BackendClient

pytestmark = pytest.mark.security


def _scorer(backend):
    return build_scorer({"type": "python_tests", "scoring": "fraction"}, sandbox=BackendClient(backend))


def test_every_forger_scores_zero_on_tests_it_cannot_pass(backend):
    names = list(FORGERS)
    forms = {
        "assert": IMPOSSIBLE_ASSERTS,
        "tolerant assert": IMPOSSIBLE_TOLERANT_ASSERTS,
        "call": IMPOSSIBLE_CALLS,
    }
    rows = [{"tests": tests} for tests in forms.values() for _ in names]
    completions = [f"```python\n{FORGERS[name]}\n```" for name in names] * len(forms)
    results = _scorer(backend).score_batch(rows, completions)
    labels = [f"{form} {name}" for form in forms for name in names]
    forged = {
        label: (result.score, result.reason)
        for label, result in zip(labels, results, strict=True)
        if result.score != 0.0 or not result.reason
    }
    assert forged == {}


@pytest.mark.parametrize(
    "name",
    [
        "frame_walk_to_harness_locals",
        "patch_json_dumps_after_the_program",
        "replace_builtins_compile_and_exec",
        "always_equal_object",
        "read_own_memory_for_the_nonce",
        "scan_gc_objects_for_the_nonce",
        "ctypes_raw_memory",
        "trace_function_rewrites_locals",
        "signal_handler_steals_frames",
        "patch_unittest_assert_helpers",
        "inspect_stack_to_the_caller",
        "traceback_frames_of_a_caught_exception",
    ],
)
def test_a_reach_for_the_grader_is_named_as_tampering(backend, name):
    result = _scorer(backend).score({"tests": IMPOSSIBLE_ASSERTS}, FORGERS[name])
    assert result.score == 0.0
    assert result.reason.startswith("tampering: "), result.reason
    assert result.parts["tampering"] == 1.0


def test_the_honest_solution_passes_every_form(backend):
    scorer = _scorer(backend)
    rows = [{"tests": HONEST_ASSERTS}, {"tests": HONEST_CALLS}]
    results = scorer.score_batch(rows, [HONEST, HONEST])
    assert [(r.score, r.parts["tampering"]) for r in results] == [(1.0, 0.0), (1.0, 0.0)]


# --- custom_python: a user's score() that executes the completion ---------------------------------------

# The recommended form: the completion runs in a process of its own and only a plain value comes back.
STRICT = """
def score(row, completion):
    try:
        ok = run_function(completion, "add", 1, 2) == 4 and run_function(completion, "add", 2, 2) == 5
    except RuntimeError as exc:
        return 0.0, str(exc)
    return 1.0 if ok else 0.0
"""
# The weaker form: the completion runs inside score()'s own process; the guard still stands in its way.
INLINE = """
def score(row, completion):
    namespace = {}
    exec(completion, namespace)
    return 1.0 if namespace["add"](1, 2) == 4 and namespace["add"](2, 2) == 5 else 0.0
"""
# What an inline score() cannot tell apart from a right answer, as it compares with the program's own ==.
INLINE_BLIND_SPOTS = {
    "always_equal_object",
    "int_subclass_equal_to_everything",
    "force_the_runner_path_with_an_equal_to_anything_result",
}


def _custom(backend, code):
    return build_scorer({"type": "custom_python", "code": code}, sandbox=BackendClient(backend))


def test_custom_verifiers_that_run_the_completion_cannot_be_forged(backend):
    names = list(FORGERS)
    inline = [name for name in names if name not in INLINE_BLIND_SPOTS]
    strict = _custom(backend, STRICT).score_batch([{}] * len(names), [FORGERS[name] for name in names])
    weak = _custom(backend, INLINE).score_batch([{}] * len(inline), [FORGERS[name] for name in inline])
    forged = {
        f"{form} {name}": result.reason
        for form, found in (
            ("strict", zip(names, strict, strict=True)),
            ("inline", zip(inline, weak, strict=True)),
        )
        for name, result in found
        if result.score != 0.0
    }
    assert forged == {}


def test_a_custom_verifier_names_the_tampering_it_saw(backend):
    result = _custom(backend, INLINE).score({}, FORGERS["read_own_memory_for_the_nonce"])
    assert (result.score, result.parts["tampering"]) == (0.0, 1.0)
    assert result.reason.startswith("tampering: reading process memory")


def test_a_custom_verifier_still_scores_the_honest_completion(backend):
    fair = STRICT.replace("== 4", "== 3").replace("== 5", "== 4")
    results = [
        _custom(backend, fair).score({}, HONEST),
        _custom(backend, INLINE.replace("== 4", "== 3").replace("== 5", "== 4")).score({}, HONEST),
    ]
    assert [(r.score, r.parts["tampering"]) for r in results] == [(1.0, 0.0), (1.0, 0.0)]
