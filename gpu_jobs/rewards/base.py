"""What every verifier type shares: the result, the spec error, the scorer interface and spec fields."""

from __future__ import annotations

from abc import ABC
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar, Protocol

if TYPE_CHECKING:
    from gpu_jobs.rewards.outbound import Outbound
    from sandboxes.client import SandboxClient


@dataclass
class ScoreResult:
    score: float
    parts: dict[str, float] = field(default_factory=dict)
    reason: str = ""
    # What the sandbox printed, for types that run code: {"status", "stdout", "stderr"}, each text capped.
    output: dict[str, str] = field(default_factory=dict)

    def to_dict(self) -> dict:
        out = {"score": self.score, "parts": dict(self.parts), "reason": self.reason}
        if self.output:
            out["output"] = dict(self.output)
        return out


# A code verifier's verdict on a program that tried to tamper with the grader: score 0, a reason that starts
# with TAMPERING_PREFIX followed by what it tried, and parts[TAMPERING_PART] == 1.0. Honest samples of code
# verifiers carry the part at 0.0; verifiers that run no code leave it out.
TAMPERING_PART = "tampering"
TAMPERING_PREFIX = "tampering: "


def is_tampering(result: ScoreResult) -> bool:
    return result.parts.get(TAMPERING_PART, 0.0) >= 1.0


def tampering_what(result: ScoreResult) -> str:
    """What a tampering result says the program tried, in a few words ("" when it did not tamper)."""
    if not is_tampering(result):
        return ""
    reason = result.reason
    what = reason[len(TAMPERING_PREFIX) :].split("; ")[0] if reason.startswith(TAMPERING_PREFIX) else ""
    return shorten(what.strip() or "unknown kind", 120)


