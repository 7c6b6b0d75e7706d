"""Verifier specs and scorers, as the form builder, the preview and the trainer use them."""

import json

import pytest

from gpu_jobs.rewards import VERIFIER_TYPES, ScoreResult, SpecError, build_scorer, validate_spec
from gpu_jobs.rewards.extract import extract_answer, extract_python_code
from sandboxes.client import SandboxClient

EXAMPLE_ROW = {"prompt": "12+45=", "answer": "57", "tests": ["assert result == 57"]}


class CountingClient(SandboxClient):
    """The real local client, counting how many round trips a scorer makes."""

    def __init__(self) -> None:
        super().__init__()
        self.calls: list[int] = []

    def run_many(self, requests):
        self.calls.append(len(requests))
        return super().run_many(requests)


class BrokenClient(SandboxClient):
    """A sandbox host that cannot be reached."""

    def run_many(self, requests):
        raise ConnectionError("broker at redis://sandbox-host unreachable")


@pytest.fixture(scope="module")
def sandbox():
    return SandboxClient()


def python_tests(sandbox, **spec):
    return build_scorer({"type": "python_tests", **spec}, sandbox=sandbox)


# --- specs ---------------------------------------------------------------------------------------


def test_known_verifier_types():
    # Other parts may register more (reasoning_gym for the domain packs); these are the engine's own.
    assert set(VERIFIER_TYPES) >= {
        "exact_match",
        "regex",
        "numeric",
        "math",
        "json",
        "keywords",
        "format",
        "similarity",
        "embedding",
        "python_tests",
        "custom_python",
        "model_judge",
        "composite",
    }


def test_validate_fills_defaults():
    assert validate_spec({"type": "exact_match"}) == {
        "type": "exact_match",
        "compare": "equal",
        "reference_field": "answer",
        "extract": "none",
        "extract_tag": "answer",
        "extract_json_field": "answer",
        "case_sensitive": False,
        "strip_whitespace": True,
        "collapse_whitespace": False,
        "ignore_punctuation": False,
        "unicode_form": "NFKC",
    }
    assert validate_spec({"type": "python_tests"}) == {
        "type": "python_tests",
        "tests_field": "tests",
        "tests": None,
        "scoring": "all_or_nothing",
        "timeout_s": 5,
        "io_compare": "lines",
        "float_tolerance": 1e-06,
        "libraries": None,
    }


def test_fixed_tests_are_normalised_to_a_list():
    spec = validate_spec({"type": "python_tests", "tests": "assert result == 1"})
    assert (spec["tests"], spec["tests_field"]) == (["assert result == 1"], None)


@pytest.mark.parametrize(
    ("spec", "field", "fragment"),
    [
        ({}, "type", "is required"),
        ({"type": "regx"}, "type", "exact_match, regex"),
        ({"type": "exact_match", "extract": "first_word"}, "extract", "none, last_line, last_number, boxed"),
        ({"type": "exact_match", "case_sensitive": "yes"}, "case_sensitive", "bool"),
        ({"type": "exact_match", "refrence_field": "x"}, "refrence_field", "known fields"),
        ({"type": "python_tests", "timeout_s": True}, "timeout_s", "int or float"),
        ({"type": "python_tests", "timeout_s": 0}, "timeout_s", "more than 0"),
        ({"type": "python_tests", "timeout_s": 600}, "timeout_s", "at most 60"),
        ({"type": "python_tests", "tests": "assert 1", "tests_field": "t"}, "tests", "not both"),
        ({"type": "python_tests", "tests": []}, "tests", "at least one"),
        ({"type": "python_tests", "tests": ["assert 1", 2]}, "tests", "list of strings"),
        ({"type": "python_tests", "scoring": "partial"}, "scoring", "all_or_nothing, fraction"),
    ],
)
def test_a_bad_spec_names_its_field(spec, field, fragment):
    with pytest.raises(SpecError) as caught:
        validate_spec(spec)
    assert caught.value.field == field
    assert fragment in caught.value.message
    assert str(caught.value) == f"{field}: {caught.value.message}"


def test_a_spec_that_is_not_an_object_is_refused():
    with pytest.raises(SpecError, match="^spec: must be a JSON object"):
        validate_spec(["exact_match"])


def test_build_scorer_validates():
    with pytest.raises(SpecError):
        build_scorer({"type": "exact_match", "extract": "bogus"})


