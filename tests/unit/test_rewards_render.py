"""The render verifier through the real sandbox (profile render: rsvg-convert on bubblewrap, and on the docker
backend's render image when it is built): the reference scores 1, a near miss partly, a blank canvas and other
shapes 0; an answer that links to the reference's file, or to a host file, draws nothing from it; an entity
bomb does not render. The svg_shapes pack's references all score 1."""

import pytest

from gpu_jobs.document_tasks import TASKS, document_rows
from gpu_jobs.rewards import build_scorer, validate_spec
from gpu_jobs.rewards.base import SpecError
from gpu_jobs.rewards.render import extract_svg
from tests.profile_backends import backend_params, close

HEAD = '<svg xmlns="http://www.w3.org/2000/svg" xmlns:xlink="http://www.w3.org/1999/xlink" width="64" height="64">'
REFERENCE = (
    HEAD
    + '<circle cx="20" cy="30" r="10" fill="red"/><rect x="35" y="10" width="20" height="15" fill="blue"/></svg>'
)
NEAR = REFERENCE.replace('cx="20"', 'cx="22"')
OTHER = HEAD + '<rect x="0" y="40" width="64" height="24" fill="green"/></svg>'
BLANK = HEAD + "</svg>"
LINKS = (
    HEAD + '<image xlink:href="picture.svg" width="64" height="64"/><image href="../picture.svg" width="64" '
    'height="64"/><image href="file:///etc/passwd" width="64" height="64"/></svg>'
)
BOMB = (
    '<?xml version="1.0"?><!DOCTYPE b [<!ENTITY a "aaaaaaaaaa"><!ENTITY b "&a;&a;&a;&a;&a;&a;&a;&a;&a;&a;">'
    '<!ENTITY c "&b;&b;&b;&b;&b;&b;&b;&b;&b;&b;"><!ENTITY d "&c;&c;&c;&c;&c;&c;&c;&c;&c;&c;">'
    '<!ENTITY e "&d;&d;&d;&d;&d;&d;&d;&d;&d;&d;"><!ENTITY f "&e;&e;&e;&e;&e;&e;&e;&e;&e;&e;">]>'
    + HEAD
    + "<text>&f;&f;&f;&f;</text></svg>"
)


@pytest.fixture(scope="module", params=backend_params("render"))
def sandbox(request):
    backend = request.param()
    yield backend
    close(backend)


def test_the_reference_scores_1_a_near_miss_partly_and_nothing_drawn_or_drawn_wrong_0(sandbox):
    scorer = build_scorer({"type": "render"}, sandbox=sandbox)
    answers = [
        f"Here it is:\n```svg\n{REFERENCE}\n```",
        NEAR,
        BLANK,
        OTHER,
        LINKS,
        BOMB,
        "a circle and a square",
    ]
    results = scorer.score_batch([{"svg": REFERENCE}] * len(answers), answers)
    scores = [round(result.score, 3) for result in results]
    assert scores[0] == 1.0 and 0.3 < scores[1] < 0.95, [r.reason for r in results]
    assert scores[2:] == [0.0] * 5, [r.reason for r in results]
    assert (
        results[2].reason.startswith("structural similarity 0.6")
        and "(a blank canvas: 0.6" in results[2].reason
    )
    assert results[5].reason.startswith("the answer's SVG did not render: ")
    assert results[6].reason == "no <svg> element in the answer"
    shown = results[0].output
    assert (
        shown["answer_png"].startswith("data:image/png;base64,")
        and shown["reference_png"] == shown["answer_png"]
    )


def test_a_row_without_a_reference_and_a_bad_spec_are_named(sandbox):
    result = build_scorer({"type": "render"}, sandbox=sandbox).score({"answer": "x"}, REFERENCE)
    assert (result.score, result.reason) == (0.0, "row has no 'svg' SVG to compare with")
    with pytest.raises(SpecError) as error:
        validate_spec({"type": "render", "width": 4})
    assert (error.value.field, error.value.message) == ("width", "must be between 8 and 512 pixels")


def test_every_svg_shapes_reference_scores_1_and_a_blank_answer_0(sandbox):
    rows = [row for d in range(6) for row in document_rows(task="svg_shapes", size=2, seed=3, difficulty=d)]
    scorer = build_scorer(TASKS["svg_shapes"].spec, sandbox=sandbox)
    right = scorer.score_batch(rows, [row["answer"] for row in rows])
    assert [round(r.score, 6) for r in right] == [1.0] * len(rows), [r.reason for r in right]
    blank = scorer.score_batch(rows, [BLANK] * len(rows))
    assert max(r.score for r in blank) == 0.0


def test_the_answer_is_the_first_svg_block_or_element():
    assert extract_svg(f"```xml\n{OTHER}\n```\nor\n{REFERENCE}") == OTHER
    assert extract_svg(f"I drew {REFERENCE} for you") == REFERENCE
    assert extract_svg("```svg\n<svg><circle/>") is None  # cut off before </svg>: nothing to render