class SpecError(ValueError):
    """A verifier spec a user wrote is wrong; `field` names the spec key, `message` says what to do."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"{field}: {message}")
        self.field = field
        self.message = message


_REQUIRED = object()


@dataclass(frozen=True)
class SpecField:
    """One key of a verifier spec: its accepted types, default (absent = required) and allowed values."""

    name: str
    kinds: tuple[type, ...]
    default: Any = _REQUIRED
    choices: tuple = ()
    # Shown next to the field in the form builder and in the OpenAPI description of the spec.
    help: str = ""

    @property
    def required(self) -> bool:
        return self.default is _REQUIRED

    def describe(self) -> dict:
        """JSON-serialisable description for the form builder (what the page generates its inputs from)."""
        return {
            "name": self.name,
            "kinds": [kind.__name__ for kind in self.kinds],
            "required": self.required,
            "default": None if self.required else self.default,
            "choices": list(self.choices),
            "help": self.help,
        }

    def clean(self, spec: dict) -> Any:
        # An explicit null for an optional field means "not given", so a normalised spec validates again.
        if self.name not in spec or spec[self.name] is None and self.default is None:
            if self.default is _REQUIRED:
                raise SpecError(self.name, "is required")
            return self.default
        value = spec[self.name]
        # bool is an int in Python, but `"timeout_s": true` is a mistake, not one second.
        if isinstance(value, bool) and bool not in self.kinds or not isinstance(value, self.kinds):
            wanted = " or ".join(kind.__name__ for kind in self.kinds)
            raise SpecError(self.name, f"must be of type {wanted}, got {type(value).__name__}")
        if self.choices and value not in self.choices:
            raise SpecError(self.name, f"must be one of {', '.join(map(str, self.choices))}, got {value!r}")
        return value


def clean_fields(spec: dict, fields: tuple[SpecField, ...], *, type_name: str) -> dict:
    """The spec with defaults filled in; SpecError for a missing, mistyped or unknown key."""
    known = {"type", *(f.name for f in fields)}
    for key in spec:
        if key not in known:
            raise SpecError(key, f"is not a field of {type_name}; known fields: {', '.join(sorted(known))}")
    return {"type": type_name, **{f.name: f.clean(spec) for f in fields}}


class BatchScorer(Protocol):
    """Anything that scores a batch as a Scorer does (a Scorer, or gpu_jobs.domains.DomainScorer around one)."""

    def score_batch(self, rows: list[dict], completions: list[str]) -> list[ScoreResult]: ...


class Scorer(ABC):
    """Scores completions against dataset rows. Built from a spec that `normalise_spec` has accepted."""

    type_name: ClassVar[str]
    fields: ClassVar[tuple[SpecField, ...]]
    # One line for the type picker, and an example spec for the API docs and the form builder.
    summary: ClassVar[str] = ""
    example: ClassVar[dict] = {}
    # Types that call out (model_judge, and composite for its parts) take `outbound=` when built.
    uses_outbound: ClassVar[bool] = False
    # Types whose checks run code in a sandbox, call out or run a model: tens of milliseconds to seconds each,
    # which a training step would wait for (registry.slow_to_score; gpu_jobs.trainers.generates_ahead).
    slow: ClassVar[bool] = False

    def __init__(self, spec: dict, *, sandbox: SandboxClient | None = None) -> None:
        self.spec = spec

    @classmethod
    def normalise_spec(cls, spec: dict) -> dict:
        return clean_fields(spec, cls.fields, type_name=cls.type_name)

    def score(self, row: dict, completion: str) -> ScoreResult:
        """Never raises for a bad row or completion: those score 0 with the problem in `reason`."""
        if not isinstance(completion, str):
            return ScoreResult(0.0, {}, f"the completion must be text, got {type(completion).__name__}")
        if not isinstance(row, dict):
            return ScoreResult(0.0, {}, f"the row must be an object, got {type(row).__name__}")
        try:
            result = self._score(row, completion)
        except MemoryError:
            return ScoreResult(0.0, {}, "verifier error: out of memory on this sample")
        except Exception as exc:  # a bug or a pathological sample must not stop a job or a preview
            return ScoreResult(0.0, {}, f"verifier error: {shorten(f'{type(exc).__name__}: {exc}')}")
        return bounded(result)

    def _score(self, row: dict, completion: str) -> ScoreResult:
        """One sample; may raise (score() turns that into a 0). Subclasses override this or score()."""
        raise NotImplementedError

    def score_batch(self, rows: list[dict], completions: list[str]) -> list[ScoreResult]:
        """One result per (row, completion) pair, in order; the lists must have the same length."""
        if len(rows) != len(completions):
            raise ValueError(f"{len(rows)} rows but {len(completions)} completions")
        return [self.score(row, completion) for row, completion in zip(rows, completions, strict=True)]


# Every verifier type by name, in the order the type picker lists them. registry.py imports each type's module
# and fills this table (the package's __init__ imports registry, so it is full before any use); it lives here
# so that a composite can validate and build its parts without importing the registry that imports it.
VERIFIER_TYPES: dict[str, type[Scorer]] = {}


def validate_spec(spec: object) -> dict:
    """The spec with every default filled in; SpecError naming the first wrong field otherwise."""
    if not isinstance(spec, dict):
        raise SpecError("spec", f"must be a JSON object, got {type(spec).__name__}")
    kind = spec.get("type")
    if kind not in VERIFIER_TYPES:
        known = ", ".join(VERIFIER_TYPES)
        raise SpecError("type", f"must be one of {known}, got {kind!r}" if kind else f"is required ({known})")
    return VERIFIER_TYPES[kind].normalise_spec(spec)


def construct(clean: dict, *, sandbox: SandboxClient | None, outbound: Outbound | None) -> Scorer:
    """The scorer for a spec already normalised; `outbound` goes only to the types that take it."""
    cls = VERIFIER_TYPES[clean["type"]]
    if cls.uses_outbound:
        return cls(clean, sandbox=sandbox, outbound=outbound)  # type: ignore[call-arg]
    return cls(clean, sandbox=sandbox)


def bounded(result: ScoreResult) -> ScoreResult:
    """`result` with a finite score: NaN and infinities become 0, because a reward must be a number."""
    if (
        not isinstance(result.score, int | float)
        or result.score != result.score
        or abs(result.score) == float("inf")
    ):
        return ScoreResult(
            0.0, result.parts, f"score was not a finite number ({result.score!r}); {result.reason}"
        )
    return result


def shorten(text: str, limit: int = 200) -> str:
    """`text` cut to `limit` characters for a reason line, marking the cut."""
    return text if len(text) <= limit else text[: limit - 1] + "…"