# --- extraction ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "mode", "expected"),
    [
        ("The answer is 57", "none", "The answer is 57"),
        ("thinking...\nAnswer: 57\n\n", "last_line", "Answer: 57"),
        ("\n \n", "last_line", None),
        ("\n  42 \nBecause 40 + 2 = 42.", "first_line", "42"),
        ("\n \n", "first_line", None),
        ("3 apples and 1,234.5 pears", "last_number", "1234.5"),
        ("values 1,2,3", "last_number", "3"),
        ("it is -4", "last_number", "-4"),
        ("no digits", "last_number", None),
    ],
)
def test_extract_answer(text, mode, expected):
    assert extract_answer(text, mode=mode) == expected


def test_reasoning_gym_scores_the_extracted_answer():
    import reasoning_gym

    entry = reasoning_gym.create_dataset("chain_sum", size=1, seed=3)[0]
    row = {"prompt": entry["question"], "answer": entry["answer"], "metadata": entry["metadata"]}
    spec = {"type": "reasoning_gym", "task": "chain_sum", "config": {"seed": 3, "size": 1}}
    talking_on = f"{entry['answer']}\nI added the numbers one by one."
    # Without extraction the talk after the answer costs the credit; with first_line it is the answer alone.
    assert build_scorer(spec).score(row, talking_on).score < 1.0
    assert build_scorer({**spec, "extract": "first_line"}).score(row, talking_on).score == 1.0
    missing = build_scorer({**spec, "extract": "first_line"}).score(row, "\n\n")
    assert missing.score == 0.0 and "no answer found" in missing.reason
    with pytest.raises(SpecError) as caught:
        validate_spec({**spec, "extract": "first_word"})
    assert caught.value.field == "extract"


def test_extract_python_code():
    assert extract_python_code("Here:\n```python\nx = 1\n```\nand ```python\ny = 2\n```") == "x = 1\n"
    assert extract_python_code("```py\nx = 1") == "x = 1"  # cut off by the length limit
    assert extract_python_code("x = 1") == "x = 1"


# --- exact_match ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("spec", "completion", "score"),
    [
        ({}, "57", 1.0),
        ({}, "  57\n", 1.0),
        ({}, "56", 0.0),
        ({"strip_whitespace": False}, " 57", 0.0),
        ({"reference_field": "city"}, "paris", 1.0),
        ({"reference_field": "city", "case_sensitive": True}, "paris", 0.0),
        ({"extract": "last_line"}, "12+45 is\n57", 1.0),
        ({"extract": "last_number"}, "12 + 45 = 57.0", 1.0),
        ({"extract": "last_number"}, "12 + 45 = 58", 0.0),
    ],
)
def test_exact_match(spec, completion, score):
    scorer = build_scorer({"type": "exact_match", **spec})
    result = scorer.score({**EXAMPLE_ROW, "city": "Paris"}, completion)
    assert result.score == score
    assert result.parts == {"match": score}


def test_exact_match_says_what_it_expected():
    result = build_scorer({"type": "exact_match"}).score(EXAMPLE_ROW, "56")
    assert result.reason == "expected '57', got '56'"


def test_exact_match_compares_numbers_in_rows():
    scorer = build_scorer({"type": "exact_match", "extract": "last_number"})
    assert scorer.score({"answer": 1234}, "It is 1,234.").score == 1.0


def test_exact_match_on_a_row_without_the_reference_scores_zero():
    result = build_scorer({"type": "exact_match"}).score({"prompt": "x"}, "57")
    assert (result.score, result.reason) == (0.0, "row has no 'answer' value to compare with")


def test_exact_match_batch_keeps_order():
    scorer = build_scorer({"type": "exact_match"})
    results = scorer.score_batch([{"answer": "a"}, {"answer": "b"}], ["a", "a"])
    assert [r.score for r in results] == [1.0, 0.0]


def test_score_results_serialise():
    result = build_scorer({"type": "exact_match"}).score(EXAMPLE_ROW, "57")
    assert json.loads(json.dumps(result.to_dict())) == {
        "score": 1.0,
        "parts": {"match": 1.0},
        "reason": "match",
    }


# --- python_tests --------------------------------------------------------------------------------


def test_the_example_row_scores_one(sandbox):
    result = python_tests(sandbox).score(EXAMPLE_ROW, "57")
    assert result == ScoreResult(
        1.0,
        {"tests_passed": 1.0, "tests_total": 1.0, "tampering": 0.0},
        "the test passed",
        output={"status": "ok", "stdout": "", "stderr": "", "tests": "1 assert script"},
    )


