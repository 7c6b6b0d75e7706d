"""Composite verifiers, the safe formula evaluator and the hack probes."""

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gpu_jobs.rewards import SpecError, build_scorer, validate_spec
from gpu_jobs.rewards.formula import FormulaError, check_formula, evaluate
from gpu_jobs.rewards.normalise import Normaliser
from gpu_jobs.rewards.probes import PROBES, run_probes
from sandboxes.client import SandboxClient

CORRECT = {"name": "correct", "spec": {"type": "numeric"}, "weight": 1}
FORMATTED = {"name": "formatted", "spec": {"type": "format"}, "weight": 0}
GOOD = "<think>12+45=57</think><answer>57</answer>"
UNFORMATTED = "57"
ROW = {"prompt": "12+45=", "answer": "57"}


def composite(mode: str, **extra) -> dict:
    return {"type": "composite", "mode": mode, "parts": [CORRECT, FORMATTED], **extra}


def test_weighted_sum_logs_weight_zero_parts_without_counting_them():
    scorer = build_scorer(composite("weighted_sum"))
    result = scorer.score(ROW, UNFORMATTED)
    assert result.score == 1.0
    assert result.parts == {"correct": 1.0, "formatted": 0.0}
    assert "formatted:" in result.reason


def test_weighted_sum_divides_by_the_total_weight():
    spec = {
        "type": "composite",
        "parts": [{**CORRECT, "weight": 3}, {**FORMATTED, "weight": 1}],
    }
    assert build_scorer(spec).score(ROW, UNFORMATTED).score == 0.75


def test_all_of_and_min():
    spec = {"type": "composite", "mode": "all_of", "parts": [CORRECT, {**FORMATTED, "weight": 1}]}
    assert build_scorer(spec).score(ROW, GOOD).score == 1.0
    gated = build_scorer(spec).score(ROW, UNFORMATTED)
    assert gated.score == 0.0 and "not passed: formatted" in gated.reason
    assert build_scorer({**spec, "mode": "min"}).score(ROW, UNFORMATTED).score == 0.0


def test_formula_over_named_parts():
    scorer = build_scorer(composite("formula", formula="correct * (0.8 + 0.2 * formatted)"))
    assert scorer.score(ROW, GOOD).score == pytest.approx(1.0)
    assert scorer.score(ROW, UNFORMATTED).score == pytest.approx(0.8)
    assert scorer.score(ROW, "<think>x</think><answer>58</answer>").score == 0.0


def test_a_composite_batch_keeps_order():
    scorer = build_scorer(composite("formula", formula="correct if formatted else correct / 2"))
    results = scorer.score_batch([ROW] * 3, [GOOD, UNFORMATTED, "no"])
    assert [r.score for r in results] == [1.0, 0.5, 0.0]


def test_composites_nest_and_errors_name_the_nested_field():
    inner = {"type": "composite", "parts": [CORRECT]}
    assert (
        build_scorer({"type": "composite", "parts": [{"name": "inner", "spec": inner}]})
        .score(ROW, "57")
        .score
        == 1.0
    )
    with pytest.raises(SpecError) as caught:
        validate_spec(
            {"type": "composite", "parts": [{"name": "a", "spec": {"type": "numeric", "abs_tol": -1}}]}
        )
    assert caught.value.field == "parts[0].spec.abs_tol"


@pytest.mark.parametrize(
    ("spec", "field"),
    [
        ({"parts": []}, "parts"),
        ({"parts": [CORRECT, CORRECT]}, "parts[1].name"),
        ({"parts": [{**CORRECT, "name": "not a name"}]}, "parts[0].name"),
        ({"parts": [{**CORRECT, "weight": -1}]}, "parts[0].weight"),
        ({"parts": [FORMATTED]}, "parts"),
        ({"parts": [CORRECT], "mode": "formula"}, "formula"),
        ({"parts": [CORRECT], "mode": "formula", "formula": "correct + other"}, "formula"),
        ({"parts": [CORRECT], "mode": "formula", "formula": "__import__('os')"}, "formula"),
    ],
)
def test_composite_spec_errors(spec, field):
    with pytest.raises(SpecError) as caught:
        validate_spec({"type": "composite", **spec})
    assert caught.value.field == field


# --- the formula evaluator ------------------------------------------------------------------------


@pytest.mark.parametrize(
    "formula",
    [
        "a.__class__",
        "[a for a in b]",
        "lambda: 1",
        "open('x')",
        "'text'",
        "a if a else exec('1')",
        "(1).real",
        "min(a, key=b)",
    ],
)
def test_the_evaluator_refuses_everything_but_arithmetic(formula):
    with pytest.raises(FormulaError):
        check_formula(formula, names={"a", "b"})


def test_the_evaluator_computes_and_reports_math_errors():
    tree = check_formula("clip(a / b, 0, 1) + (a > b) + max(a, b) ** 2", names={"a", "b"})
    assert evaluate(tree, {"a": 1.0, "b": 2.0}) == pytest.approx(0.5 + 0 + 4)
    with pytest.raises(FormulaError, match="division"):
        evaluate(check_formula("a / b", names={"a", "b"}), {"a": 1.0, "b": 0.0})
    with pytest.raises(FormulaError, match="exponent"):
        evaluate(check_formula("10 ** 10 ** 10", names=set()), {})


def test_a_formula_that_fails_on_a_sample_scores_zero_with_the_reason():
    scorer = build_scorer(composite("formula", formula="correct / formatted"))
    result = scorer.score(ROW, UNFORMATTED)
    assert result.score == 0.0 and "division" in result.reason


# --- normaliser properties ------------------------------------------------------------------------

