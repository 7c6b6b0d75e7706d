"""Every verifier type on answers it must accept and answers it must refuse, and the spec errors it names."""

import json
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from gpu_jobs.rewards import SpecError, build_scorer, validate_spec
from gpu_jobs.rewards.extract import extract_answer, last_json_object
from gpu_jobs.rewards.outbound import Outbound, parse_host_entry
from sandboxes.client import SandboxClient


def score(spec: dict, row: dict, completion: str) -> float:
    return build_scorer(spec).score(row, completion).score


# --- shared extraction ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "mode", "expected"),
    [
        ("so \\boxed{\\frac{1}{2}} and \\boxed{7}", "boxed", "7"),
        ("\\boxed{\\frac{1}{2}}", "boxed", "\\frac{1}{2}"),
        ("\\boxed{unclosed", "boxed", None),
        ("<answer>3</answer> then <answer> 4 </answer>", "tag", " 4 "),
        ("<answer>cut off", "tag", "cut off"),
        ("no tag", "tag", None),
        ('thinking... {"answer": 12, "unit": "kg"}', "json_field", "12"),
        ('```json\n{"answer": "Paris"}\n```', "json_field", "Paris"),
        ('{"other": 1}', "json_field", None),
    ],
)
def test_shared_extraction(text, mode, expected):
    assert extract_answer(text, mode=mode) == expected


def test_json_field_reaches_inside_with_a_dotted_path():
    assert (
        extract_answer('{"result": {"value": [1, 2]}}', mode="json_field", json_field="result.value.1") == "2"
    )


def test_last_json_object_skips_broken_braces():
    assert last_json_object('{oops} {"a": 1} {also broken') == {"a": 1}


# --- exact match normalisation --------------------------------------------------------------------


@pytest.mark.parametrize(
    ("options", "answer", "reference", "expected"),
    [
        ({}, "  Paris ", "paris", 1.0),
        ({"case_sensitive": True}, "Paris", "paris", 0.0),
        ({}, "New   York", "new york", 0.0),
        ({"collapse_whitespace": True}, "New \n  York", "new york", 1.0),
        ({}, "Paris.", "Paris", 0.0),
        ({"ignore_punctuation": True}, "Paris!", "Paris", 1.0),
        ({}, "１２３", "123", 1.0),  # full-width digits under NFKC
        ({"unicode_form": "none"}, "１２３", "123", 0.0),
        ({}, "café", "cafe\u0301", 1.0),  # composed and decomposed é
        ({"extract": "tag"}, "<think>hm</think><answer>Lyon</answer>", "lyon", 1.0),
        ({"extract": "tag"}, "Lyon", "lyon", 0.0),
    ],
)
def test_exact_match_normalisation(options, answer, reference, expected):
    assert score({"type": "exact_match", **options}, {"answer": reference}, answer) == expected


def test_exact_match_accepts_any_of_a_list_of_references():
    spec = {"type": "exact_match"}
    assert score(spec, {"answer": ["NYC", "New York"]}, "new york") == 1.0
    assert score(spec, {"answer": ["NYC", "New York"]}, "Boston") == 0.0


# --- regex ----------------------------------------------------------------------------------------


def test_regex_search_and_fullmatch():
    assert score({"type": "regex", "pattern": r"\d+ apples"}, {}, "I have 12 apples") == 1.0
    assert (
        score({"type": "regex", "pattern": r"\d+ apples", "match": "fullmatch"}, {}, "I have 12 apples")
        == 0.0
    )
    assert score({"type": "regex", "pattern": r"\d+ apples", "match": "fullmatch"}, {}, "12 apples") == 1.0
    assert score({"type": "regex", "pattern": r"\d+ pears"}, {}, "I have 12 apples") == 0.0


def test_regex_group_compared_with_the_reference():
    spec = {"type": "regex", "pattern": r"answer is (?P<n>-?\d+)", "group": "n", "reference_field": "answer"}
    assert score(spec, {"answer": "57"}, "so the answer is 57.") == 1.0
    result = build_scorer(spec).score({"answer": "57"}, "so the answer is 58.")
    assert result.score == 0.0 and "'58'" in result.reason


def test_a_group_number_typed_as_text_is_a_number():
    assert validate_spec({"type": "regex", "pattern": "a(b)", "group": "1"})["group"] == 1


def test_a_catastrophic_pattern_times_out_and_scores_zero():
    result = build_scorer({"type": "regex", "pattern": r"(a+)+$"}).score({}, "a" * 5000 + "b")
    assert result.score == 0.0 and "took over" in result.reason


