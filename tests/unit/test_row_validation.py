"""Rows a user can trust: an empty reference answer, an empty prompt or tests that do not parse are row errors
naming the row and the field, in the ingest and on the review page; the demo rows and a domain pack still pass.

Named users: owner (owner of Core). The ingest runs in the test (the Celery task only calls the same service).
"""

import csv
import io
import json

import pytest
from django.urls import reverse

from anneal.datasets.ingest import read_rows
from anneal.datasets.mapping import Mapping, canonical_row
from anneal.datasets.services import dataset_upload_ingest
from gpu_jobs.addition import addition_rows
from tests.unit.test_dataset_api import api_upload
from tests.unit.test_dataset_ingest import csv_bytes, jsonl, run
from tests.world import api_client

QA = Mapping.from_dict({"prompt": "question", "answer": "solution"})
CODE = Mapping.from_dict({"prompt": "question", "answer": "solution", "tests": "tests"})


def errors_of(tmp_path, rows, mapping, name="rows.jsonl", body=None):
    report, target, _ = run(tmp_path, name, body or jsonl(rows), mapping)
    return {(e["row"], e["field"]): e["message"] for e in report.errors}, read_rows(
        target
    ) if report.ok else []


def test_an_empty_reference_answer_or_prompt_is_a_row_error(tmp_path):
    rows = [
        {"question": "1+1=", "solution": "2"},
        {"question": "2+2=", "solution": ""},
        {"question": "3+3=", "solution": "   "},
        {"question": "4+4=", "solution": None},
        {"question": "  ", "solution": "10"},
        {"question": "6+6=", "solution": 12},
    ]
    errors, kept = errors_of(tmp_path, rows, QA)
    assert errors == {
        (2, "solution"): "answer is empty: give the reference answer",
        (3, "solution"): "answer is empty: give the reference answer",
        (4, "solution"): "answer is empty: give the reference answer",
        (5, "question"): "prompt is empty",
    }
    assert [row["answer"] for row in kept] == ["2", "12"]


def test_a_csv_with_an_empty_answer_cell_names_its_row(tmp_path):
    rows = [{"question": f"{n}+1=", "solution": str(n + 1)} for n in range(5)]
    rows[3]["solution"] = ""
    errors, kept = errors_of(tmp_path, rows, QA, name="rows.csv", body=csv_bytes(rows))
    assert errors == {(4, "solution"): "answer is empty: give the reference answer"}
    assert len(kept) == 4


def test_chat_prompts_whose_messages_are_all_empty_are_refused(tmp_path):
    mapping = Mapping.from_dict({"prompt": "messages", "answer": "solution", "prompt_format": "chat"})
    rows = [
        {"messages": [{"role": "user", "content": "2+2?"}], "solution": "4"},
        {"messages": [{"role": "system", "content": ""}, {"role": "user", "content": " "}], "solution": "4"},
    ]
    errors, _ = errors_of(tmp_path, rows, mapping)
    assert errors == {(2, "messages"): "prompt is empty: every message's content is empty"}


