"""The table verifier: a table in the completion (Markdown, CSV, JSON rows, fenced or not) scored by the share
of the reference's cells it gets right, numbers within tolerance, extra rows counted against it."""

import pytest

from gpu_jobs.rewards import build_scorer, validate_spec
from gpu_jobs.rewards.base import SpecError

ROW = {"table": [{"city": "Lyon", "count": 12, "cost": 1200.5}, {"city": "Porto", "count": 3, "cost": 99}]}
MARKDOWN = "| City | Count | Cost |\n|---|---|---|\n| Lyon | 12 | $1,200.50 |\n| Porto | 3 | 99 |"


def score(completion, row=ROW, **spec):
    return build_scorer({"type": "table", **spec}).score(row, completion)


@pytest.mark.parametrize(
    "completion",
    [
        MARKDOWN,
        "Here it is:\n\n" + MARKDOWN + "\n\nHope that helps.",
        "city,count,cost\nLyon,12,1200.5\nPorto,3,99\n",
        "city;count;cost\nLyon;12;1200.5\nPorto;3;99\n",
        '```json\n[{"city": "lyon", "count": "12", "cost": 1200.50}, {"city": "Porto", "count": 3, "cost": 99.0}]\n```',
        "| cost | city | count |\n|---|---|---|\n| 1200.5 | Lyon | 12 |\n| 99 | Porto | 3 |",  # columns by name
    ],
)
def test_the_same_table_in_any_usual_shape_scores_1(completion):
    result = score(completion)
    assert result.score == 1.0, result.reason
    assert result.parts == {"cells_matched": 6.0, "cells_total": 6.0}


def test_each_wrong_cell_costs_its_share_and_the_reason_counts_them():
    result = score("city,count,cost\nLyon,12,1300\nPorto,4,99\n")
    assert result.score == pytest.approx(4 / 6) and result.reason.startswith("4/6 cells match")


def test_numbers_match_within_the_tolerance_the_spec_sets():
    near = "city,count,cost\nLyon,12,1210\nPorto,3,99\n"
    assert score(near).score == pytest.approx(5 / 6)
    assert score(near, rel_tol=0.01).score == 1.0
    assert score(near, abs_tol=10).score == 1.0


def test_rows_in_another_order_match_only_when_the_order_is_left_open():
    swapped = "city,count,cost\nPorto,3,99\nLyon,12,1200.5\n"
    assert score(swapped).score == 0.0
    assert score(swapped, row_order="any").score == 1.0


def test_listing_extra_rows_cannot_match_them_all():
    padded = "city,count,cost\n" + "Lyon,12,1200.5\nPorto,3,99\n" * 5 + "Graz,1,1\n"
    result = score(padded, row_order="any")
    assert result.score == pytest.approx(6 / 33) and "9 rows more than the reference's 2" in result.reason


def test_missing_rows_and_columns_are_named():
    result = score("city,count\nLyon,12\n")
    assert result.score == pytest.approx(2 / 6)
    assert "1 of the reference's 2 rows missing" in result.reason and "columns missing: cost" in result.reason


def test_by_position_a_header_less_answer_is_compared_column_by_column():
    assert score("Lyon,12,1200.5\nPorto,3,99", header=False, columns="position").score == 1.0


def test_a_reference_given_as_text_and_case_sensitivity():
    row = {"table": "name,grade\nAda,A\nBob,b\n"}
    assert score("name,grade\nada,a\nbob,B\n", row=row).score == 1.0
    assert score("name,grade\nada,a\nbob,B\n", row=row, case_sensitive=True).score == 0.0


@pytest.mark.parametrize(
    "completion,reason",
    [("", "no table found"), ("I could not find the shipments.", "no table found")],
)
def test_no_table_scores_0_and_says_so(completion, reason):
    result = score(completion)
    assert result.score == 0.0 and reason in result.reason


def test_a_row_without_a_reference_table_says_which_field():
    result = score(MARKDOWN, row={"answer": "x"})
    assert result.score == 0.0 and "'table'" in result.reason


def test_bad_specs_are_refused_naming_the_field():
    for spec, field in (
        ({"rel_tol": -1}, "rel_tol"),
        ({"row_order": "sorted"}, "row_order"),
        ({"format": "xls"}, "format"),
    ):
        with pytest.raises(SpecError) as error:
            validate_spec({"type": "table", **spec})
        assert error.value.field == field


@pytest.mark.parametrize("text", ["[1, " * 5000, "[[1," * 5000, "[" * 20000, '"' * 20000, ",;\t" * 7000])
def test_hostile_text_is_no_table_and_no_verifier_error(text):
    result = score(text)
    assert result.score == 0.0 and "verifier error" not in result.reason
