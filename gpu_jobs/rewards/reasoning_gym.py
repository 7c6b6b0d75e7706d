"""reasoning_gym: score with the generator's own ``score_answer`` for one reasoning-gym task.

The row carries what the generator's entry held: the question (``prompt``), the reference ``answer`` and
the entry's ``metadata``; the spec names the task and the generator configuration the rows came from.
reasoning-gym is imported on first use, so specs of other types never pay for it.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any

from gpu_jobs.rewards.base import Scorer, ScoreResult, SpecError, SpecField, shorten
from gpu_jobs.rewards.extract import check_extract_fields, extract_fields, extract_from_spec


@lru_cache(maxsize=64)
def _task_names() -> frozenset[str]:
    from reasoning_gym.factory import DATASETS

    return frozenset(DATASETS)


def make_generator(task: str, config: dict, *, size: int | None = None) -> Any:
    """reasoning-gym's dataset object for ``task`` with ``config`` (``size`` overrides the config's)."""
    from reasoning_gym.factory import create_dataset

    settings = dict(config)
    if size is not None:
        settings["size"] = size
    return create_dataset(task, **settings)


class ReasoningGym(Scorer):
    type_name = "reasoning_gym"
    summary = "reasoning-gym: the task generator's own answer checker"
    example = {"type": "reasoning_gym", "task": "basic_arithmetic", "config": {"seed": 0, "size": 100}}
    fields = (
        SpecField("task", (str,), help="The reasoning-gym task name, e.g. basic_arithmetic."),
        SpecField("config", (dict,), default={}, help="The generator configuration the rows were made with."),
        SpecField("answer_field", (str,), default="answer", help="The column with the reference answer."),
        SpecField("metadata_field", (str,), default="metadata", help="The column with the entry's metadata."),
        *extract_fields(),
    )

    @classmethod
    def normalise_spec(cls, spec: dict) -> dict:
        clean = super().normalise_spec(spec)
        try:
            known = _task_names()
        except ImportError as exc:
            raise SpecError("type", f"reasoning-gym is not installed on this host ({exc})") from exc
        if clean["task"] not in known:
            raise SpecError("task", f"unknown reasoning-gym task {clean['task']!r} ({len(known)} are known)")
        check_extract_fields(clean)
        return clean

    def __init__(self, spec: dict, *, sandbox=None) -> None:
        super().__init__(spec, sandbox=sandbox)
        self._generator: Any = None

    def _dataset(self) -> Any:
        # Built lazily and once: some generators load word lists or puzzles when constructed.
        if self._generator is None:
            self._generator = make_generator(self.spec["task"], self.spec["config"], size=1)
        return self._generator

    def _score(self, row: dict, completion: str) -> ScoreResult:
        entry = {
            "question": row.get("prompt", ""),
            "answer": row.get(self.spec["answer_field"]),
            "metadata": row.get(self.spec["metadata_field"]) or {},
        }
        answer = extract_from_spec(completion, self.spec)
        if answer is None:
            return ScoreResult(
                0.0, {"score_answer": 0.0}, f"no answer found in the completion ({self.spec['extract']})"
            )
        score = float(self._dataset().score_answer(answer=answer, entry=entry))
        if score >= 1.0:
            return ScoreResult(1.0, {"score_answer": 1.0}, "correct")
        expected = shorten(str(entry["answer"]), 80)
        return ScoreResult(
            score, {"score_answer": score}, f"score_answer gave {score:g}; expected {expected!r}"
        )