def test_a_fenced_program_is_run_and_its_failures_explained(sandbox):
    completion = "Sure:\n```python\ndef add(a, b):\n    return a - b\n```\nDone."
    row = {"tests": ["assert add(1, 1) == 2", "assert add(0, 0) == 0"]}
    result = python_tests(sandbox).score(row, completion)
    assert result.score == 0.0
    assert result.parts == {"tests_passed": 1.0, "tests_total": 2.0, "tampering": 0.0}
    assert result.reason == "1/2 tests passed; test 1: AssertionError"


def test_fraction_scoring(sandbox):
    row = {"tests": ["assert f(1) == 2", "assert f(2) == 4", "assert f(3) == 7"]}
    result = python_tests(sandbox, scoring="fraction").score(row, "def f(x):\n    return 2 * x")
    assert result.score == pytest.approx(2 / 3)


def test_fixed_tests_and_a_single_test_string(sandbox):
    fixed = python_tests(sandbox, tests="assert result == 'ok'")
    assert fixed.score({}, "'ok'").score == 1.0
    per_row = python_tests(sandbox, tests_field="check")
    assert per_row.score({"check": "assert result == 3"}, "1 + 2").score == 1.0


def test_a_solutions_main_block_does_not_run(sandbox):
    completion = (
        "def double(x):\n    return 2 * x\n\nif __name__ == '__main__':\n    print(double(int(input())))"
    )
    assert python_tests(sandbox).score({"tests": "assert double(4) == 8"}, completion).score == 1.0


def test_what_the_program_prints_does_not_disturb_the_report(sandbox):
    completion = "for i in range(2000):\n    print('line', i)\nvalue = 5"
    assert python_tests(sandbox).score({"tests": "assert value == 5"}, completion).score == 1.0


def test_a_row_without_tests_scores_zero(sandbox):
    scorer = python_tests(sandbox)
    assert scorer.score({"prompt": "x"}, "57").reason == "row has no 'tests' value with tests"
    assert "list of strings" in scorer.score({"tests": [1]}, "57").reason


def test_a_batch_is_one_sandbox_round_trip_and_bad_samples_score_zero():
    client = CountingClient()
    scorer = python_tests(client, timeout_s=1)
    completions = ["57", "while True: pass", "x = bytearray(2**30)", "57", "syntax error here", "56"]
    rows = [EXAMPLE_ROW] * len(completions)
    results = scorer.score_batch(rows, completions)
    assert client.calls == [1]  # one run of the judge for the chunk of six
    assert [r.score for r in results] == [1.0, 0.0, 0.0, 1.0, 0.0, 0.0]
    assert results[1].reason.startswith("timeout")
    assert "MemoryError" in results[2].reason
    assert "SyntaxError" in results[4].reason


def test_rows_without_tests_are_not_sent_to_the_sandbox():
    client = CountingClient()
    results = python_tests(client).score_batch([{"prompt": "x"}, EXAMPLE_ROW], ["57", "57"])
    assert client.calls == [1]
    assert [r.score for r in results] == [0.0, 1.0]


def test_an_unreachable_sandbox_scores_zero_and_says_why():
    results = python_tests(BrokenClient()).score_batch([EXAMPLE_ROW, EXAMPLE_ROW], ["57", "57"])
    assert [r.score for r in results] == [0.0, 0.0]
    assert "unreachable" in results[0].reason


@pytest.mark.parametrize(
    "spec",
    [
        {"type": "exact_match"},
        {"type": "python_tests"},
        {"type": "python_tests", "tests": "assert result == 1"},
        {"type": "python_tests", "tests_field": "checks", "scoring": "fraction"},
    ],
)
def test_a_normalised_spec_validates_again_unchanged(spec):
    # Jobs store the normalised spec and the training process validates it a second time.
    once = validate_spec(spec)
    assert validate_spec(once) == once


def test_python_tests_results_carry_what_the_sandbox_printed():
    scorer = build_scorer({"type": "python_tests", "tests": ["assert result == 2"]})
    ok, failing = scorer.score_batch(
        [{}, {}], ["print('hello from the program')\n1 + 1", "import sys\nprint('oops', file=sys.stderr)\n3"]
    )
    assert ok.score == 1.0 and ok.output["status"] == "ok"
    assert "hello from the program" in ok.output["stdout"] + ok.output["stderr"]
    assert "ANNEAL" not in ok.output["stdout"]  # the harness's report line is not the program's output
    assert failing.score == 0.0 and "oops" in failing.output["stderr"]
    assert failing.to_dict()["output"] == failing.output