@pytest.mark.parametrize(
    ("spec", "field"),
    [
        ({"type": "regex", "pattern": "(unclosed"}, "pattern"),
        ({"type": "regex", "pattern": "a(b)", "group": 2}, "group"),
        ({"type": "regex", "pattern": "a(b)", "group": "name"}, "group"),
        ({"type": "regex"}, "pattern"),
    ],
)
def test_regex_spec_errors(spec, field):
    with pytest.raises(SpecError) as caught:
        validate_spec(spec)
    assert caught.value.field == field


# --- numeric --------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("options", "reference", "completion", "expected"),
    [
        ({}, "1200", "The total is $1,200.", 1.0),
        ({}, "1200", "The total is $1,201.", 0.0),
        ({"abs_tol": 1}, "1200", "The total is 1,201 dollars", 1.0),
        ({"rel_tol": 0.01}, "100", "about 100.9 km", 1.0),
        ({"rel_tol": 0.01}, "100", "about 102 km", 0.0),
        ({}, "0.5", "it is 1/2", 1.0),
        ({}, "-3", "x = −3", 1.0),
        ({}, "1234567", "1 234 567 people", 1.0),
        ({"extract": "tag"}, "7", "I guess 3 <answer>7 m</answer> or 9", 1.0),
        ({"extract": "tag"}, "7", "I guess 7", 0.0),
        ({}, "5", "no number here", 0.0),
    ],
)
def test_numeric(options, reference, completion, expected):
    assert score({"type": "numeric", **options}, {"answer": reference}, completion) == expected


def test_numeric_rejects_negative_tolerance():
    with pytest.raises(SpecError, match="abs_tol"):
        validate_spec({"type": "numeric", "abs_tol": -1})


# --- math -----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("reference", "completion", "expected"),
    [
        ("1/2", "The answer is $\\frac{1}{2}$", 1.0),
        ("0.5", "so \\boxed{\\frac{1}{2}}", 1.0),
        ("x+1", "$1 + x$", 1.0),
        ("\\sqrt{2}", "$\\sqrt{2}$", 1.0),
        ("3", "\\boxed{4}", 0.0),
        ("x+1", "$x - 1$", 0.0),
        ("3", "", 0.0),
    ],
)
def test_math_equivalence(reference, completion, expected):
    assert score({"type": "math"}, {"answer": reference}, completion) == expected


def test_scoring_math_similarity_and_json_does_not_load_torch():
    # A fresh interpreter: in this one, other tests may have imported torch already.
    import subprocess

    code = (
        "import sys; from gpu_jobs.rewards import build_scorer\n"
        "for spec in [{'type': 'math'}, {'type': 'similarity', 'metric': 'bleu'}, {'type': 'json'},"
        " {'type': 'regex', 'pattern': 'x'}]:\n"
        "    build_scorer(spec).score({'answer': '2'}, '$2$')\n"
        "print(sorted(m for m in ('torch', 'transformers') if m in sys.modules))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True
    )
    assert out.stdout.strip() == "[]"


# --- JSON -----------------------------------------------------------------------------------------

SCHEMA = {
    "type": "object",
    "required": ["city", "population"],
    "properties": {"population": {"type": "integer"}},
}


def test_json_schema_and_fields():
    spec = {"type": "json", "schema": SCHEMA, "reference_field": "answer", "compare_fields": ["city"]}
    row = {"answer": json.dumps({"city": "Paris", "population": 2})}
    assert score(spec, row, 'Here: {"city": "Paris", "population": 3}') == 1.0
    wrong_city = build_scorer(spec).score(row, '{"city": "Lyon", "population": 3}')
    assert wrong_city.score == 0.0 and "city" in wrong_city.reason
    wrong_type = build_scorer(spec).score(row, '{"city": "Paris", "population": "many"}')
    assert wrong_type.score == 0.0 and "population" in wrong_type.reason
    assert score(spec, row, "not json at all") == 0.0


def test_json_fraction_of_fields():
    spec = {
        "type": "json",
        "reference_field": "answer",
        "compare_fields": ["a", "b.c"],
        "scoring": "fraction",
    }
    assert score(spec, {"answer": {"a": 1, "b": {"c": 2}}}, '{"a": 1, "b": {"c": 3}}') == 0.5


def test_json_spec_errors():
    with pytest.raises(SpecError, match="schema"):
        validate_spec({"type": "json", "schema": {"type": "no-such-type"}})
    with pytest.raises(SpecError, match="reference_field"):
        validate_spec({"type": "json", "compare_fields": ["a"]})


# --- keywords and format --------------------------------------------------------------------------


