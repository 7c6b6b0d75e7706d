"""Verifiers and job specs as files (YAML or JSON), so a team reviews them in Git and applies them from CI.

A verifier file holds ``{name, spec}`` (or a list of them, or several YAML documents). A job file holds the
body of ``POST /api/v1/jobs`` (``name``, ``dataset_version(s)``, ``eval_dataset_version``, ``domain_weights``,
``verifiers``, ``params``), where a dataset or a verifier may also be named instead of numbered:
``dataset: sums`` (its newest version), ``verifiers: [{verifier: exact, weight: 1}]`` (its latest version).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import yaml  # type: ignore[import-untyped,unused-ignore]

from anneal_client._errors import SpecFileError
from anneal_client.types import Job

JOB_FILE_KEYS = frozenset(
    {
        "name",
        "dataset_version",
        "dataset_versions",
        "dataset",
        "datasets",
        "eval_dataset_version",
        "eval_dataset",
        "domain_weights",
        "verifiers",
        "params",
    }
)
# What the platform adds to a job's frozen spec beside the user's params.
_SPEC_DATA_KEYS = frozenset(
    {
        "dataset_version",
        "dataset_versions",
        "domain_weights",
        "domain_rows",
        "eval_dataset_version",
        "verifiers",
    }
)


def _read(path: str | Path) -> str:
    try:
        return Path(path).read_text(encoding="utf-8")
    except FileNotFoundError:
        raise SpecFileError(f"{path}: no such file") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise SpecFileError(f"{path}: cannot be read ({exc})") from None


def load_documents(path: str | Path) -> list[Any]:
    """Every document of a YAML file (JSON is YAML too), or the one value of a .json file."""
    text = _read(path)
    try:
        if str(path).endswith(".json"):
            return [json.loads(text)]
        return [doc for doc in yaml.safe_load_all(text) if doc is not None]
    except json.JSONDecodeError as exc:
        raise SpecFileError(f"{path}: not valid JSON at line {exc.lineno}: {exc.msg}") from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}" if mark is not None else ""
        problem = getattr(exc, "problem", None) or str(exc)
        raise SpecFileError(f"{path}: not valid YAML{where}: {problem}") from None


def load_mapping(path: str | Path) -> dict[str, Any]:
    documents = load_documents(path)
    if len(documents) != 1 or not isinstance(documents[0], dict):
        raise SpecFileError(f"{path}: expected one mapping (key: value lines), found {_kind(documents)}")
    return documents[0]


def _kind(documents: list[Any]) -> str:
    if not documents:
        return "an empty file"
    if len(documents) > 1:
        return f"{len(documents)} documents"
    return type(documents[0]).__name__


def verifier_files(path: str | Path) -> list[dict[str, Any]]:
    """The verifiers a file describes, each ``{"name": str, "spec": dict}``."""
    items: list[Any] = []
    for doc in load_documents(path):
        items.extend(doc if isinstance(doc, list) else [doc])
    if not items:
        raise SpecFileError(f"{path}: no verifier in the file")
    out = []
    for index, item in enumerate(items):
        where = f"{path}: " + (f"verifier {index + 1}: " if len(items) > 1 else "")
        if not isinstance(item, dict):
            raise SpecFileError(f"{where}expected a mapping with name and spec, found {type(item).__name__}")
        if not isinstance(item.get("name"), str) or not item["name"].strip():
            raise SpecFileError(f"{where}name: required (the verifier's name in the team)")
        if not isinstance(item.get("spec"), dict):
            raise SpecFileError(f"{where}spec: required, a mapping with a type (exact_match, numeric, ...)")
        unknown = sorted(set(item) - {"name", "spec"})
        if unknown:
            raise SpecFileError(f"{where}{unknown[0]}: unknown key (a verifier file holds name and spec)")
        out.append({"name": item["name"].strip(), "spec": item["spec"]})
    return out


def verifier_spec(path: str | Path) -> dict[str, Any]:
    """The spec in a file that holds either ``{name, spec}`` or the bare spec ``{type, ...}``."""
    doc = load_mapping(path)
    if "spec" in doc and isinstance(doc["spec"], dict):
        return doc["spec"]
    if "type" in doc:
        return doc
    raise SpecFileError(f"{path}: spec: required (or a bare spec with a type)")


def grader_file(path: str | Path) -> dict[str, Any]:
    """An OpenAI grader (``{"type": "string_check", ...}``), bare or under a ``grader`` key."""
    doc = load_mapping(path)
    grader = doc.get("grader", doc)
    if not isinstance(grader, dict) or "type" not in grader:
        raise SpecFileError(f"{path}: type: required (an OpenAI grader: string_check, text_similarity, ...)")
    return grader


def samples_file(path: str | Path) -> list[dict[str, Any]]:
    """Preview samples, ``{"row": {...}, "completion": "..."}`` each: JSON Lines, or a YAML/JSON list."""
    if str(path).endswith(".jsonl"):
        samples = []
        for number, line in enumerate(_read(path).splitlines(), start=1):
            if not line.strip():
                continue
            try:
                samples.append(json.loads(line))
            except json.JSONDecodeError as exc:
                raise SpecFileError(f"{path}: line {number}: not valid JSON ({exc.msg})") from None
    else:
        documents = load_documents(path)
        samples = documents[0] if len(documents) == 1 and isinstance(documents[0], list) else documents
    for number, sample in enumerate(samples, start=1):
        if (
            not isinstance(sample, dict)
            or not isinstance(sample.get("row"), dict)
            or "completion" not in sample
        ):
            raise SpecFileError(f"{path}: sample {number}: expected {{row: {{...}}, completion: text}}")
    if not samples:
        raise SpecFileError(f"{path}: no samples in the file")
    return samples


def job_file(path: str | Path) -> dict[str, Any]:
    """The launch body a job file holds; its keys are checked here, its values by the API."""
    body = load_mapping(path)
    unknown = sorted(set(body) - JOB_FILE_KEYS)
    if unknown:
        raise SpecFileError(
            f"{path}: {unknown[0]}: unknown key (a job file holds {', '.join(sorted(JOB_FILE_KEYS))})"
        )
    if "verifiers" in body and not isinstance(body["verifiers"], list):
        raise SpecFileError(f"{path}: verifiers: expected a list of {{verifier_version or verifier, weight}}")
    if "params" in body and not isinstance(body["params"], dict):
        raise SpecFileError(f"{path}: params: expected a mapping of settings")
    return body


def job_spec(job: Job, param_names: set[str] | None = None) -> dict[str, Any]:
    """A launch body that runs ``job`` again as it was frozen: the file ``anneal jobs spec`` writes.
    ``param_names``: the params a launch takes (settings and limits); the spec also holds what the launch
    measured (prompt lengths...), which a launch refuses. None: every key but the data's."""
    spec = job.spec
    versions = spec.get("dataset_versions") or [spec.get("dataset_version")]
    verifiers = []
    for choice in spec.get("verifiers") or []:
        entry = {"verifier_version": choice["verifier_version"], "weight": choice.get("weight", 1.0)}
        if choice.get("domains"):
            entry["domains"] = choice["domains"]
        if choice.get("name"):
            entry["name"] = choice["name"]  # for the reader; the version id decides
        verifiers.append(entry)
    body: dict[str, Any] = {"name": job.name}
    if len(versions) == 1:
        body["dataset_version"] = versions[0]
    else:
        body["dataset_versions"] = versions
    if spec.get("eval_dataset_version"):
        body["eval_dataset_version"] = spec["eval_dataset_version"]
    if spec.get("domain_weights"):
        body["domain_weights"] = spec["domain_weights"]
    body["verifiers"] = verifiers
    body["params"] = {
        k: v
        for k, v in spec.items()
        if k not in _SPEC_DATA_KEYS and (param_names is None or k in param_names)
    }
    return body


def dump(value: Any, *, as_json: bool = False) -> str:
    if as_json:
        return json.dumps(value, indent=2, ensure_ascii=False) + "\n"
    return str(yaml.safe_dump(value, sort_keys=False, allow_unicode=True))
