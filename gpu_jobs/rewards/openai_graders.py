"""OpenAI reinforcement fine-tuning grader JSON -> an Anneal verifier spec with the same meaning.

string_check, text_similarity, score_model, python and multi are carried over; templates become row fields
(``{{item.reference_answer}}`` -> reference_field "reference_answer") and the completion
(``{{sample.output_text}}``; ``{{sample.output_json.x}}`` -> the JSON field x of the completion). Anything
that has no Anneal equivalent is refused with GraderRefused naming its JSON path, never dropped silently.
docs/openai-graders.md lays the two side by side.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Collection
from dataclasses import dataclass, field

from gpu_jobs.rewards.base import SpecError, validate_spec
from gpu_jobs.rewards.formula import FormulaError, check_formula
from gpu_jobs.rewards.openai_templates import (
    GraderRefused,
    Ref,
    content_text,
    extract_fields_for,
    judge_text,
    side_ref,
)

_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,63}$")
KNOWN_KEYS = {
    "string_check": {"type", "name", "input", "reference", "operation"},
    "text_similarity": {"type", "name", "input", "reference", "evaluation_metric", "pass_threshold"},
    "score_model": {"type", "name", "input", "model", "range", "sampling_params", "pass_threshold"},
    "python": {"type", "name", "source", "image_tag", "pass_threshold"},
    "multi": {"type", "name", "graders", "calculate_output"},
}
OPERATIONS = ("eq", "ne", "like", "ilike")
# OpenAI metric -> (similarity metric, tokenizer); cosine goes to the embedding verifier, gleu and meteor have no
# Anneal equivalent whose scores would agree.
METRICS = {
    "fuzzy_match": ("fuzzy_match", "whitespace"),
    "bleu": ("bleu", "whitespace"),
    **{f"rouge_{n}": (f"rouge_{n}", "rouge_score") for n in range(1, 6)},
    "rouge_l": ("rouge_l", "rouge_score"),
}
REFUSED_METRICS = {
    "gleu": "Google-BLEU",
    "meteor": "METEOR (it needs WordNet data, which the verifier engine does not ship)",
}
SAMPLING_KEYS = {
    "temperature": "temperature",
    "top_p": "top_p",
    "seed": "seed",
    "max_completions_tokens": "max_tokens",
}
# An Anneal spec field a check may name -> the grader key it came from, so a refusal names the user's field.
SOURCE_OF = {
    "max_tokens": "sampling_params.max_completions_tokens",
    "temperature": "sampling_params.temperature",
    "top_p": "sampling_params.top_p",
    "seed": "sampling_params.seed",
    "min_score": "range",
    "max_score": "range",
    "messages": "input",
    "pattern": "reference",
    "code": "source",
}
PYTHON_TIMEOUT_S = 30
PYTHON_ADAPTER = """

# Added by Anneal's OpenAI grader import: OpenAI calls grade(sample, item), Anneal calls score(row, completion).
def score(row, completion):
    import json as _json

    try:
        output_json = _json.loads(completion)
    except ValueError:
        output_json = None
    sample = {
        "output_text": completion,
        "output_json": output_json,
        "output_tools": [],
        "choices": [
            {"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": completion}}
        ],
    }
    item = dict(row)
    if isinstance(row.get("prompt"), list):
        item.setdefault("messages", row["prompt"])  # the chat upload kept OpenAI's messages as the prompt
    return float(grade(sample, item))