def test_tests_that_do_not_parse_are_row_errors_naming_the_test(tmp_path):
    rows = [
        {"question": "q1", "solution": "", "tests": "assert f(1) == 2"},
        {"question": "q2", "solution": "", "tests": ["assert f(1) == 2", "assert f(2) == (3"]},
        {"question": "q3", "solution": "", "tests": "def f(:\n  pass"},
        {"question": "q4", "solution": "", "tests": [{"stdin": "1\n", "stdout": "2\n"}, {"call": "f"}]},
        {"question": "q5", "solution": "", "tests": '[{"stdin": "1", "stdout": 2}]'},
        {"question": "q6", "solution": "", "tests": '{"inputs": ["1"], "outputs": []}'},
        {"question": "q7", "solution": "", "tests": '[{"stdin": "1", "stdout": "2"}'},
        {"question": "q8", "solution": "", "tests": '{"inputs": ["1\\n"], "outputs": ["2\\n"]}'},
        {"question": "q9", "solution": "", "tests": [{"call": "f", "args": [1], "expected": 2}]},
        {"question": "q10", "solution": "", "tests": ""},
        {"question": "q11", "solution": "", "tests": [{"stdin": "", "stdout": "x"}, 3]},
    ]
    errors, kept = errors_of(tmp_path, rows, CODE)
    assert errors == {
        (2, "tests"): "tests: test 2 is not valid Python: '(' was never closed (line 1)",
        (3, "tests"): "tests: the test is not valid Python: invalid syntax (line 1)",
        (
            4,
            "tests",
        ): "tests: test 2: a call test needs args (a list), optional kwargs (an object) and expected",
        (5, "tests"): "tests: an io test needs stdin and stdout as strings",
        (6, "tests"): "tests: inputs and outputs must be lists of the same length",
        (7, "tests"): "tests look like JSON but are not valid JSON: Expecting ',' delimiter (line 1)",
        # No tests and no answer: nothing to check the row by.
        (10, "solution"): "answer is empty: give the reference answer (or tests)",
        (11, "tests"): "tests: test 2: must be a string or a list of strings, {stdin, stdout} or "
        "{call, args, expected}",
    }
    # The forms that parse are kept as the judge reads them (JSON text from a CSV cell becomes its value).
    assert [row["tests"] for row in kept] == [
        ["assert f(1) == 2"],
        {"inputs": ["1\n"], "outputs": ["2\n"]},
        [{"call": "f", "args": [1], "expected": 2}],
    ]


def test_a_code_row_needs_no_answer_but_a_math_row_does(tmp_path):
    rows = [
        {"question": "write f", "solution": "", "tests": "assert f(1) == 2"},
        {"question": "1+1=", "solution": "2", "tests": ""},
        {"question": "2+2=", "solution": "", "tests": ""},
    ]
    errors, kept = errors_of(tmp_path, rows, CODE, name="mixed.csv", body=csv_bytes(rows))
    assert list(errors) == [(3, "solution")]
    assert [(row["answer"], row["tests"]) for row in kept] == [("", ["assert f(1) == 2"]), ("2", [])]


def test_the_demo_rows_and_a_domain_pack_still_pass_the_checks():
    mapping = Mapping.from_dict({"prompt": "prompt", "answer": "answer", "tests": "tests"})
    for number, row in enumerate(addition_rows(n=200, seed=1), start=1):
        out, errors = canonical_row(json.loads(json.dumps(row)), mapping=mapping, row=number)
        assert not errors and out["tests"] == row["tests"]
    from anneal.datasets.pack_catalogue import generate_task

    pack = generate_task(task="basic_arithmetic", size=20, seed=0, difficulty=None)
    mapping = Mapping.from_dict({"prompt": "prompt", "answer": "answer", "domain": "domain"})
    for number, row in enumerate(pack.rows, start=1):
        _, errors = canonical_row(row, mapping=mapping, row=number)
        assert not errors, (row, errors)


@pytest.mark.django_db
def test_the_review_page_lists_the_bad_rows_by_row_and_field(world, client):
    rows = [
        {"question": f"{n}+2=", "solution": str(n + 2), "tests": f"assert result == {n + 2}"}
        for n in range(8)
    ]
    rows[2]["solution"], rows[2]["tests"] = "", ""
    rows[5]["tests"] = "assert result =="
    out = io.StringIO()
    writer = csv.DictWriter(out, fieldnames=list(rows[0]))
    writer.writeheader()
    writer.writerows(rows)
    api = api_client(world["owner"])
    fields = {"prompt_field": "question", "answer_field": "solution", "tests_field": "tests"}
    response = api_upload(api, "checked", out.getvalue().encode(), "rows.csv", **fields)
    assert response.status_code == 202, response.content
    dataset_upload_ingest(upload_id=response.json()["id"])
    upload = api.get(f"/api/v1/datasets/uploads/{response.json()['id']}").json()
    assert upload["rows_valid"] == 6 and upload["state"] == "review"
    client.force_login(world["owner"])
    page = client.get(reverse("upload-detail", args=[upload["id"]])).content.decode()
    assert "answer is empty: give the reference answer (or tests)" in page
    assert "tests: the test is not valid Python: invalid syntax (line 1)" in page
