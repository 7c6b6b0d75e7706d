"""OpenAI fine-tuning graders carried over to Anneal verifiers: each grader type scores the same samples as
OpenAI's documented rule does (computed here, independently of the verifier engine), and what cannot be carried
over is refused naming its JSON path."""

import functools
import json
import math
import re
import threading
from collections import Counter
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from gpu_jobs.rewards import build_scorer
from gpu_jobs.rewards.openai_graders import GraderRefused, Judge, convert_grader
from gpu_jobs.rewards.outbound import Outbound, parse_host_entry
from sandboxes.client import SandboxClient

ITEMS = [
    {"reference_answer": "Paris", "topic": "geo"},
    {"reference_answer": "The cat sat on the mat.", "topic": "cats"},
    {"reference_answer": "42", "topic": "math"},
]
COMPLETIONS = [
    "Paris",
    "paris",
    "The capital is Paris.",
    "the cat sat on a mat",
    "On the mat the cat sat, the cat sat today",
    "Paris, said the cat on the mat",
    "I think the cat sat on the mat",
    " 42",
    '{"answer": "Paris", "steps": 3}',
    "",
]
# Every completion against every item: the grid both sides score.
PAIRS = [(item, text) for item in ITEMS for text in COMPLETIONS]


def render(template: str, item: dict, text: str) -> str:
    """OpenAI's templating as its guide documents it: {{ namespace.variable }}, JSON paths into the value."""

    def value(match):
        namespace, *path = match.group(1).split(".")
        if namespace == "item":
            current = item
        elif path[0] == "output_text":
            return text
        else:
            try:
                current, path = json.loads(text), path[1:]
            except ValueError:
                return ""
        for step in path:
            current = current.get(step, "") if isinstance(current, dict) else ""
        return current if isinstance(current, str) else json.dumps(current)

    return re.sub(r"\{\{\s*(.*?)\s*\}\}", value, template)


def anneal_scores(grader: dict, pairs=PAIRS, **built) -> list[float]:
    spec = convert_grader(grader, judge=built.pop("judge", None)).spec
    scorer = build_scorer(spec, **built)
    return [result.score for result in scorer.score_batch([p[0] for p in pairs], [p[1] for p in pairs])]


# --- string_check: 1 or 0 --------------------------------------------------------------------------------

STRING_RULES = {
    "eq": lambda i, r: i == r,
    "ne": lambda i, r: i != r,
    "like": lambda i, r: r in i,
    "ilike": lambda i, r: r.lower() in i.lower(),
}


@pytest.mark.parametrize("operation", list(STRING_RULES))
@pytest.mark.parametrize(
    ("input_template", "reference_template"),
    [
        ("{{sample.output_text}}", "{{ item.reference_answer }}"),
        ("{{sample.output_text}}", "Paris"),
        ("{{sample.output_json.answer}}", "{{item.reference_answer}}"),
    ],
)
def test_string_check_scores_as_openai_documents(operation, input_template, reference_template):
    grader = {
        "type": "string_check",
        "name": "check",
        "input": input_template,
        "reference": reference_template,
        "operation": operation,
    }
    pairs = PAIRS
    if "output_json" in input_template:
        pairs = [
            (item, text) for item, text in PAIRS if text.startswith("{")
        ]  # output_json is set for JSON only
    expected = [
        float(STRING_RULES[operation](render(input_template, i, t), render(reference_template, i, t)))
        for i, t in pairs
    ]
    assert anneal_scores(grader, pairs) == expected
    assert 0 < sum(expected) < len(expected)  # the grid tells the operations apart


def test_string_check_eq_works_either_way_round():
    grader = {
        "type": "string_check",
        "input": "{{item.reference_answer}}",
        "reference": "{{sample.output_text}}",
    }
    scores = anneal_scores({**grader, "operation": "eq"})
    assert scores == [float(t == i["reference_answer"]) for i, t in PAIRS]


# --- text_similarity: the metric's score -----------------------------------------------------------------


def rouge_tokens(text: str) -> list[str]:
    # rouge-score's tokenizer: lower case; anything but a-z and 0-9 separates tokens.
    return re.sub(r"[^a-z0-9]+", " ", text.lower()).split()


def f_measure(overlap: int, predicted: int, target: int) -> float:
    precision, recall = overlap / max(predicted, 1), overlap / max(target, 1)
    return 0.0 if precision + recall == 0 else 2 * precision * recall / (precision + recall)


