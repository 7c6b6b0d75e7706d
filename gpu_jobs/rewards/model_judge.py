"""model_judge: a rubric sent to an OpenAI-compatible chat endpoint; the score in its reply, bounded to 0..1.

The judge is an endpoint the team allowed (``endpoint``, with an optional key held as a team secret named by
``api_key_secret``) or one of the team's platform deployments (``deployment``), called through the platform's
own /v1 and metered like any call. What it may reach and the secrets' values come from the ``Outbound`` the
platform builds for the team (gpu_jobs.rewards.outbound); without one every call is refused.
"""

from __future__ import annotations

import re
import string
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING

from gpu_jobs.rewards.base import Scorer, ScoreResult, SpecError, SpecField, shorten

if TYPE_CHECKING:
    import httpx

    from gpu_jobs.rewards.outbound import HostEntry, Outbound
    from sandboxes.client import SandboxClient

DEFAULT_RUBRIC = (
    "You grade answers. Question:\n{prompt}\n\nReference answer:\n{reference}\n\nAnswer to grade:\n{completion}\n\n"
    "Rate how correct the answer is from {min_score} to {max_score}. End your reply with a line 'Score: N'."
)
PLACEHOLDERS = ("prompt", "completion", "reference", "min_score", "max_score")
# Pairwise: the judge sees the answer and the row's reference (a baseline's answer, or a written one) as A and
# B, and names the better one; asked twice, the order swapped, so that a judge favouring a position does not
# decide the score.
MODES = ("score", "pairwise")
PAIRWISE_RUBRIC = (
    "You compare two answers to the same question. Question:\n{prompt}\n\nAnswer A:\n{first}\n\n"
    "Answer B:\n{second}\n\nWhich answer is better? End your reply with a line 'Winner: A', 'Winner: B' or "
    "'Winner: tie'."
)
PAIRWISE_PLACEHOLDERS = ("prompt", "first", "second")
_WINNER_LINE = re.compile(r"winner\s*[:=]\s*\**\s*(a|b|tie)\b", re.IGNORECASE)
_SCORE_LINE = re.compile(r"score\s*[:=]\s*\**\s*(-?\d+(?:\.\d+)?)", re.IGNORECASE)
_ANY_NUMBER = re.compile(r"-?\d+(?:\.\d+)?")
_SECRET_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_.-]{0,99}$")
ENV_REFUSED = (
    "is no longer accepted: it named an environment variable of the server, which would send the server's "
    "own secrets (SECRET_KEY, database or storage keys) to the endpoint. Store the key as a team secret "
    "(Team settings → Secrets) and name it in api_key_secret instead."
)
MAX_CONCURRENCY = 8
MAX_MESSAGES = 20
JUDGE_ROLES = ("system", "developer", "user", "assistant")
MAX_COMPLETION_CHARS = 20000


