"""One agent episode: model turns and tool observations alternating until the task ends or a limit is hit.

Driven turn by turn (``Episode.context()`` -> the model writes -> ``Episode.record(text, tokens)``), so a
trainer can advance many episodes in lockstep with batched generation; ``run_episode`` drives one with any
``Policy`` (a scripted list of tool calls in tests and benchmarks).

Limits (gpu_jobs.agent.spec.EnvironmentSpec): ``max_turns`` model turns, ``token_budget`` model tokens in
all, ``turn_tokens`` per turn, ``episode_timeout_s`` of wall time; an episode that stops on one of them is
marked with it (``end_reason``: finished, turn_limit, token_budget, timeout, context_limit, sandbox_lost).
A tool's output is cut to ``observation_chars`` with a marker saying how much was cut. A turn without a
well-formed call gets an error observation and the episode goes on. Running summary: before a turn whose
context would pass ``context_tokens``, the earlier turns are replaced by a summary (one line per step: the
action, its status, the first line of what it printed), kept in the user message.

Reward, on the final state: see gpu_jobs.agent.spec.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

from gpu_jobs.agent.environment import RepoEnvironment, Verdict
from gpu_jobs.agent.spec import EnvironmentSpec
from gpu_jobs.agent.tools import ToolCall, format_instructions, parse_turn
from gpu_jobs.rewards.formula import FormulaError, check_formula, evaluate
from sandboxes.session import SessionPool

SYSTEM_PROMPT = (
    "You fix bugs in a small Python repository inside a sandbox. Read the code, run the tests, change the "
    "code, run the tests again, then finish."
)
ARGUMENT_CHARS_SHOWN = 2000  # of each tool argument, in the trace (a write_file's content can be long)
SUMMARY_LINE_CHARS = 120
END_REASONS = ("finished", "turn_limit", "token_budget", "timeout", "context_limit", "sandbox_lost")


@dataclass
class Step:
    """One turn of the trace: what the model planned, the action it took, what it observed."""

    turn: int
    plan: str
    action: dict | None  # {"name", "arguments"}; None when the call was malformed
    observation: str
    status: str  # the sandbox's status, "error" for a malformed or refused call
    error: str = ""  # why the call was malformed
    raw: str = ""  # the model's whole turn, as written
    truncated: bool = False
    tokens: int = 0
    sandbox_s: float = 0.0
    generation_s: float = 0.0
    summary: str = ""  # the running summary that replaced earlier turns before this one, if any

    def to_payload(self) -> dict:
        action = None
        if self.action is not None:
            action = {
                "name": self.action["name"],
                "arguments": {k: _cut(v, ARGUMENT_CHARS_SHOWN) for k, v in self.action["arguments"].items()},
            }
        payload = {
            "turn": self.turn,
            "plan": self.plan,
            "action": action,
            "observation": self.observation,
            "status": self.status,
            "truncated": self.truncated,
            "tokens": self.tokens,
            "sandbox_ms": round(self.sandbox_s * 1000, 1),
        }
        if self.error:
            payload["error"] = self.error
            payload["raw"] = _cut(self.raw, ARGUMENT_CHARS_SHOWN)
        if self.summary:
            payload["summary"] = self.summary
        return payload


@dataclass
class EpisodeResult:
    steps: list[Step]
    end_reason: str
    verdict: Verdict
    reward: float
    parts: dict[str, float]
    summaries: int
    tokens: int
    seconds: float
    sandbox_s: float
    generation_s: float
    start_s: float = 0.0  # starting the sandbox session and writing the repository into it
    prompt: str = ""
    task: str = ""

    def to_payload(self) -> dict:
        """The rollout event's episode fields (gpu_jobs.sink): the turns are what the live view draws."""
        return {
            "prompt": self.prompt,
            "task": self.task,
            "turns": [step.to_payload() for step in self.steps],
            "end_reason": self.end_reason,
            "reward": self.reward,
            "parts": dict(self.parts),
            "reason": self.verdict.reason,
            "final_tests": _cut(self.verdict.output, ARGUMENT_CHARS_SHOWN),
            "summaries": self.summaries,
            "tokens": self.tokens,
            "seconds": round(self.seconds, 3),
            "sandbox_seconds": round(self.sandbox_s, 3),
        }


class Policy(Protocol):
    def act(self, context: list[dict], *, max_tokens: int) -> tuple[str, int]:
        """The model's next turn for the conversation `context`: its text and how many tokens it took."""


class ScriptedPolicy:
    """Writes the given turns in order (a ToolCall, or raw text for a malformed turn), then calls finish."""

    def __init__(self, turns: list[ToolCall | str], *, plan: str = "Next step.") -> None:
        self.turns = list(turns)
        self.plan = plan

    def act(self, context: list[dict], *, max_tokens: int) -> tuple[str, int]:
        turn = self.turns.pop(0) if self.turns else ToolCall("finish")
        text = turn if isinstance(turn, str) else f"{self.plan}\n{turn.plain_text()}"
        return text, approx_tokens(text)


