"""The spreadsheet verifier: formulas checked before anything runs (no other sheet, workbook, file or INDIRECT),
then evaluated by LibreOffice in the real sandbox (profile spreadsheet; bubblewrap, and the docker backend's
image when it is built) beside the reference's, on the sheet and on a copy whose numbers changed, so a typed-in
value scores nothing. Every sheet_formulas reference scores 1."""

import pytest

from gpu_jobs.document_tasks import TASKS, document_rows
from gpu_jobs.rewards import build_scorer, validate_spec
from gpu_jobs.rewards.base import SpecError
from gpu_jobs.rewards.spreadsheet import FormulaError, answer_formulas, check_formula
from tests.profile_backends import backend_params, close

ROW = {
    "sheet": {
        "A1": "item",
        "B1": "qty",
        "C1": "price",
        "A2": "bolt",
        "B2": 3,
        "C2": 0.5,
        "A3": "nut",
        "B3": 10,
        "C3": 0.25,
    },
    "targets": ["D2", "D3", "D4"],
    "formulas": {"D2": "=B2*C2", "D3": "=B3*C3", "D4": "=SUM(D2:D3)"},
}


@pytest.fixture(scope="module", params=backend_params("spreadsheet"))
def sandbox(request):
    backend = request.param()
    yield backend
    close(backend)


def test_right_wrong_typed_in_and_refused_formulas(sandbox):
    answers = [
        "```\nD2: =B2*C2\nD3: =c3*b3\nD4: =D2+D3\n```",
        "D2: =B2*C2\nD3: =B3+C3\nD4: =SUM(D2:D3)",
        '{"D2": "=B2*C2", "D3": "=B3*C3", "D4": "=4"}',
        'D2: =INDIRECT("B2")*C2',
        "D2: =[prices.xlsx]Sheet1!A1",
        "I would multiply them.",
    ]
    results = build_scorer({"type": "spreadsheet"}, sandbox=sandbox).score_batch(
        [ROW] * len(answers), answers
    )
    assert [round(r.score, 3) for r in results] == [1.0, 0.333, 0.667, 0.0, 0.0, 0.0], [
        r.reason for r in results
    ]
    assert results[0].reason == "all 3 cells right"
    assert results[1].reason == "1/3 cells right; D3 computed '10.25', expected '2.5'"
    assert results[2].reason == (
        "2/3 cells right; D4 is right on the sheet but not once its numbers change (a typed-in value?)"
    )
    assert results[3].reason == "the answer's formulas: the function INDIRECT is not allowed"
    assert results[4].reason.startswith("the answer's formulas: cannot read '[PRICES.XLSX]")
    assert results[5].reason == "no formula for D2, D3, D4 in the answer"


def test_every_sheet_formulas_reference_scores_1_and_its_values_typed_in_do_not(sandbox):
    rows = [
        row for d in (0, 2, 5) for row in document_rows(task="sheet_formulas", size=2, seed=4, difficulty=d)
    ]
    scorer = build_scorer(TASKS["sheet_formulas"].spec, sandbox=sandbox)
    results = scorer.score_batch(rows, [row["answer"] for row in rows])
    assert [r.score for r in results] == [1.0] * len(rows), [r.reason for r in results]
    typed = "\n".join(f"{cell}: =1" for cell in rows[0]["targets"])
    assert scorer.score(rows[0], typed).score == 0.0


def test_only_the_allowed_grammar_gets_to_libreoffice():
    assert check_formula('=round(sum(a1:a3), 2) & "x"') == '=ROUND(SUM(A1:A3), 2) & "x"'
    for formula, problem in [
        ('=INDIRECT("A1")', "the function INDIRECT is not allowed"),
        ('=WEBSERVICE("http://127.0.0.1/")', "the function WEBSERVICE is not allowed"),
        ("=Sheet2!A1", "cannot read 'SHEET2!A1'"),
        ("='file:///etc/passwd'#$Sheet1.A1", "cannot read \"'FILE:///ETC/PASSWD'\""),
        ("=A201", "A201 is outside the sheet"),
        ("A1+1", "a formula starts with ="),
    ]:
        with pytest.raises(FormulaError) as error:
            check_formula(formula)
        assert str(error.value) == problem
    assert answer_formulas("C1 = =A1*2\nc2: =A2") == {"C1": "=A1*2", "C2": "=A2"}
    with pytest.raises(SpecError) as error:
        validate_spec({"type": "spreadsheet", "timeout_s": 1})
    assert error.value.field == "timeout_s"