class ModelJudge(Scorer):
    type_name = "model_judge"
    slow = True
    summary = (
        "Model judge: a rubric sent to an allowed OpenAI-compatible endpoint or a team deployment; "
        "its score, scaled to 0..1"
    )
    uses_outbound = True
    example = {
        "type": "model_judge",
        "endpoint": "https://judge.example.com/v1",
        "model": "judge",
        "api_key_secret": "JUDGE_KEY",
        "rubric": DEFAULT_RUBRIC,
        "min_score": 0,
        "max_score": 10,
    }
    fields = (
        SpecField(
            "endpoint",
            (str,),
            default=None,
            help="Base URL of an OpenAI-compatible API, e.g. https://host/v1; its host must be one the team's "
            "owners allowed. Leave empty to use a deployment instead.",
        ),
        SpecField(
            "deployment",
            (str,),
            default=None,
            help="The name of one of the team's deployments, called through the platform's /v1 and metered "
            "(instead of an endpoint).",
        ),
        SpecField(
            "model", (str,), default=None, help="The model name the endpoint serves (not for a deployment)."
        ),
        SpecField(
            "rubric",
            (str,),
            default=DEFAULT_RUBRIC,
            help="The prompt sent to the judge; {prompt}, {completion}, {reference}, {min_score} and {max_score} "
            "are filled in. The judge's reply must carry 'Score: N' (else its last number is taken).",
        ),
        SpecField(
            "mode",
            (str,),
            default="score",
            choices=MODES,
            help="score: the judge rates the answer on the rubric's scale; pairwise: the judge picks the better "
            "of the answer and the row's reference (asked in both orders), scoring 1 per win and 0.5 per tie, "
            "averaged.",
        ),
        SpecField(
            "reference_field",
            (str,),
            default="answer",
            help="The column filled in as {reference}; in pairwise mode, the answer compared with (a baseline "
            "model's, or a written one).",
        ),
        SpecField(
            "min_score", (int, float), default=0, help="The lowest score the rubric allows (maps to 0)."
        ),
        SpecField(
            "max_score", (int, float), default=10, help="The highest score the rubric allows (maps to 1)."
        ),
        SpecField(
            "api_key_secret",
            (str,),
            default=None,
            help="The name of a team secret holding the endpoint's API key, sent as a bearer token "
            "(never the key itself; not for a deployment).",
        ),
        SpecField("timeout_s", (int, float), default=30, help="Time limit per request."),
        SpecField("max_tokens", (int,), default=256, help="Longest judge reply."),
        SpecField(
            "messages",
            (list,),
            default=None,
            help='Instead of the rubric, the whole conversation sent to the judge: [{"role": "system" | '
            '"developer" | "user" | "assistant", "content": "..."}], the same placeholders filled in each '
            "content; one of them must hold {completion}.",
        ),
        SpecField("temperature", (int, float), default=0, help="The judge's sampling temperature (0..2)."),
        SpecField(
            "top_p", (int, float), default=None, help="The judge's nucleus sampling (0..1); empty: not sent."
        ),
        SpecField("seed", (int,), default=None, help="A sampling seed sent to the judge; empty: not sent."),
    )

    @classmethod
    def normalise_spec(cls, spec: dict) -> dict:
        if isinstance(spec, dict) and "api_key_env" in spec:
            # Versions saved before secrets existed hold an explicit null: those mean "no key" and still load.
            if spec["api_key_env"] is not None:
                raise SpecError("api_key_env", ENV_REFUSED)
            spec = {key: value for key, value in spec.items() if key != "api_key_env"}
        clean = super().normalise_spec(spec)
        if clean["deployment"] is not None:
            if clean["endpoint"] is not None:
                raise SpecError("deployment", "give either an endpoint or a deployment, not both")
            if not clean["deployment"].strip():
                raise SpecError("deployment", "name one of the team's deployments")
            if clean["api_key_secret"] is not None:
                raise SpecError(
                    "api_key_secret", "a deployment is called with a platform key: leave it empty"
                )
            if clean["model"] is not None and clean["model"] != clean["deployment"]:
                raise SpecError("model", "a deployment is called by its own name: leave model empty")
            clean["model"] = None
        else:
            if clean["endpoint"] is None:
                raise SpecError("endpoint", "is required (or name a team deployment in deployment)")
            if not re.match(r"^https?://[^\s/]+", clean["endpoint"]):
                raise SpecError("endpoint", "must be an http:// or https:// URL, e.g. https://host/v1")
            if clean["model"] is None or not clean["model"].strip():
                raise SpecError("model", "name the model the endpoint serves")
        if clean["api_key_secret"] is not None and not _SECRET_NAME.match(clean["api_key_secret"]):
            raise SpecError(
                "api_key_secret", "must be the name of a team secret (letters, digits, _ . -), not the key"
            )
        pairwise = clean["mode"] == "pairwise"
        if pairwise and clean["rubric"] == DEFAULT_RUBRIC:
            clean["rubric"] = PAIRWISE_RUBRIC
        allowed = PAIRWISE_PLACEHOLDERS if pairwise else PLACEHOLDERS
        if clean["messages"] is None:
            names = _placeholders(clean["rubric"], "rubric", allowed)
        else:
            names = _check_messages(clean["messages"], allowed)
        where = "rubric" if clean["messages"] is None else "messages"
        if pairwise and not {"first", "second"} <= names:
            raise SpecError(where, "must contain {first} and {second}, the two answers compared")
        if not pairwise and "completion" not in names:
            raise SpecError(where, "must contain {completion}, the answer being judged")
        if not 0 <= clean["temperature"] <= 2:
            raise SpecError("temperature", "must be between 0 and 2")
        if clean["top_p"] is not None and not 0 < clean["top_p"] <= 1:
            raise SpecError("top_p", "must be more than 0 and at most 1")
        if not clean["min_score"] < clean["max_score"]:
            raise SpecError("max_score", "must be greater than min_score")
        if not 0 < clean["timeout_s"] <= 300:
            raise SpecError("timeout_s", "must be more than 0 and at most 300 seconds")
        if not 1 <= clean["max_tokens"] <= 8192:
            raise SpecError("max_tokens", "must be between 1 and 8192")
        return clean

    def _conversation(self, values: dict[str, str]) -> list[dict[str, str]]:
        if self.spec["messages"] is None:
            return [{"role": "user", "content": self.spec["rubric"].format_map(values)}]
        return [
            {"role": message["role"], "content": message["content"].format_map(values)}
            for message in self.spec["messages"]
        ]

    def __init__(
        self, spec: dict, *, sandbox: SandboxClient | None = None, outbound: Outbound | None = None
    ) -> None:
        # Imported on use: importing the engine stays fast (no httpx) for the other types.
        from gpu_jobs.rewards.outbound import Outbound, parse_host_entry

        super().__init__(spec, sandbox=sandbox)
        self._outbound = outbound if outbound is not None else Outbound()
        # Resolved once, here, so a missing secret or deployment is one clear reason on every sample.
        self._problem = ""
        self._key: str | None = None
        self._trusted: tuple[HostEntry, ...] = ()
        self._url = ""
        self._model = spec["model"]
        if spec["deployment"] is not None:
            route = self._outbound.deployments.get(spec["deployment"])
            if route is None:
                self._problem = f"the team has no deployment named {spec['deployment']!r} to judge with"
                return
            import httpx

            self._url = route.base_url.rstrip("/") + "/chat/completions"
            self._key = route.api_key
            self._model = spec["deployment"]
            platform = httpx.URL(route.base_url)
            self._trusted = (parse_host_entry(platform.netloc.decode("ascii")),)
            return
        self._url = spec["endpoint"].rstrip("/") + "/chat/completions"
        if spec["api_key_secret"] is not None:
            self._key = self._outbound.secrets.get(spec["api_key_secret"])
            if not self._key:
                self._problem = f"the team has no secret named {spec['api_key_secret']!r}"

    def _client(self) -> httpx.Client:
        from gpu_jobs.rewards.outbound import checked_client

        return checked_client(self._outbound, timeout=self.spec["timeout_s"], trusted=self._trusted)

    def _score(self, row: dict, completion: str) -> ScoreResult:
        with self._client() as client:
            return self._judge(client, row, completion)

    def score_batch(self, rows: list[dict], completions: list[str]) -> list[ScoreResult]:
        if len(rows) != len(completions):
            raise ValueError(f"{len(rows)} rows but {len(completions)} completions")
        with (
            self._client() as client,
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
        if self._problem:
            return ScoreResult(0.0, {}, self._problem)
        if spec["mode"] == "pairwise":
            if not str(row.get(spec["reference_field"]) or "").strip():
                return ScoreResult(0.0, {}, f"row has no {spec['reference_field']!r} answer to compare with")
            return self._pairwise(client, values)
        reply = self._ask(client, self._conversation(values))
        return self._parse(reply) if isinstance(reply, str) else reply

    def _pairwise(self, client: httpx.Client, values: dict[str, str]) -> ScoreResult:
        """The answer against the reference, as A and then as B: 1 per win, 0.5 per tie, averaged."""
        answer, reference = values["completion"], values["reference"][:MAX_COMPLETION_CHARS]
        orders = (("A", answer, reference), ("B", reference, answer))
        points, verdicts = [], []
        for position, first, second in orders:
            reply = self._ask(
                client, self._conversation({"prompt": values["prompt"], "first": first, "second": second})
            )
            if not isinstance(reply, str):
                return reply  # the call failed: its reason
            found = _WINNER_LINE.findall(reply)
            if not found:
                return ScoreResult(
                    0.0, {}, f"no winner in the judge's reply: {shorten(reply.strip(), 120)!r}"
                )
            winner = found[-1].lower()
            verdicts.append("tie" if winner == "tie" else "win" if winner == position.lower() else "loss")
            points.append({"win": 1.0, "tie": 0.5, "loss": 0.0}[verdicts[-1]])
        score = sum(points) / len(points)
        parts = {"wins": float(verdicts.count("win")), "ties": float(verdicts.count("tie"))}
        reason = f"against the reference: {verdicts[0]} as answer A, {verdicts[1]} as answer B"
        if verdicts[0] != verdicts[1]:
            reason += " (the judge's verdict changed with the order)"
        return ScoreResult(score, parts, reason)

    def _ask(self, client: httpx.Client, messages: list[dict[str, str]]) -> str | ScoreResult:
        """The judge's reply to `messages`, or a 0 result saying why there is none."""
        spec = self.spec
        headers = {"Authorization": f"Bearer {self._key}"} if self._key else {}
        body = {
            "model": self._model,
            "messages": messages,
            "temperature": spec["temperature"],
            "max_tokens": spec["max_tokens"],
        }
        body.update({key: spec[key] for key in ("top_p", "seed") if spec[key] is not None})
        import httpx

        from gpu_jobs.rewards.outbound import OutboundRefused

        url = self._url
        try:
            response = client.post(url, json=body, headers=headers)
        except OutboundRefused as exc:
            # Refused before any byte left: nothing of the target is known, so nothing of it is shown.
            return ScoreResult(0.0, {}, f"judge call refused: {exc}")
        except httpx.TooManyRedirects:
            return ScoreResult(0.0, {}, f"judge at {url} redirected too many times")
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
        return str(reply)

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


def _placeholders(text: str, field: str, allowed: tuple[str, ...] = PLACEHOLDERS) -> set[str]:
    """The {names} in ``text``; SpecError naming ``field`` for a stray brace or an unknown name."""
    try:
        names = {name for _, name, _, _ in string.Formatter().parse(text) if name is not None}
    except ValueError as exc:
        raise SpecError(field, f"has a stray brace: {exc} (write {{{{ and }}}} for literal braces)") from None
    unknown = names - set(allowed)
    if unknown:
        raise SpecError(field, f"unknown placeholder {{{sorted(unknown)[0]}}}; known: {', '.join(allowed)}")
    return names


def _check_messages(messages: list, allowed: tuple[str, ...] = PLACEHOLDERS) -> set[str]:
    """The placeholders used across a judge conversation; SpecError naming the message that is wrong."""
    if not messages or len(messages) > MAX_MESSAGES:
        raise SpecError("messages", f"must hold 1 to {MAX_MESSAGES} messages")
    names: set[str] = set()
    for index, message in enumerate(messages):
        where = f"messages[{index}]"
        if not isinstance(message, dict) or set(message) != {"role", "content"}:
            raise SpecError(where, 'must be {"role": ..., "content": "..."}')
        if message["role"] not in JUDGE_ROLES:
            raise SpecError(f"{where}.role", f"must be one of {', '.join(JUDGE_ROLES)}")
        if not isinstance(message["content"], str):
            raise SpecError(f"{where}.content", "must be text")
        names |= _placeholders(message["content"], f"{where}.content", allowed)
    return names
