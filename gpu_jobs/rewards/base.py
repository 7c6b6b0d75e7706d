"""What every verifier type shares: the result, the spec error, the scorer interface and spec fields."""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar

if TYPE_CHECKING:
    from sandboxes.client import SandboxClient


@dataclass
class ScoreResult:
    score: float
    parts: dict[str, float] = field(default_factory=dict)
    reason: str = ""

    def to_dict(self) -> dict:
        return {"score": self.score, "parts": dict(self.parts), "reason": self.reason}


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


class Scorer(ABC):
    """Scores completions against dataset rows. Built from a spec that `normalise_spec` has accepted."""

    type_name: ClassVar[str]
    fields: ClassVar[tuple[SpecField, ...]]

    def __init__(self, spec: dict, *, sandbox: SandboxClient | None = None) -> None:
        self.spec = spec

    @classmethod
    def normalise_spec(cls, spec: dict) -> dict:
        return clean_fields(spec, cls.fields, type_name=cls.type_name)

    @abstractmethod
    def score(self, row: dict, completion: str) -> ScoreResult:
        """Never raises for a bad row or completion: those score 0 with the problem in `reason`."""

    def score_batch(self, rows: list[dict], completions: list[str]) -> list[ScoreResult]:
        """One result per (row, completion) pair, in order; the lists must have the same length."""
        if len(rows) != len(completions):
            raise ValueError(f"{len(rows)} rows but {len(completions)} completions")
        return [self.score(row, completion) for row, completion in zip(rows, completions, strict=True)]


def shorten(text: str, limit: int = 200) -> str:
    """`text` cut to `limit` characters for a reason line, marking the cut."""
    return text if len(text) <= limit else text[: limit - 1] + "…"