def test_keywords_required_and_forbidden():
    spec = {"type": "keywords", "required": ["chlorophyll", "light"], "forbidden": ["as an AI"]}
    assert score(spec, {}, "Chlorophyll absorbs light.") == 1.0
    assert score(spec, {}, "Chlorophyll absorbs sunlight.") == 0.0  # whole words: not inside "sunlight"
    assert score(spec, {}, "As an AI, chlorophyll absorbs light.") == 0.0
    assert score({**spec, "scoring": "fraction"}, {}, "Chlorophyll is green.") == 0.5


def test_keywords_from_a_row_column():
    spec = {"type": "keywords", "required_field": "must_say"}
    assert score(spec, {"must_say": ["Paris"]}, "It is Paris.") == 1.0
    assert score(spec, {"must_say": "Paris"}, "It is Lyon.") == 0.0


def test_format_think_then_answer():
    spec = {"type": "format"}
    assert score(spec, {}, "<think>12+45 is 57</think>\n<answer>57</answer>") == 1.0
    assert score(spec, {}, "<answer>57</answer><think>12+45</think>") == 0.0  # wrong order
    assert score(spec, {}, "<think></think><answer> </answer>") == 0.0  # format without content
    assert score(spec, {}, "57") == 0.0


def test_format_length_limits():
    spec = {"type": "format", "require_think": False, "require_answer": False, "max_words": 3}
    assert score(spec, {}, "one two three") == 1.0
    result = build_scorer(spec).score({}, "one two three four")
    assert result.score == 0.0 and "4 words" in result.reason


def test_format_fraction_reports_each_rule():
    result = build_scorer({"type": "format", "scoring": "fraction"}).score({}, "<answer>57</answer>")
    assert result.parts == {"think": 0.0, "answer": 1.0, "order": 0.0}
    assert result.score == pytest.approx(1 / 3)


# --- text similarity ------------------------------------------------------------------------------


@pytest.mark.parametrize("metric", ["bleu", "rouge_l", "chrf"])
def test_similarity_ranks_close_text_higher(metric):
    spec = {"type": "similarity", "metric": metric}
    row = {"answer": "the quick brown fox jumps over the lazy dog"}
    same = score(spec, row, "the quick brown fox jumps over the lazy dog")
    close = score(spec, row, "the quick brown fox jumped over a lazy dog")
    far = score(spec, row, "stock markets fell sharply on monday")
    assert same == pytest.approx(1.0)
    assert same > close > far
    assert far < 0.3


def test_rouge_l_is_the_lcs_f1():
    from gpu_jobs.rewards.similarity import rouge_l_f1

    # LCS of "a b c d" and "a c d e" is "a c d": P = R = 3/4.
    assert rouge_l_f1("a b c d", "a c d e") == pytest.approx(0.75)


def test_embedding_similarity_on_the_packaged_model():
    spec = {"type": "embedding"}
    scorer = build_scorer(spec)
    rows = [{"answer": "A cat was sitting on a mat."}] * 2
    close, far = scorer.score_batch(rows, ["The cat sat on the mat.", "Interest rates rose in March."])
    assert close.score > 0.8 > 0.3 > far.score
    assert "cosine" in close.parts


def test_importing_the_engine_does_not_import_torch():
    import subprocess

    code = (
        "import sys, gpu_jobs.rewards; build = gpu_jobs.rewards.build_scorer; print('torch' in sys.modules)"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True
    )
    assert out.stdout.strip() == "False"


# --- custom Python, in the sandbox ---------------------------------------------------------------


@pytest.fixture(scope="module")
def sandbox():
    return SandboxClient()


CUSTOM = """
def score(row, completion):
    if completion.strip() == row["answer"]:
        return 1.0, "exact"
    return {"score": 0.25, "reason": "close enough?"} if row["answer"] in completion else 0
"""


def test_custom_python_scores_in_the_sandbox(sandbox):
    scorer = build_scorer({"type": "custom_python", "code": CUSTOM}, sandbox=sandbox)
    results = scorer.score_batch([{"answer": "57"}] * 3, ["57", "it is 57", "12"])
    assert [r.score for r in results] == [1.0, 0.25, 0.0]
    assert results[0].reason == "exact" and results[1].reason == "close enough?"


def test_custom_python_cannot_touch_this_process(sandbox, tmp_path):
    marker = tmp_path / "touched"
    code = f"def score(row, completion):\n    open({str(marker)!r}, 'w').write('x')\n    return 1.0\n"
    result = build_scorer({"type": "custom_python", "code": code}, sandbox=sandbox).score({}, "x")
    assert result.score == 0.0 and not marker.exists()