def rouge_n(target: str, prediction: str, *, n: int) -> float:
    def grams(tokens):
        return Counter(tuple(tokens[i : i + n]) for i in range(len(tokens) - n + 1))

    t, p = grams(rouge_tokens(target)), grams(rouge_tokens(prediction))
    return f_measure(sum((t & p).values()), sum(p.values()), sum(t.values()))


def rouge_l(target: str, prediction: str) -> float:
    t, p = rouge_tokens(target), rouge_tokens(prediction)
    if not t or not p:
        return 0.0
    table = [[0] * (len(p) + 1) for _ in range(len(t) + 1)]
    for i, a in enumerate(t, 1):
        for j, b in enumerate(p, 1):
            table[i][j] = table[i - 1][j - 1] + 1 if a == b else max(table[i - 1][j], table[i][j - 1])
    return f_measure(table[-1][-1], len(p), len(t))


def fuzzy(a: str, b: str) -> float:
    # rapidfuzz's ratio, which the guide names: the normalised Indel similarity, 2 x LCS / both lengths.
    return 2 * _lcs_chars(a, b) / (len(a) + len(b)) if a or b else 1.0


def _lcs_chars(a: str, b: str) -> int:
    previous = [0] * (len(b) + 1)
    for x in a:
        current = [0]
        for j, y in enumerate(b, 1):
            current.append(previous[j - 1] + 1 if x == y else max(previous[j], current[j - 1]))
        previous = current
    return previous[-1]


SIMILARITY_RULES = {
    "fuzzy_match": lambda ref, text: fuzzy(text, ref),
    **{f"rouge_{n}": functools.partial(rouge_n, n=n) for n in range(1, 6)},
    "rouge_l": rouge_l,
}


@pytest.mark.parametrize("metric", list(SIMILARITY_RULES))
def test_text_similarity_scores_as_openai_documents(metric):
    grader = {
        "type": "text_similarity",
        "name": "close",
        "input": "{{sample.output_text}}",
        "reference": "{{item.reference_answer}}",
        "evaluation_metric": metric,
        "pass_threshold": 0.5,
    }
    pairs = [(item, text) for item, text in PAIRS if text]  # an empty answer scores 0 in Anneal
    expected = [SIMILARITY_RULES[metric](item["reference_answer"], text) for item, text in pairs]
    assert anneal_scores(grader, pairs) == pytest.approx(expected, abs=1e-9)
    assert any(0 < value < 1 for value in expected) and 0 in expected
    assert "pass_threshold 0.5" in convert_grader(grader).notes[0]


def test_text_similarity_bleu_maps_to_the_bleu_metric():
    grader = {
        "type": "text_similarity",
        "input": "{{sample.output_text}}",
        "reference": "{{item.reference_answer}}",
        "evaluation_metric": "bleu",
    }
    assert convert_grader(grader).spec["metric"] == "bleu"
    pairs = [({"reference_answer": "the cat sat on the mat"}, "the cat sat on the mat"), (ITEMS[0], "xyz")]
    assert anneal_scores(grader, pairs) == [1.0, 0.0]


# --- score_model: the judge gets the rendered messages; its score within range --------------------------


class Judge200(BaseHTTPRequestHandler):
    requests: list[dict] = []

    def do_POST(self):  # noqa: N802 (http.server's naming)
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        Judge200.requests.append(body)
        answer = body["messages"][-1]["content"].split("ANSWER:")[-1]
        payload = json.dumps({"choices": [{"message": {"content": str(len(answer) % 11)}}]}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    def log_message(self, *args):
        pass


@pytest.fixture(scope="module")
def judge_url():
    server = ThreadingHTTPServer(("127.0.0.1", 0), Judge200)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}/v1"
    server.shutdown()
    server.server_close()


def test_score_model_sends_the_rendered_messages_and_scales_the_score(judge_url):
    messages = [
        {"role": "developer", "content": "Grade {strictly}. Reply with a number from 0 to 10."},
        {"role": "user", "content": "REF: {{ item.reference_answer }}\nANSWER:{{sample.output_text}}"},
    ]
    grader = {
        "type": "score_model",
        "name": "judge",
        "model": "gpt-judge",
        "input": messages,
        "range": [0, 10],
        "sampling_params": {"temperature": 0.3, "seed": 7, "max_completions_tokens": 50, "top_p": 0.9},
    }
    outbound = Outbound(allowed_hosts=(parse_host_entry("127.0.0.1"),))
    Judge200.requests.clear()
    scores = anneal_scores(grader, judge=Judge(endpoint=judge_url), outbound=outbound)
    expected_scores = [(len(text) % 11) / 10 for _, text in PAIRS]
    assert scores == pytest.approx(expected_scores)
    sent = sorted(json.dumps(r["messages"]) for r in Judge200.requests)
    expected = sorted(
        json.dumps(
            [
                {"role": "system", "content": messages[0]["content"]},
                {"role": "user", "content": render(messages[1]["content"], item, text)},
            ]
        )
        for item, text in PAIRS
    )
    assert sent == expected
    first = Judge200.requests[0]
    assert (first["model"], first["temperature"], first["seed"], first["max_tokens"], first["top_p"]) == (
        "gpt-judge",
        0.3,
        7,
        50,
        0.9,
    )


