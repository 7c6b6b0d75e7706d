"""model_judge: a rubric sent to an OpenAI-compatible chat endpoint; the score in its reply, bounded to 0..1."""

from __future__ import annotations

import os
import re
import string
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING

from gpu_jobs.rewards.base import Scorer, ScoreResult, SpecError, SpecField, shorten

if TYPE_CHECKING:
    import httpx

DEFAULT_RUBRIC = (
    "You grade answers. Question:\n{prompt}\n\nReference answer:\n{reference}\n\nAnswer to grade:\n{completion}\n\n"
    "Rate how correct the answer is from {min_score} to {max_score}. End your reply with a line 'Score: N'."
)
PLACEHOLDERS = ("prompt", "completion", "reference", "min_score", "max_score")
_SCORE_LINE = re.compile(r"score\s*[:=]\s*\**\s*(-?\d+(?:\.\d+)?)", re.IGNORECASE)
_ANY_NUMBER = re.compile(r"-?\d+(?:\.\d+)?")
MAX_CONCURRENCY = 8
MAX_COMPLETION_CHARS = 20000


class ModelJudge(Scorer):
    type_name = "model_judge"
    summary = "Model judge: a rubric sent to any OpenAI-compatible endpoint; its score, scaled to 0..1"
    example = {
        "type": "model_judge",
        "endpoint": "http://127.0.0.1:8001/v1",
        "model": "judge",
        "rubric": DEFAULT_RUBRIC,
        "min_score": 0,
        "max_score": 10,
    }
    fields = (
        SpecField(
            "endpoint",
            (str,),
            help="Base URL of an OpenAI-compatible API, e.g. http://host:8000/v1 (a platform deployment works).",
        ),
        SpecField("model", (str,), help="The model name the endpoint serves."),
        SpecField(
            "rubric",
            (str,),
            default=DEFAULT_RUBRIC,
            help="The prompt sent to the judge; {prompt}, {completion}, {reference}, {min_score} and {max_score} "
            "are filled in. The judge's reply must carry 'Score: N' (else its last number is taken).",
        ),
        SpecField("reference_field", (str,), default="answer", help="The column filled in as {reference}."),
        SpecField(
            "min_score", (int, float), default=0, help="The lowest score the rubric allows (maps to 0)."
        ),
        SpecField(
            "max_score", (int, float), default=10, help="The highest score the rubric allows (maps to 1)."
        ),
        SpecField(
            "api_key_env",
            (str,),
            default=None,
            help="Name of an environment variable of the training worker holding the API key (never the key).",
        ),
        SpecField("timeout_s", (int, float), default=30, help="Time limit per request."),
        SpecField("max_tokens", (int,), default=256, help="Longest judge reply."),
    )

    @classmethod
    def normalise_spec(cls, spec: dict) -> dict:
        clean = super().normalise_spec(spec)
        if not re.match(r"^https?://[^\s/]+", clean["endpoint"]):
            raise SpecError("endpoint", "must be an http:// or https:// URL, e.g. http://host:8000/v1")
        if not clean["model"].strip():
            raise SpecError("model", "name the model the endpoint serves")
        try:
            names = {name for _, name, _, _ in string.Formatter().parse(clean["rubric"]) if name is not None}
        except ValueError as exc:
            raise SpecError(
                "rubric", f"has a stray brace: {exc} (write {{{{ and }}}} for literal braces)"
            ) from None
        unknown = names - set(PLACEHOLDERS)
        if unknown:
            raise SpecError(
                "rubric", f"unknown placeholder {{{sorted(unknown)[0]}}}; known: {', '.join(PLACEHOLDERS)}"
            )
        if "completion" not in names:
            raise SpecError("rubric", "must contain {completion}, the answer being judged")
        if not clean["min_score"] < clean["max_score"]:
            raise SpecError("max_score", "must be greater than min_score")
        if not 0 < clean["timeout_s"] <= 300:
            raise SpecError("timeout_s", "must be more than 0 and at most 300 seconds")
        if not 1 <= clean["max_tokens"] <= 8192:
            raise SpecError("max_tokens", "must be between 1 and 8192")
        return clean

    def _score(self, row: dict, completion: str) -> ScoreResult:
        import httpx  # imported on use: importing the engine stays fast for the other types

        with httpx.Client(timeout=self.spec["timeout_s"]) as client:
            return self._judge(client, row, completion)

    def score_batch(self, rows: list[dict], completions: list[str]) -> list[ScoreResult]:
        if len(rows) != len(completions):
            raise ValueError(f"{len(rows)} rows but {len(completions)} completions")
        import httpx

        with (
            httpx.Client(timeout=self.spec["timeout_s"]) as client,
            ThreadPoolExecutor(max_workers=MAX_CONCURRENCY) as pool,
        ):
            return list(
                pool.map(lambda pair: self._safe_judge(client, *pair), zip(rows, completions, strict=True))
            )

    def _safe_judge(self, client: httpx.Client, row: dict, completion: str) -> ScoreResult:
        try:
            return self._judge(client, row, completion)
        except Exception as exc:
            return ScoreResult(0.0, {}, f"verifier error: {shorten(f'{type(exc).__name__}: {exc}')}")

    def _judge(self, client: httpx.Client, row: dict, completion: str) -> ScoreResult:
        spec = self.spec
        values = {
            "prompt": str(row.get("prompt", "")),
            "completion": completion[:MAX_COMPLETION_CHARS],
            "reference": str(row.get(spec["reference_field"], "")),
            "min_score": f"{spec['min_score']:g}",
            "max_score": f"{spec['max_score']:g}",
        }
        headers = {}
        if spec["api_key_env"]:
            key = os.environ.get(spec["api_key_env"])
            if not key:
                return ScoreResult(0.0, {}, f"the environment variable {spec['api_key_env']} is not set")
            headers["Authorization"] = f"Bearer {key}"
        body = {
            "model": spec["model"],
            "messages": [{"role": "user", "content": spec["rubric"].format_map(values)}],
            "temperature": 0,
            "max_tokens": spec["max_tokens"],
        }
        import httpx

        url = spec["endpoint"].rstrip("/") + "/chat/completions"
        try:
            response = client.post(url, json=body, headers=headers)
        except httpx.HTTPError as exc:
            return ScoreResult(
                0.0, {}, f"judge unreachable at {url}: {type(exc).__name__}: {shorten(str(exc), 120)}"
            )
        if response.status_code != 200:
            return ScoreResult(
                0.0, {}, f"judge answered HTTP {response.status_code}: {shorten(response.text, 120)}"
            )
        try:
            reply = response.json()["choices"][0]["message"]["content"] or ""
        except (ValueError, KeyError, IndexError, TypeError):
            return ScoreResult(
                0.0, {}, f"judge reply is not a chat completion: {shorten(response.text, 120)}"
            )
        return self._parse(str(reply))

    def _parse(self, reply: str) -> ScoreResult:
        found = _SCORE_LINE.findall(reply) or _ANY_NUMBER.findall(reply)
        if not found:
            return ScoreResult(0.0, {}, f"no score in the judge's reply: {shorten(reply.strip(), 120)!r}")
        raw = float(found[-1])
        low, high = self.spec["min_score"], self.spec["max_score"]
        bounded = min(max(raw, low), high)
        score = (bounded - low) / (high - low)
        note = "" if bounded == raw else f" (outside {low:g}..{high:g}, bounded)"
        return ScoreResult(score, {"judge": raw}, f"judge gave {raw:g}{note}: {shorten(reply.strip(), 160)}")