def test_custom_python_errors_hangs_and_bad_returns_score_zero(sandbox):
    code = """
def score(row, completion):
    if completion == "raise":
        raise KeyError("missing")
    if completion == "nan":
        return float("nan")
    if completion == "big":
        return 7
    return 1
"""
    scorer = build_scorer({"type": "custom_python", "code": code}, sandbox=sandbox)
    raised, nan, big, fine = scorer.score_batch([{}] * 4, ["raise", "nan", "big", "ok"])
    assert raised.score == 0.0 and "KeyError" in raised.reason
    assert nan.score == 0.0 and "finite" in nan.reason
    assert big.score == 1.0 and "within 0..1" in big.reason
    assert fine.score == 1.0
    hang = build_scorer(
        {
            "type": "custom_python",
            "code": "def score(row, completion):\n    while True: pass\n",
            "timeout_s": 1,
        },
        sandbox=sandbox,
    ).score({}, "x")
    assert hang.score == 0.0 and "timeout" in hang.reason


def test_custom_python_spec_errors():
    with pytest.raises(SpecError, match="code: line 1"):
        validate_spec({"type": "custom_python", "code": "def score(:"})
    with pytest.raises(SpecError, match="score"):
        validate_spec({"type": "custom_python", "code": "def grade(row, completion):\n    return 1\n"})


# --- model judge, against a real HTTP server on 127.0.0.1 ----------------------------------------


class JudgeHandler(BaseHTTPRequestHandler):
    """A tiny OpenAI-compatible judge: replies with the score written in the answer it is asked to grade."""

    prompts: list[str] = []

    def do_POST(self):  # noqa: N802 (http.server's naming)
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        prompt = body["messages"][0]["content"]
        JudgeHandler.prompts.append(prompt)
        if "server error" in prompt:
            self.send_response(500)
            self.end_headers()
            self.wfile.write(b"boom")
            return
        reply = (
            prompt.split("JUDGE SAYS:")[-1].split("\n")[0].strip() if "JUDGE SAYS:" in prompt else "no idea"
        )
        payload = json.dumps({"choices": [{"message": {"role": "assistant", "content": reply}}]}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    def log_message(self, *args):
        pass


@pytest.fixture(scope="module")
def judge_url():
    server = ThreadingHTTPServer(("127.0.0.1", 0), JudgeHandler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/v1"
    server.shutdown()
    server.server_close()


# The judge server listens on loopback, which a judge reaches only when that exact host is allowed.
LOOPBACK_ALLOWED = Outbound(allowed_hosts=(parse_host_entry("127.0.0.1"),))


def test_model_judge_scores_are_parsed_and_bounded(judge_url):
    spec = {"type": "model_judge", "endpoint": judge_url, "model": "judge", "max_score": 10}
    scorer = build_scorer(spec, outbound=LOOPBACK_ALLOWED)
    completions = [
        "JUDGE SAYS: Reasoning fine. Score: 8",
        "JUDGE SAYS: Score: 15",
        "JUDGE SAYS: Score: -2",
        "JUDGE SAYS: I will not grade",
        "server error please",
    ]
    results = scorer.score_batch([{"prompt": "12+45=", "answer": "57"}] * 5, completions)
    assert [r.score for r in results] == [0.8, 1.0, 0.0, 0.0, 0.0]
    assert "bounded" in results[1].reason
    assert "no score" in results[3].reason
    assert "HTTP 500" in results[4].reason
    assert any("Reference answer:\n57" in prompt and "12+45=" in prompt for prompt in JudgeHandler.prompts)


def test_model_judge_unreachable_scores_zero():
    spec = {"type": "model_judge", "endpoint": "http://127.0.0.1:9/v1", "model": "judge", "timeout_s": 2}
    result = build_scorer(spec, outbound=LOOPBACK_ALLOWED).score({}, "x")
    assert result.score == 0.0 and "unreachable" in result.reason


@pytest.mark.parametrize(
    ("spec", "field"),
    [
        ({"endpoint": "ftp://x", "model": "m"}, "endpoint"),
        ({"endpoint": "http://x/v1", "model": "m", "rubric": "grade {answer}"}, "rubric"),
        ({"endpoint": "http://x/v1", "model": "m", "rubric": "no placeholder"}, "rubric"),
        ({"endpoint": "http://x/v1", "model": "m", "min_score": 5, "max_score": 5}, "max_score"),
    ],
)
def test_model_judge_spec_errors(spec, field):
    with pytest.raises(SpecError) as caught:
        validate_spec({"type": "model_judge", **spec})
    assert caught.value.field == field


# --- failures never raise -------------------------------------------------------------------------


def test_a_scorer_never_raises_on_odd_input():
    for spec in ({"type": "exact_match"}, {"type": "numeric"}, {"type": "json"}, {"type": "format"}):
        scorer = build_scorer(spec)
        for row, completion in (({"answer": object()}, "1"), ("not a row", "1"), ({"answer": "1"}, None)):
            result = scorer.score(row, completion)
            assert result.score == 0.0 or spec["type"] == "exact_match"