def test_score_model_uses_the_team_deployment_named_as_the_model():
    grader = {
        "type": "score_model",
        "model": "my-judge",
        "input": [{"role": "user", "content": "{{sample.output_text}}"}],
    }
    spec = convert_grader(grader, judge=Judge(deployments={"my-judge"})).spec
    assert (spec["deployment"], spec["endpoint"], spec["temperature"]) == ("my-judge", None, 1)


# --- python: grade(sample, item) in the sandbox -------------------------------------------------------------

GRADE = """
import json

def score(x):
    return x


def grade(sample, item):
    text = sample["output_text"]
    assert sample["choices"][0]["message"]["content"] == text
    if isinstance(sample["output_json"], dict):
        text = sample["output_json"].get("answer", "")
    bonus = 0.25 if item.get("messages") else 0.0
    return (0.75 if text.strip().lower() == item["reference_answer"].lower() else 0.0) + bonus
"""


def test_python_grader_gets_openais_sample_and_item_in_the_sandbox():
    with pytest.raises(GraderRefused, match="rename") as refused:
        convert_grader({"type": "python", "source": GRADE})
    assert refused.value.field == "source"
    source = GRADE.replace("def score(x):\n    return x\n", "")
    chat = {"prompt": [{"role": "user", "content": "Capital of France?"}], "reference_answer": "Paris"}
    pairs = [*PAIRS, (chat, "paris"), (chat, "Lyon")]

    namespace: dict = {}
    exec(source, namespace)  # the test's own grader, run here the way OpenAI calls it
    expected = []
    for item, text in pairs:
        try:
            output_json = json.loads(text)
        except ValueError:
            output_json = None
        sample = {
            "output_text": text,
            "output_json": output_json,
            "choices": [{"message": {"role": "assistant", "content": text}}],
        }
        openai_item = {**item, "messages": item["prompt"]} if "prompt" in item else item
        expected.append(namespace["grade"](sample, openai_item))
    grader = {"type": "python", "name": "py", "source": source, "image_tag": "2025-05-08"}
    assert anneal_scores(grader, pairs, sandbox=SandboxClient()) == expected
    assert set(expected) == {0.0, 0.25, 0.75, 1.0}


# --- multi: calculate_output over the named graders ---------------------------------------------------------


def test_multi_combines_its_graders_with_openais_formula_language():
    graders = {
        "exact": {
            "type": "string_check",
            "input": "{{sample.output_text}}",
            "reference": "{{item.reference_answer}}",
            "operation": "eq",
        },
        "mentions": {
            "type": "string_check",
            "input": "{{sample.output_text}}",
            "reference": "{{item.reference_answer}}",
            "operation": "ilike",
        },
        "close": {
            "type": "text_similarity",
            "input": "{{sample.output_text}}",
            "reference": "{{item.reference_answer}}",
            "evaluation_metric": "rouge_1",
        },
    }
    formula = "0.5 * exact + 0.3 * mentions ^ 2 + 0.2 * max(close, floor(exact)) + 0 * log(exp(1))"
    grader = {"type": "multi", "name": "blend", "graders": graders, "calculate_output": formula}
    expected = []
    for item, text in PAIRS:
        ref = item["reference_answer"]
        exact, mentions = float(text == ref), float(ref.lower() in text.lower())
        close = rouge_n(ref, text, n=1) if text else 0.0
        expected.append(
            0.5 * exact + 0.3 * mentions**2 + 0.2 * max(close, math.floor(exact)) + 0 * math.log(math.e)
        )
    assert anneal_scores(grader) == pytest.approx(expected)
    assert len(set(expected)) > 3


# --- refusals name the JSON path ---------------------------------------------------------------------------

SAMPLE = "{{sample.output_text}}"
REF = "{{item.reference_answer}}"


