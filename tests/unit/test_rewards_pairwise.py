"""model_judge's pairwise mode against real HTTP judges on 127.0.0.1: the answer and the row's reference are
shown as A and B in both orders; a fair judge's wins, ties and losses average into the score, and a judge that
always picks the same position scores every answer 0.5 and is named for it."""

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from gpu_jobs.rewards import build_scorer, validate_spec
from gpu_jobs.rewards.base import SpecError
from gpu_jobs.rewards.outbound import Outbound, parse_host_entry

LOOPBACK_ALLOWED = Outbound(allowed_hosts=(parse_host_entry("127.0.0.1"),))


def _answers(prompt: str) -> tuple[str, str]:
    first = prompt.split("Answer A:\n", 1)[1].split("\n\nAnswer B:\n", 1)[0]
    second = prompt.split("\n\nAnswer B:\n", 1)[1].split("\n\nWhich answer", 1)[0]
    return first, second


class Judge(BaseHTTPRequestHandler):
    """/fair/v1 prefers the answer that says GOOD; /biased/v1 always answers A; /mute/v1 names no winner."""

    def do_POST(self):  # noqa: N802 (http.server's naming)
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        prompt = body["messages"][-1]["content"]
        if self.path.startswith("/biased"):
            reply = "A reads better.\nWinner: A"
        elif self.path.startswith("/mute"):
            reply = "Both have merits."
        else:
            first, second = ("GOOD" in answer for answer in _answers(prompt))
            reply = "Winner: tie" if first == second else f"Winner: {'A' if first else 'B'}"
        payload = json.dumps({"choices": [{"message": {"role": "assistant", "content": reply}}]}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    def log_message(self, *args):
        pass


@pytest.fixture(scope="module")
def base():
    server = ThreadingHTTPServer(("127.0.0.1", 0), Judge)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


def pairwise(base, judge, **spec):
    full = {"type": "model_judge", "mode": "pairwise", "endpoint": f"{base}/{judge}/v1", "model": "j", **spec}
    return build_scorer(full, outbound=LOOPBACK_ALLOWED)


def test_a_fair_judges_wins_ties_and_losses_in_both_orders_make_the_score(base):
    rows = [{"prompt": "Explain.", "answer": "meh"}, {"prompt": "Explain.", "answer": "GOOD too"}]
    results = pairwise(base, "fair").score_batch(rows * 2, ["a GOOD answer", "a GOOD answer", "meh", "meh"])
    assert [r.score for r in results] == [1.0, 0.5, 0.5, 0.0]
    assert results[0].reason == "against the reference: win as answer A, win as answer B"
    assert results[0].parts == {"wins": 2.0, "ties": 0.0}
    assert results[1].parts == {"wins": 0.0, "ties": 2.0}
    assert results[3].reason == "against the reference: loss as answer A, loss as answer B"


def test_a_judge_that_favours_a_position_decides_nothing_and_is_named(base):
    result = pairwise(base, "biased").score({"prompt": "Explain.", "answer": "GOOD"}, "meh")
    assert result.score == 0.5
    assert result.reason == (
        "against the reference: win as answer A, loss as answer B (the judge's verdict changed with the order)"
    )


def test_a_reply_naming_no_winner_or_a_row_with_nothing_to_compare_scores_zero_saying_why(base):
    result = pairwise(base, "mute").score({"prompt": "Explain.", "answer": "x"}, "y")
    assert (result.score, result.reason) == (0.0, "no winner in the judge's reply: 'Both have merits.'")
    result = pairwise(base, "fair", reference_field="baseline").score(
        {"prompt": "Explain.", "answer": "x"}, "GOOD"
    )
    assert (result.score, result.reason) == (0.0, "row has no 'baseline' answer to compare with")


def test_pairwise_specs_get_their_rubric_and_refuse_the_scoring_one():
    spec = validate_spec({"type": "model_judge", "mode": "pairwise", "endpoint": "http://x/v1", "model": "m"})
    assert "{first}" in spec["rubric"] and "{second}" in spec["rubric"]
    assert validate_spec(spec) == spec  # a saved version validates again
    with pytest.raises(SpecError) as caught:
        validate_spec(
            {
                "type": "model_judge",
                "mode": "pairwise",
                "endpoint": "http://x/v1",
                "model": "m",
                "rubric": "{first}",
            }
        )
    assert (caught.value.field, caught.value.message) == (
        "rubric",
        "must contain {first} and {second}, the two answers compared",
    )
    with pytest.raises(SpecError, match=r"unknown placeholder \{completion\}; known: prompt, first, second"):
        validate_spec(
            {
                "type": "model_judge",
                "mode": "pairwise",
                "endpoint": "http://x/v1",
                "model": "m",
                "rubric": "{first} {second} {completion}",
            }
        )
    scoring = validate_spec({"type": "model_judge", "endpoint": "http://x/v1", "model": "m"})
    assert scoring["mode"] == "score" and "{completion}" in scoring["rubric"]
