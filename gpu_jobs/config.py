"""`GRPOJobConfig`: one GRPO run, the user's `TrainingSettings` (gpu_jobs.spec) together with the `RunInputs`
a worker adds (paths, rows, verifier specs), checked up front so that a bad job fails before it loads a model.

The settings are checked alone where they are built (at launch, in the web process); what needs the rows
(enough of them for a step, their domains against the weights and the verifiers, an agent job's repositories)
is checked here, when the run is put together. Torch-free (it imports only ``gpu_jobs.rewards``).
``__post_init__`` raises ValueError whose message starts with the name of the wrong field.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field, fields
from typing import Any

from gpu_jobs.agent.spec import check_job_environment
from gpu_jobs.domains import check_domain_weights, domain_counts, domains_without_verifier
from gpu_jobs.rewards import SpecError, validate_spec
from gpu_jobs.spec import TrainingSettings, check


@dataclass(frozen=True, kw_only=True)
class RunInputs:
    """What a worker adds to a job's settings to run it: where, on which rows, scored by which verifiers.
    ``domain_weights`` travels with the rows: it is checked against their domains."""

    model_store: str = field(
        metadata={
            "help": "Folder where built models live; the tiny model is built there on first use (~40 s)."
        }
    )
    output_dir: str = field(
        metadata={"help": "Working folder of this run: trainer files and checkpoints before they are stored."}
    )
    rows: list[dict] = field(
        metadata={
            "help": 'Dataset rows: each has a "prompt" (text) plus any columns the verifiers read, such as '
            '"answer" or "tests". Needs at least prompts_per_step rows.'
        }
    )
    verifiers: list[dict] = field(
        metadata={
            "help": 'Reward sources: [{"name": str, "spec": verifier spec, "weight": float >= 0}]. The reward '
            "of a completion is the weighted sum of its verifier scores; metrics are logged per name."
        }
    )
    domain_weights: dict = field(
        default_factory=dict,
        metadata={
            "help": 'Share of the prompts drawn from each domain (a row\'s "domain" column; "all" for rows '
            "without one): {domain: weight >= 0}, summing to 1 and naming every domain of the rows. Empty: "
            "every domain weighs the same."
        },
    )
    eval_rows: list[dict] = field(
        default_factory=list,
        metadata={
            "help": "Held-out rows scored with greedy completions by the job's verifiers, per domain (a row's "
            '"domain", else "all"): before the first step, every eval_steps and at the end. Empty: no evaluation. '
            "An agent job's (environment set) are held-out tasks: one greedy episode each, scored as the share "
            "solved and the agent's habits (gpu_jobs.agent.evaluation)."
        },
    )

    def __post_init__(self) -> None:
        for name in ("model_store", "output_dir"):
            value = getattr(self, name)
            check(isinstance(value, str) and value.strip() != "", name, "must be a non-empty path")
        check(isinstance(self.rows, list) and len(self.rows) > 0, "rows", "must be a non-empty list of rows")
        for index, row in enumerate(self.rows):
            check(isinstance(row, dict), f"rows[{index}]", "must be an object with a prompt")
            prompt = row.get("prompt")
            check(
                isinstance(prompt, str) and prompt != "",
                f"rows[{index}].prompt",
                "must be a non-empty string",
            )
        check(isinstance(self.eval_rows, list), "eval_rows", "must be a list of rows")
        for index, row in enumerate(self.eval_rows):
            prompt = row.get("prompt") if isinstance(row, dict) else None
            check(
                isinstance(prompt, str) and prompt != "",
                f"eval_rows[{index}].prompt",
                "must be a non-empty string",
            )


@dataclass(frozen=True, kw_only=True)
class GRPOJobConfig(TrainingSettings, RunInputs):
    """One GRPO run: every field of ``TrainingSettings`` and of ``RunInputs``, as keywords."""

    def __post_init__(self) -> None:
        TrainingSettings.__post_init__(self)
        RunInputs.__post_init__(self)
        self.check_row_count(len(self.rows))
        if self.environment is not None:  # agentic jobs (gpu_jobs.agent): rows, options that combine
            object.__setattr__(self, "environment", check_job_environment(self))
        if self.environment is None or self.verifiers:
            self._check_verifiers()
        if self.environment is None:
            self._check_domains()

    @classmethod
    def of(cls, settings: TrainingSettings, inputs: RunInputs) -> GRPOJobConfig:
        """The run of these settings on these inputs."""
        return cls(**_values(settings), **_values(inputs))

    def _check_domains(self) -> None:
        counts = domain_counts(self.rows)
        # Raises ValueError("domain_weights...: why"), the same shape as _check's.
        check_domain_weights(self.domain_weights, counts)
        check(
            self.domain_floor * len(counts) <= 1 + 1e-9,
            "domain_floor",
            f"{self.domain_floor} x {len(counts)} domains is more than all of the prompts; use at most "
            f"{1 / len(counts):.3g}",
        )
        orphans = domains_without_verifier(counts, self.verifiers)
        check(
            not orphans,
            "verifiers",
            f"no weighted verifier scores domain(s) {', '.join(orphans)}: add one, or list the domain in a "
            "verifier's domains",
        )

    def _check_verifiers(self) -> None:
        check(
            isinstance(self.verifiers, list) and len(self.verifiers) > 0,
            "verifiers",
            "must be a non-empty list of {name, spec, weight}",
        )
        names: set[str] = set()
        for index, verifier in enumerate(self.verifiers):
            where = f"verifiers[{index}]"
            check(isinstance(verifier, dict), where, "must be an object with name, spec and weight")
            unknown = set(verifier) - {"name", "spec", "weight", "domains"}
            check(
                not unknown,
                where,
                f"has unknown keys {sorted(unknown)}; allowed: name, spec, weight, domains",
            )
            domains = verifier.get("domains")
            check(
                domains is None
                or isinstance(domains, list)
                and all(isinstance(d, str) and d != "" for d in domains),
                f"{where}.domains",
                "must be a list of domain names (empty or absent: every domain)",
            )
            name: Any = verifier.get("name")
            check(isinstance(name, str) and name.strip() != "", f"{where}.name", "must be a non-empty string")
            # Names become metric keys ("rewards/<name>"): a duplicate would merge two verifiers' curves.
            check(name not in names, f"{where}.name", f"{name!r} is used by another verifier")
            names.add(name)
            weight: Any = verifier.get("weight")
            check(
                isinstance(weight, int | float) and not isinstance(weight, bool) and math.isfinite(weight),
                f"{where}.weight",
                "must be a number",
            )
            check(weight >= 0, f"{where}.weight", f"must be >= 0, got {weight}")
            try:
                validate_spec(verifier.get("spec"))
            except SpecError as error:
                raise ValueError(f"{where}.spec.{error.field}: {error.message}") from error
        check(
            any(v["weight"] > 0 for v in self.verifiers),
            "verifiers",
            "at least one verifier needs a weight above 0, or no completion is ever rewarded",
        )

    def to_dict(self) -> dict:
        """A JSON-serialisable copy; ``GRPOJobConfig(**config.to_dict())`` rebuilds it."""
        return asdict(self)


def _values(instance: object) -> dict:
    # Field by field, not asdict: the rows are not copied.
    return {f.name: getattr(instance, f.name) for f in fields(instance)}  # type: ignore[arg-type]