@pytest.mark.parametrize(
    ("grader", "field", "words"),
    [
        ({"type": "label_model"}, "type", "score_model"),
        (
            {"type": "string_check", "input": SAMPLE, "reference": REF, "operation": "regex"},
            "operation",
            "eq, ne",
        ),
        (
            {"type": "string_check", "input": SAMPLE, "reference": REF, "operation": "eq", "x": 1},
            "x",
            "not a field",
        ),
        (
            {"type": "string_check", "input": SAMPLE, "reference": f"A: {REF}", "operation": "eq"},
            "reference",
            "mixes",
        ),
        (
            {"type": "string_check", "input": "{{item.a.b}}", "reference": SAMPLE, "operation": "eq"},
            "input",
            "top-level",
        ),
        (
            {"type": "string_check", "input": "{{sample.output_tools}}", "reference": REF, "operation": "eq"},
            "input",
            "output_tools",
        ),
        (
            {"type": "string_check", "input": REF, "reference": "x", "operation": "eq"},
            "input",
            "neither side",
        ),
        (
            {"type": "string_check", "input": REF, "reference": SAMPLE, "operation": "like"},
            "input",
            "contains",
        ),
        (
            {"type": "text_similarity", "input": SAMPLE, "reference": REF, "evaluation_metric": "meteor"},
            "evaluation_metric",
            "meteor",
        ),
        (
            {"type": "text_similarity", "input": SAMPLE, "reference": REF, "evaluation_metric": "gleu"},
            "evaluation_metric",
            "gleu",
        ),
        (
            {"type": "text_similarity", "input": SAMPLE, "reference": "Paris", "evaluation_metric": "bleu"},
            "reference",
            "row field",
        ),
        (
            {"type": "score_model", "model": "gpt-4o", "input": [{"role": "user", "content": SAMPLE}]},
            "model",
            "deployments",
        ),
        (
            {"type": "score_model", "model": "j", "input": [{"role": "user", "content": "no answer"}]},
            "input",
            "sample.output_text",
        ),
        (
            {
                "type": "score_model",
                "model": "j",
                "input": [{"role": "user", "content": [{"type": "input_image", "image_url": "x"}]}],
            },
            "input[0].content[0]",
            "input_image",
        ),
        (
            {
                "type": "score_model",
                "model": "j",
                "input": [{"role": "user", "content": SAMPLE}],
                "range": [5, 1],
            },
            "range",
            "low below high",
        ),
        (
            {
                "type": "score_model",
                "model": "j",
                "input": [{"role": "user", "content": SAMPLE}],
                "sampling_params": {"reasoning_effort": "high"},
            },
            "sampling_params.reasoning_effort",
            "not carried",
        ),
        (
            {
                "type": "score_model",
                "model": "j",
                "input": [{"role": "user", "content": SAMPLE}],
                "sampling_params": {"max_completions_tokens": 99999},
            },
            "sampling_params.max_completions_tokens",
            "8192",
        ),
        (
            {
                "type": "score_model",
                "model": "j",
                "input": [{"role": "user", "content": f"{SAMPLE} {REF} {{{{item.topic}}}}"}],
            },
            "input[0].content",
            "one row field",
        ),
        ({"type": "python", "source": "def grade(sample, item):\n    return 1 +\n"}, "source", "line 2"),
        (
            {"type": "python", "source": "def check(sample, item):\n    return 1\n"},
            "source",
            "grade(sample, item)",
        ),
        (
            {
                "type": "multi",
                "graders": {"a b": {"type": "python", "source": "def grade(s, i): return 1"}},
                "calculate_output": "1",
            },
            "graders.a b",
            "letters",
        ),
        (
            {
                "type": "multi",
                "graders": {
                    "a": {"type": "string_check", "input": SAMPLE, "reference": REF, "operation": "in"}
                },
                "calculate_output": "a",
            },
            "graders.a.operation",
            "eq",
        ),
        (
            {
                "type": "multi",
                "graders": {"a": {"type": "python", "source": "def grade(s, i): return 1"}},
                "calculate_output": "a + b",
            },
            "calculate_output",
            "'b'",
        ),
        (
            {
                "type": "multi",
                "graders": {"a": {"type": "python", "source": "def grade(s, i): return 1"}},
                "calculate_output": "__import__('os')",
            },
            "calculate_output",
            "may call only",
        ),
    ],
)
def test_what_cannot_be_carried_over_is_refused_naming_its_path(grader, field, words):
    with pytest.raises(GraderRefused) as refused:
        convert_grader(grader, judge=Judge(deployments={"j"}))
    assert refused.value.field == field, refused.value
    assert words in refused.value.message