def approx_tokens(text: str) -> int:
    """A tokenizer-free estimate (4 characters a token) for scripted policies and plain measuring."""
    return max(1, len(text) // 4)


def measure_chars(messages: list[dict]) -> int:
    return sum(approx_tokens(str(m.get("content", ""))) + 4 for m in messages)


class Episode:
    def __init__(
        self,
        row: dict,
        spec: EnvironmentSpec,
        *,
        measure: Callable[[list[dict]], int] = measure_chars,
        plain_format: bool = True,
        system_prompt: str = "",
        backend: object | None = None,
        pool: SessionPool | None = None,
    ) -> None:
        """Starts the sandbox (RowError for a bad row, SandboxStartError when it does not start).

        `measure` counts the tokens of a conversation as the model will see it (the running summary's
        trigger); `plain_format` puts the plain-text tool instructions in the system message (a chat template
        that renders the tools does without); a non-empty `system_prompt` replaces the system message whole.
        """
        self.started = time.monotonic()
        self.spec = spec
        self.row = row
        self.env = RepoEnvironment(row, spec, backend=backend, pool=pool)
        self.start_s = time.monotonic() - self.started
        self.measure = measure
        system = system_prompt or SYSTEM_PROMPT + ("\n" + format_instructions() if plain_format else "")
        self.task_text = f"{row['prompt']}\nFiles: {', '.join(sorted(self.env.files))}"
        self.messages: list[dict] = [
            {"role": "system", "content": system},
            {"role": "user", "content": self.task_text},
        ]
        self.steps: list[Step] = []
        self.tokens = 0
        self.summaries = 0
        self.end_reason = ""
        self._pending_summary = ""

    @property
    def done(self) -> bool:
        return bool(self.end_reason)

    def turn_tokens(self) -> int:
        """The most tokens the model may write in the next turn."""
        return max(0, min(self.spec.turn_tokens, self.spec.token_budget - self.tokens))

    def context(self) -> list[dict]:
        """The conversation for the next model turn, summarised first if it would not fit. Precondition: not done."""
        if (
            self.measure(self.messages) + self.turn_tokens() > self.spec.context_tokens
            and len(self.messages) > 2
        ):
            summary = self.summary_text()
            self.messages = [
                self.messages[0],
                {"role": "user", "content": f"{self.task_text}\n\nSummary of the turns so far:\n{summary}"},
            ]
            self.summaries += 1
            self._pending_summary = summary
        if self.measure(self.messages) + self.turn_tokens() > self.spec.context_tokens:
            self.end_reason = "context_limit"
        return self.messages

    def summary_text(self) -> str:
        lines = []
        for step in self.steps:
            action = step.action["name"] if step.action else "malformed call"
            if step.action and step.action["arguments"]:
                first = next(iter(step.action["arguments"].values()))
                action += f" {first.splitlines()[0][:40] if first.strip() else ''}".rstrip()
            seen = next((line for line in step.observation.splitlines() if line.strip()), "")
            lines.append(_cut(f"turn {step.turn}: {action} -> {step.status}: {seen}", SUMMARY_LINE_CHARS))
        # The newest lines matter most: drop the oldest until the summary takes at most a quarter of the budget.
        while len(lines) > 1 and approx_tokens("\n".join(lines)) > self.spec.context_tokens // 4:
            lines.pop(0)
            if not lines[0].startswith("(earlier"):
                lines.insert(0, "(earlier turns omitted)")
                lines.pop(1)
        return "\n".join(lines)

    def record(self, text: str, tokens: int, *, generation_s: float = 0.0) -> Step:
        """Take the model's turn: parse it, run its tool call, append both to the conversation."""
        parsed = parse_turn(text)
        self.tokens += tokens
        turn = len(self.steps) + 1
        if parsed.call is None:
            observation, status, seconds = f"error: {parsed.error}", "error", 0.0
        else:
            outcome = self.env.execute(parsed.call)
            observation, status, seconds = outcome.text, outcome.status, outcome.seconds
        shown, truncated = truncate(observation, self.spec.observation_chars)
        step = Step(
            turn=turn,
            plan=parsed.plan,
            action=parsed.call.to_dict() if parsed.call else None,
            observation=shown,
            status=status,
            error=parsed.error,
            raw=text,
            truncated=truncated,
            tokens=tokens,
            sandbox_s=seconds,
            generation_s=generation_s,
            summary=self._pending_summary,
        )
        self._pending_summary = ""
        self.steps.append(step)
        self.messages.append({"role": "assistant", "content": text})
        name = parsed.call.name if parsed.call else "error"
        self.messages.append({"role": "tool", "name": name, "content": shown})
        self._check_end(finished=parsed.call is not None and parsed.call.name == "finish")
        return step

    def _check_end(self, *, finished: bool) -> None:
        if finished:
            self.end_reason = "finished"
        elif not self.env.session.alive:
            self.end_reason = "sandbox_lost"
        elif len(self.steps) >= self.spec.max_turns:
            self.end_reason = "turn_limit"
        elif self.tokens >= self.spec.token_budget:
            self.end_reason = "token_budget"
        elif time.monotonic() - self.started > self.spec.episode_timeout_s:
            self.end_reason = "timeout"

    def finish(self) -> EpisodeResult:
        """Verify the final state, compute the reward, close the sandbox. Call once, when done (or abandoned)."""
        if not self.end_reason:
            self.end_reason = "timeout"
        try:
            verdict = self.env.verify()
        finally:
            self.env.close()
        turns = len(self.steps)
        well_formed = sum(step.action is not None for step in self.steps)
        parts = {
            "tests": verdict.share,
            "format": well_formed / turns if turns else 0.0,
            "turns": float(turns),
            "finished": 1.0 if self.end_reason == "finished" else 0.0,
            "tested": 1.0 if tested_before_finish(self.steps, self.end_reason) else 0.0,
            "edited": 1.0 if edited(self.steps) else 0.0,
            "solved": 1.0 if verdict.total and verdict.passed == verdict.total else 0.0,
            "tampering": 1.0 if verdict.tampering else 0.0,
        }
        return EpisodeResult(
            steps=self.steps,
            end_reason=self.end_reason,
            verdict=verdict,
            # An episode whose code reached for the grader earns nothing, format and finishing included.
            reward=0.0 if verdict.tampering else episode_reward(self.spec, parts),
            parts=parts,
            summaries=self.summaries,
            tokens=self.tokens,
            seconds=time.monotonic() - self.started,
            sandbox_s=sum(step.sandbox_s for step in self.steps) + verdict.seconds,
            generation_s=sum(step.generation_s for step in self.steps),
            start_s=self.start_s,
            prompt=self.row.get("prompt", ""),
            task=str(self.row.get("task", "")),
        )

    def abandon(self) -> None:
        self.env.close()


EDITS = (
    "write_file",
    "replace_text",
    "apply_patch",
)  # the calls that change the repository as the task means it


def tested_before_finish(steps: list[Step], end_reason: str) -> bool:
    """The habit the product's articles describe: the episode called finish, and ran the tests after its last
    edit (or, with no edit, at all) before that."""
    names = [step.action["name"] for step in steps if step.action is not None]
    if end_reason != "finished" or not names or names[-1] != "finish":
        return False
    edits = [i for i, name in enumerate(names) if name in EDITS]
    after = edits[-1] + 1 if edits else 0
    return "run_tests" in names[after:-1]


def edited(steps: list[Step]) -> bool:
    """Whether an edit of the episode applied (an EDITS call the sandbox ran without error):
    with ``tested``, it tells "changed the code, ran the tests, finished" from "ran the tests and finished"."""
    return any(
        step.action is not None and step.action["name"] in EDITS and step.status == "ok" for step in steps
    )


def episode_reward(spec: EnvironmentSpec, parts: dict[str, float]) -> float:
    if spec.formula.strip():
        try:
            value = float(evaluate(check_formula(spec.formula, names=set(parts)), parts))
        except (FormulaError, ArithmeticError, ValueError):
            return 0.0
        return value if value == value and abs(value) != float("inf") else 0.0
    return (
        spec.tests_weight * parts["tests"]
        + spec.format_weight * parts["format"]
        - spec.turn_penalty * parts["turns"]
    )


def run_episode(
    row: dict,
    spec: EnvironmentSpec,
    policy: Policy,
    *,
    backend: object | None = None,
    pool: SessionPool | None = None,
) -> EpisodeResult:
    """One whole episode driven by `policy` (its sandbox from `pool` when given)."""
    episode = Episode(row, spec, backend=backend, system_prompt=spec.system_prompt, pool=pool)
    try:
        while not episode.done:
            context = episode.context()
            if episode.done:
                break
            started = time.monotonic()
            text, tokens = policy.act(context, max_tokens=episode.turn_tokens())
            episode.record(text, tokens, generation_s=time.monotonic() - started)
    except BaseException:
        episode.abandon()
        raise
    return episode.finish()


def truncate(text: str, limit: int) -> tuple[str, bool]:
    """`text` cut to about `limit` characters (its head and tail kept) with a marker; whether it was cut."""
    if len(text) <= limit:
        return text, False
    head, tail = limit * 2 // 3, limit // 3
    cut = len(text) - head - tail
    return f"{text[:head]}\n[... {cut} characters cut ...]\n{text[len(text) - tail :]}", True


def _cut(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"