"""


@dataclass(frozen=True)
class Judge:
    """Where a score_model's model runs: the team's deployments by name, or an endpoint the team allowed."""

    deployments: Collection[str] = ()
    endpoint: str | None = None
    api_key_secret: str | None = None


@dataclass
class Imported:
    spec: dict  # validated by gpu_jobs.rewards.validate_spec
    name: str  # the grader's own name ("" when it had none)
    notes: list[str] = field(
        default_factory=list
    )  # what the user should know (pass_threshold kept aside ...)


def convert_grader(grader: object, *, judge: Judge | None = None) -> Imported:
    """The Anneal spec for an OpenAI grader; GraderRefused naming the JSON path of what cannot be carried."""
    notes: list[str] = []
    clean = _convert(grader, "", judge or Judge(), notes, depth=0)
    name = grader.get("name") if isinstance(grader, dict) else ""
    return Imported(spec=clean, name=name if isinstance(name, str) else "", notes=notes)


def _at(prefix: str, key: str) -> str:
    return f"{prefix}.{key}" if prefix else key


def _convert(grader: object, path: str, judge: Judge, notes: list[str], *, depth: int) -> dict:
    if not isinstance(grader, dict):
        raise GraderRefused(path or "(grader)", "must be a grader object with a 'type'")
    kind = grader.get("type")
    if kind == "label_model":
        raise GraderRefused(
            _at(path, "type"), "label_model graders are for evals, not fine-tuning: use score_model"
        )
    if kind not in KNOWN_KEYS:
        known = ", ".join(KNOWN_KEYS)
        raise GraderRefused(_at(path, "type"), f"must be one of {known}, got {kind!r}")
    for key in grader:
        if key not in KNOWN_KEYS[kind]:
            raise GraderRefused(
                _at(path, key), f"is not a field of a {kind} grader, so it cannot be carried over"
            )
    if kind == "string_check":
        spec = _string_check(grader, path)
    elif kind == "text_similarity":
        spec = _text_similarity(grader, path, notes)
    elif kind == "score_model":
        spec = _score_model(grader, path, judge, notes)
    elif kind == "python":
        spec = _python(grader, path, notes)
    elif depth >= 2:
        raise GraderRefused(path, "multi graders nest at most two deep")
    else:
        spec = _multi(grader, path, judge, notes, depth=depth)
    try:
        return validate_spec(spec)
    except (
        SpecError
    ) as exc:  # a limit of the Anneal type (pattern length, token limit ...): name the grader's key
        top = exc.field.split(".")[0].split("[")[0]
        source = SOURCE_OF.get(top, top if top in grader else "")
        where = _at(path, source) if source else (path or "(grader)")
        raise GraderRefused(where, exc.message) from None


def _text(grader: dict, key: str, path: str) -> str:
    value = grader.get(key)
    if not isinstance(value, str):
        raise GraderRefused(_at(path, key), "is required and must be text")
    return value


def _sides(grader: dict, path: str) -> tuple[Ref, Ref, str]:
    """(the completion's side, the other side, the other side's key), either way round."""
    first = side_ref(_text(grader, "input", path), _at(path, "input"))
    second = side_ref(_text(grader, "reference", path), _at(path, "reference"))
    sample_kinds = ("completion", "json")
    if first.kind in sample_kinds and second.kind not in sample_kinds:
        return first, second, "reference"
    if second.kind in sample_kinds and first.kind not in sample_kinds:
        return second, first, "input"
    if first.kind in sample_kinds:
        raise GraderRefused(
            _at(path, "reference"), "both sides read the sample; one must be the item or a text"
        )
    raise GraderRefused(
        _at(path, "input"), "neither side reads the model's answer: put {{sample.output_text}} in input"
    )


def _string_check(grader: dict, path: str) -> dict:
    operation = grader.get("operation")
    if operation not in OPERATIONS:
        raise GraderRefused(
            _at(path, "operation"), f"must be one of {', '.join(OPERATIONS)}, got {operation!r}"
        )
    sample, other, other_key = _sides(grader, path)
    if operation in ("like", "ilike") and other_key != "reference":
        raise GraderRefused(
            _at(path, "input"), f"{operation} checks that input contains reference: input must be the sample"
        )
    exact = operation != "ilike"
    if other.kind == "item":
        spec: dict = {
            "type": "exact_match",
            "reference_field": other.value,
            "compare": "contains" if operation in ("like", "ilike") else "equal",
            "case_sensitive": exact,
            "strip_whitespace": False,
            "collapse_whitespace": False,
            "ignore_punctuation": False,
            "unicode_form": "none",
            **extract_fields_for(sample),
        }
    else:
        if not other.value:
            raise GraderRefused(_at(path, other_key), "is empty: there is nothing to compare with")
        spec = {
            "type": "regex",
            "pattern": re.escape(other.value),
            "match": "search" if operation in ("like", "ilike") else "fullmatch",
            "ignore_case": not exact,
            **extract_fields_for(sample),
        }
    if operation == "ne":
        return {
            "type": "composite",
            "mode": "formula",
            "formula": "1 - equal",
            "parts": [{"name": "equal", "spec": spec, "weight": 1}],
        }
    return spec


def _text_similarity(grader: dict, path: str, notes: list[str]) -> dict:
    metric = grader.get("evaluation_metric")
    where = _at(path, "evaluation_metric")
    if metric in REFUSED_METRICS:
        raise GraderRefused(
            where,
            f"{metric} ({REFUSED_METRICS[metric]}) has no Anneal equivalent; choose "
            f"{', '.join(METRICS)} or cosine",
        )
    if metric not in METRICS and metric != "cosine":
        raise GraderRefused(where, f"must be one of {', '.join([*METRICS, 'cosine', *REFUSED_METRICS])}")
    sample, other, other_key = _sides(grader, path)
    if other.kind != "item":
        raise GraderRefused(
            _at(path, other_key),
            "must be a row field such as {{item.reference_answer}} (Anneal compares columns)",
        )
    threshold = grader.get("pass_threshold")
    if threshold is not None and (isinstance(threshold, bool) or not isinstance(threshold, int | float)):
        raise GraderRefused(_at(path, "pass_threshold"), "must be a number")
    if threshold is not None:
        notes.append(
            f"{_at(path, 'pass_threshold')} {threshold:g}: the reward is the similarity itself, as in OpenAI "
            "fine-tuning; the threshold only marks pass/fail in evals, so it is not part of the spec"
        )
    if metric == "cosine":
        notes.append(
            f"{where} cosine: Anneal embeds with all-MiniLM-L6-v2, not text-embedding-3-large; the scores differ"
        )
        return {
            "type": "embedding",
            "reference_field": other.value,
            "min_cosine": 0,
            **extract_fields_for(sample),
        }
    anneal_metric, tokenize = METRICS[metric]
    return {
        "type": "similarity",
        "metric": anneal_metric,
        "tokenize": tokenize,
        "reference_field": other.value,
        "min_score": 0,
        **extract_fields_for(sample),
    }


def _score_model(grader: dict, path: str, judge: Judge, notes: list[str]) -> dict:
    model = grader.get("model")
    if not isinstance(model, str) or not model.strip():
        raise GraderRefused(_at(path, "model"), "name the judge model")
    if model in judge.deployments:
        target: dict = {"deployment": model}
    elif judge.endpoint:
        target = {"endpoint": judge.endpoint, "model": model, "api_key_secret": judge.api_key_secret}
    else:
        raise GraderRefused(
            _at(path, "model"),
            f"{model!r} is not one of the team's deployments: deploy a judge under that name, or give "
            "judge_endpoint (an endpoint the team allowed that serves this model)",
        )
    messages = grader.get("input")
    if not isinstance(messages, list) or not messages:
        raise GraderRefused(_at(path, "input"), "must be a list of messages")
    fields: dict[str, str] = {}
    converted = []
    for index, message in enumerate(messages):
        where = f"{_at(path, 'input')}[{index}]"
        if not isinstance(message, dict):
            raise GraderRefused(where, 'must be {"role": ..., "content": ...}')
        for key in message:
            if key not in ("role", "content", "type"):
                raise GraderRefused(f"{where}.{key}", "is not carried over to the judge")
        role = message.get("role")
        if role not in ("system", "developer", "user", "assistant"):
            raise GraderRefused(f"{where}.role", "must be system, developer, user or assistant")
        text = judge_text(
            content_text(message.get("content"), f"{where}.content"), f"{where}.content", fields
        )
        # Open models' chat templates know system, not developer: the same place in the instruction order.
        converted.append({"role": "system" if role == "developer" else role, "content": text})
    if not any("{completion}" in message["content"] for message in converted):
        raise GraderRefused(
            _at(path, "input"), "no message holds {{sample.output_text}}, the answer to judge"
        )
    low, high = _range(grader.get("range", [0, 1]), _at(path, "range"))
    spec = {
        "type": "model_judge",
        **target,
        "messages": converted,
        "reference_field": next(iter(fields), "answer"),
        "min_score": low,
        "max_score": high,
        "temperature": 1,  # OpenAI samples the judge at the model's default unless sampling_params say
    }
    spec.update(_sampling(grader.get("sampling_params"), _at(path, "sampling_params")))
    if grader.get("pass_threshold") is not None:
        notes.append(
            f"{_at(path, 'pass_threshold')}: the reward is the judge's score; the threshold is not kept"
        )
    if (low, high) != (0, 1):
        notes.append(f"{_at(path, 'range')} [{low:g}, {high:g}]: Anneal scales the judge's score to 0..1")
    return spec


def _range(value: object, where: str) -> tuple[float, float]:
    if (
        not isinstance(value, list)
        or len(value) != 2
        or not all(isinstance(v, int | float) and not isinstance(v, bool) for v in value)
        or not value[0] < value[1]
    ):
        raise GraderRefused(where, "must be [low, high] with low below high")
    return value[0], value[1]


def _sampling(params: object, where: str) -> dict:
    if params is None:
        return {}
    if not isinstance(params, dict):
        raise GraderRefused(where, "must be an object")
    out = {}
    for key, value in params.items():
        if key not in SAMPLING_KEYS:
            raise GraderRefused(
                f"{where}.{key}", f"is not carried over (Anneal sends {', '.join(SAMPLING_KEYS)})"
            )
        if value is not None:
            out[SAMPLING_KEYS[key]] = value
    return out


def _python(grader: dict, path: str, notes: list[str]) -> dict:
    where = _at(path, "source")
    source = _text(grader, "source", path)
    try:
        tree = ast.parse(source)
    except SyntaxError as exc:
        raise GraderRefused(where, f"line {exc.lineno}: {exc.msg}") from None
    defined = {node.name for node in tree.body if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)}
    if "grade" not in defined:
        raise GraderRefused(where, "must define grade(sample, item)")
    if "score" in defined:
        raise GraderRefused(where, "defines score(), the name Anneal calls: rename that function")
    if grader.get("image_tag") is not None:
        notes.append(f"{_at(path, 'image_tag')}: ignored; the code runs in Anneal's sandbox image")
    notes.append(f"{where}: grade() runs in the sandbox; a result outside 0..1 is kept within it")
    return {
        "type": "custom_python",
        "code": source.rstrip() + "\n" + PYTHON_ADAPTER,
        "timeout_s": PYTHON_TIMEOUT_S,
    }


def _multi(grader: dict, path: str, judge: Judge, notes: list[str], *, depth: int) -> dict:
    graders = grader.get("graders")
    where = _at(path, "graders")
    if not isinstance(graders, dict) or not graders:
        raise GraderRefused(where, "must be an object of name -> grader")
    parts = []
    for name, inner in graders.items():
        if not _NAME.match(name) or name == "tampering":
            raise GraderRefused(f"{where}.{name}", "a name calculate_output can use: letters, digits and _")
        spec = _convert(inner, f"{where}.{name}", judge, notes, depth=depth + 1)
        parts.append({"name": name, "spec": spec, "weight": 1})
    # OpenAI's formulas write powers as ^; Anneal's (Python's) as **.
    formula = _text(grader, "calculate_output", path).replace("^", "**")
    try:
        check_formula(formula, names=set(graders))
    except FormulaError as exc:
        raise GraderRefused(_at(path, "calculate_output"), str(exc)) from None
    return {"type": "composite", "mode": "formula", "formula": formula, "parts": parts}