NORMALISERS = st.builds(
    Normaliser,
    case_sensitive=st.booleans(),
    whitespace=st.sampled_from(["keep", "strip", "collapse"]),
    ignore_punctuation=st.booleans(),
    unicode_form=st.sampled_from(["none", "NFC", "NFKC"]),
)


@settings(max_examples=300, deadline=None, derandomize=True, database=None)
@given(NORMALISERS, st.text())
def test_normalising_twice_changes_nothing(normalise, text):
    assert normalise(normalise(text)) == normalise(text)


@settings(max_examples=200, deadline=None, derandomize=True, database=None)
@given(st.text(), st.text(alphabet=" \t\n", max_size=5), st.text(alphabet=" \t\n", max_size=5))
def test_outer_whitespace_never_matters_when_stripping(text, before, after):
    for mode in ("strip", "collapse"):
        normalise = Normaliser(whitespace=mode)
        assert normalise(before + text + after) == normalise(text)


@settings(max_examples=200, deadline=None, derandomize=True, database=None)
@given(st.text(alphabet=st.characters(codec="ascii")))
def test_case_insensitive_ignores_case_and_sensitive_keeps_it(text):
    assert Normaliser()(text.upper()) == Normaliser()(text.lower())
    sensitive = Normaliser(case_sensitive=True, unicode_form="none", whitespace="keep")
    assert sensitive(text) == text


@settings(max_examples=200, deadline=None, derandomize=True, database=None)
@given(
    st.text(alphabet=st.characters(codec="ascii", categories=["L", "N"]), min_size=1),
    st.sampled_from(".,!?;:'\"()"),
)
def test_ignoring_punctuation_drops_only_punctuation(word, mark):
    normalise = Normaliser(ignore_punctuation=True)
    assert normalise(mark + word + mark) == normalise(word)


@settings(max_examples=100, deadline=None, derandomize=True, database=None)
@given(st.text())
def test_exact_match_of_a_text_with_itself_always_scores_one(text):
    scorer = build_scorer({"type": "exact_match", "ignore_punctuation": True, "collapse_whitespace": True})
    assert scorer.score({"answer": text}, text).score == 1.0


# --- hack probes ----------------------------------------------------------------------------------


def by_name(results):
    return {result.name: result for result in results}


def test_a_careful_verifier_passes_every_probe():
    results = by_name(run_probes({"type": "numeric", "extract": "tag"}))
    assert set(results) == {probe.name for probe in PROBES}
    assert not any(result.flagged for result in results.values())
    assert results["os_exit"].skipped == "does not apply"


def test_a_contains_check_is_flagged_by_the_long_answer():
    results = by_name(run_probes({"type": "keywords", "required_field": "answer"}))
    assert results["very_long"].flagged and results["very_long"].score == 1.0
    assert not results["empty"].flagged


def test_a_verifier_that_accepts_anything_is_flagged_for_empty_and_echo():
    results = by_name(
        run_probes({"type": "format", "require_think": False, "require_answer": False, "max_chars": 10**6})
    )
    assert results["empty"].flagged and results["prompt_echo"].flagged


def test_a_lax_regex_is_flagged_for_the_reference_in_the_wrong_format():
    results = by_name(run_probes({"type": "regex", "pattern": r"\d+"}))
    assert results["reference_wrong_format"].flagged


def test_probes_use_the_given_rows_and_the_spec_columns():
    results = by_name(
        run_probes({"type": "keywords", "required_field": "must"}, rows=[{"prompt": "p", "must": "zebra"}])
    )
    assert results["very_long"].flagged is False  # the long answer holds the reference, not "zebra"
    results = by_name(run_probes({"type": "exact_match", "reference_field": "gold"}))
    assert not any(result.flagged for result in results.values())


def test_code_probes_run_in_the_sandbox_and_score_zero():
    sandbox = SandboxClient()
    results = by_name(run_probes({"type": "python_tests"}, sandbox=sandbox))
    for name in ("os_exit", "sys_exit", "prints_pass", "redefines_asserts"):
        assert results[name].skipped == "" and results[name].score == 0.0, results[name]
    assert "exited before its tests" in results["os_exit"].reason


def test_custom_code_that_trusts_prints_is_flagged():
    code = "def score(row, completion):\n    return 1.0 if 'PASS' in completion else 0.0\n"
    spec = {
        "type": "composite",
        "parts": [
            {"name": "custom", "spec": {"type": "custom_python", "code": code}},
            {"name": "tests", "spec": {"type": "python_tests"}, "weight": 0},
        ],
    }
    results = by_name(run_probes(spec, sandbox=SandboxClient()))
    assert results["prints_pass"].flagged


def test_a_model_judge_is_not_probed_and_says_why():
    spec = {"type": "model_judge", "endpoint": "http://127.0.0.1:9/v1", "model": "m"}
    results = run_probes(spec)
    assert all(r.skipped.startswith("not probed") and not r.flagged for r in results)


def test_a_program_that_patches_unittest_asserts_still_fails_its_tests():
    scorer = build_scorer(
        {"type": "python_tests", "tests": "import unittest\nunittest.TestCase().assertEqual(result, 57)"},
        sandbox=SandboxClient(),
    )
    honest, patched = scorer.score_batch(
        [{}, {}],
        [
            "12 + 45",
            "import unittest\nunittest.TestCase.assertEqual = lambda *a, **k: None\nresult = 0",
        ],
    )
    assert honest.score == 1.0
    assert patched.score == 0.0 and patched.reason == "tampering: patching unittest.case.TestCase.assertEqual"
    results = by_name(
        run_probes(
            {"type": "python_tests", "tests": "import unittest\nunittest.TestCase().assertEqual(result, 57)"},
            sandbox=SandboxClient(),
        )
    )
    assert not results["redefines_asserts"].flagged
