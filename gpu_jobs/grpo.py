"""GRPO training with TRL's GRPOTrainer: ``main(config, sink=..., checkpoints=...)`` runs one job.

The job reports only through its two interfaces (``gpu_jobs.sink``): metrics, sampled rollouts, log lines
and checkpoint locations go to the event sink; model folders go to the checkpoint store. It runs on the
CPU (``use_cpu=True``); the GPU path (vLLM rollouts, bf16) is a later addition.

Rewards: each verifier of the config becomes one TRL reward function named after the verifier, so TRL logs
``rewards/<name>/mean`` and weighs the functions with the verifiers' weights. The dataset handed to TRL
holds the prompt and the row's index only; reward functions look the rows up by index in
``config.rows``. Passing the rows' other columns through a ``datasets.Dataset`` instead would coerce them
to one Arrow type per column, which breaks on ordinary data (a "tests" value that is a string in one row
and a list in the next) and turns missing keys into None.
"""

from __future__ import annotations

import math
import shutil
import time
from collections import defaultdict
from pathlib import Path
from typing import TYPE_CHECKING, Any

from transformers import PrinterCallback, TrainerCallback

from gpu_jobs.alarms import AlarmWatch
from gpu_jobs.config import GRPOJobConfig
from gpu_jobs.evaluation import evaluate
from gpu_jobs.rewards import Scorer, ScoreResult, build_scorer
from gpu_jobs.sink import CheckpointStore, EventSink
from gpu_jobs.tiny_model import ensure_tiny_model

if TYPE_CHECKING:
    from sandboxes.client import SandboxClient

ROW_INDEX_COLUMN = "anneal_row"
# TRL's names for some metrics -> the names in Anneal's metric events (see gpu_jobs.sink).
_METRIC_RENAMES = {"completions/mean_length": "completion_length"}


def main(
    config: GRPOJobConfig,
    *,
    sink: EventSink,
    checkpoints: CheckpointStore,
    sandbox: SandboxClient | None = None,
) -> dict:
    """Run GRPO as ``config`` says and return ``{"steps", "reward", "checkpoint", "model_dir", "train_seconds"}``.

    Preconditions: ``config`` is valid (its ``__post_init__`` ran); ``config.model`` is "tiny" or a local
    folder ``from_pretrained`` loads; ``sandbox`` is given when a verifier runs code and a non-local sandbox
    is wanted (a local one is used otherwise). Seeded: the same config on the same machine gives the same run.
    """
    from datasets import Dataset
    from transformers import AutoTokenizer, set_seed
    from trl import GRPOConfig, GRPOTrainer

    set_seed(config.seed)
    model_dir = ensure_tiny_model(Path(config.model_store)) if config.model == "tiny" else Path(config.model)
    recorder = RolloutRecorder(config=config, sink=sink)
    scorers = {
        verifier["name"]: build_scorer(verifier["spec"], sandbox=sandbox) for verifier in config.verifiers
    }
    reward_funcs = [recorder.reward_function(name=name, scorer=scorer) for name, scorer in scorers.items()]
    dataset = Dataset.from_dict(
        {"prompt": [row["prompt"] for row in config.rows], ROW_INDEX_COLUMN: list(range(len(config.rows)))}
    )
    output_dir = Path(config.output_dir)
    args = GRPOConfig(
        output_dir=str(output_dir / "trainer"),
        max_steps=config.max_steps,
        per_device_train_batch_size=config.prompts_per_step * config.num_generations,
        num_generations=config.num_generations,
        max_completion_length=config.max_completion_length,
        temperature=config.temperature,
        learning_rate=config.learning_rate,
        lr_scheduler_type="constant",
        beta=config.beta,
        loss_type=config.loss_type,
        reward_weights=[float(verifier["weight"]) for verifier in config.verifiers],
        seed=config.seed,
        data_seed=config.seed,
        logging_steps=1,
        # Checkpoints are written by ReportingCallback, which hands them to the checkpoint store.
        save_strategy="no",
        use_cpu=True,
        bf16=False,
        # TRL turns it on by default; on a small model it only costs time.
        activation_checkpointing=False,
        report_to="none",
        disable_tqdm=True,
        dataloader_num_workers=0,
    )
    reporter = ReportingCallback(
        config=config,
        sink=sink,
        checkpoints=checkpoints,
        save_root=output_dir / "saves",
        scorers=scorers,
        step_metrics=recorder.step_metrics,
    )
    trainer = GRPOTrainer(
        model=str(model_dir),
        reward_funcs=reward_funcs,
        args=args,
        train_dataset=dataset,
        processing_class=AutoTokenizer.from_pretrained(model_dir),
        callbacks=[reporter],
    )
    # The sink is the job's record; the printer would only repeat each log line on stdout.
    trainer.remove_callback(PrinterCallback)
    started = time.perf_counter()
    trainer.train()
    return {
        "steps": trainer.state.global_step,
        "reward": reporter.last_reward,
        "checkpoint": reporter.last_location,
        "model_dir": str(model_dir),
        "train_seconds": round(time.perf_counter() - started, 3),
    }


class RolloutRecorder:
    """Makes the reward functions and reports a few scored rollouts per step.

    TRL calls the reward functions one after another on the same batch; the scores of each are held until
    the last one has run, then the sampled rollouts are emitted with the weighted total and every part.
    """

    def __init__(self, *, config: GRPOJobConfig, sink: EventSink) -> None:
        self.rows = config.rows
        self.weights = {verifier["name"]: float(verifier["weight"]) for verifier in config.verifiers}
        self.last_name = config.verifiers[-1]["name"]
        self.per_step = config.rollouts_per_step
        self.sink = sink
        self.pending: dict[str, list[ScoreResult]] = {}
        self.emitted: dict[int, int] = defaultdict(int)
        # Metrics TRL does not compute, per step, merged into that step's metric event by the callback.
        self.step_metrics: dict[int, dict[str, float]] = defaultdict(dict)

    def reward_function(self, *, name: str, scorer: Scorer) -> Any:
        def reward(prompts: list, completions: list, **kwargs: Any) -> list[float]:
            rows = [self.rows[index] for index in kwargs[ROW_INDEX_COLUMN]]
            texts = [_text(completion) for completion in completions]
            # TRL's global_step counts finished steps; the metrics of this step will carry global_step + 1.
            step = kwargs["trainer_state"].global_step + 1
            started = time.perf_counter()
            results = scorer.score_batch(rows, texts)
            self.step_metrics[step][f"verify_time/{name}"] = time.perf_counter() - started
            self.pending[name] = results
            if name == self.last_name:
                self.step_metrics[step].update(self._pass_rates(rows))
                self._emit(
                    step=step, rows=rows, indices=kwargs[ROW_INDEX_COLUMN], prompts=prompts, texts=texts
                )
            return [result.score for result in results]

        # TRL names a reward function's metrics after __name__.
        reward.__name__ = name
        reward.__qualname__ = name
        return reward

    def _pass_rates(self, rows: list[dict]) -> dict[str, float]:
        """Share of completions that every weighted verifier passed (scored 1), and the mean normalised
        reward, overall and per domain (a row's "domain" column)."""
        weighted = {name: results for name, results in self.pending.items() if self.weights[name] > 0}
        total_weight = sum(self.weights[name] for name in weighted) or 1.0
        groups: dict[str, list[tuple[bool, float]]] = defaultdict(list)
        for index, row in enumerate(rows):
            passed = all(results[index].score >= 1.0 for results in weighted.values())
            reward = sum(self.weights[name] * results[index].score for name, results in weighted.items())
            outcome = (passed, reward / total_weight)
            groups["all"].append(outcome)
            if row.get("domain"):
                groups[str(row["domain"])].append(outcome)
        metrics = {}
        for domain, outcomes in groups.items():
            suffix = "" if domain == "all" else f"/{domain}"
            metrics[f"pass_rate{suffix}"] = sum(passed for passed, _ in outcomes) / len(outcomes)
            if suffix:
                metrics[f"reward{suffix}"] = sum(reward for _, reward in outcomes) / len(outcomes)
        return metrics

    def _emit(
        self, *, step: int, rows: list[dict], indices: list[int], prompts: list, texts: list[str]
    ) -> None:
        pending, self.pending = self.pending, {}
        wanted = min(self.per_step - self.emitted[step], len(texts))
        if wanted <= 0:
            return
        self.emitted[step] += wanted
        rollouts = []
        # Evenly spaced picks: completions come grouped by prompt, so this spreads them over prompts.
        for index in (i * len(texts) // wanted for i in range(wanted)):
            parts = {name: results[index].score for name, results in pending.items()}
            reasons = [
                f"{name}: {results[index].reason}"
                for name, results in pending.items()
                if results[index].reason
            ]
            reference = rows[index].get("answer")
            domain = rows[index].get("domain")
            output = {
                name: results[index].output for name, results in pending.items() if results[index].output
            }
            rollouts.append(
                (
                    "rollout",
                    {
                        **({"domain": str(domain)} if domain else {}),
                        # What sandboxed verifiers saw the program print, per verifier.
                        **({"output": output} if output else {}),
                        "step": step,
                        "prompt": _text(prompts[index]),
                        "completion": texts[index],
                        "reward": sum(self.weights[name] * score for name, score in parts.items()),
                        "parts": parts,
                        "reason": "; ".join(reasons),
                        "reference": None if reference is None else str(reference),
                        # Where the row is in the job's dataset, so a flagged rollout can become a test case.
                        "row_index": int(indices[index]),
                    },
                )
            )
        # One write and one broadcast for the step's rollouts.
        self.sink.emit_many(rollouts)


class ReportingCallback(TrainerCallback):
    """Sends TRL's logs to the sink as metric events and saves checkpoints to the checkpoint store."""

    def __init__(
        self,
        *,
        config: GRPOJobConfig,
        sink: EventSink,
        checkpoints: CheckpointStore,
        save_root: Path,
        scorers: dict[str, Scorer],
        step_metrics: dict[int, dict[str, float]],
    ) -> None:
        self.config = config
        self.step_metrics = step_metrics
        self.scorers = scorers
        self.last_eval_step: int | None = None
        self.sink = sink
        self.checkpoints = checkpoints
        self.save_root = save_root
        self.last_reward: float | None = None
        self.last_location: str | None = None
        self.last_saved_step: int | None = None
        self.alarms = AlarmWatch(weights={v["name"]: float(v["weight"]) for v in config.verifiers})

    def on_train_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        c = self.config
        self.sink.emit(
            "log",
            {
                "message": f"GRPO started: model {c.model}, {len(c.rows)} rows, {c.max_steps} steps of "
                f"{c.prompts_per_step} prompts x {c.num_generations} completions, verifiers "
                + ", ".join(f"{v['name']} (weight {v['weight']})" for v in c.verifiers)
            },
        )
        self._evaluate(step=state.global_step, model=kwargs["model"], tokenizer=kwargs["processing_class"])

    def on_log(self, args: Any, state: Any, control: Any, logs: dict | None = None, **kwargs: Any) -> None:
        logs = logs or {}
        if "train_runtime" in logs:
            # The trainer's closing summary, not a step's metrics.
            return
        payload = metric_payload(step=state.global_step, logs=logs)
        payload.update(self.step_metrics.pop(state.global_step, {}))
        if "reward" in payload:
            self.last_reward = payload["reward"]
        self.sink.emit("metric", payload)
        for alarm in self.alarms.observe(payload):
            self.sink.emit("alarm", alarm.to_payload())

    def on_step_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        model, tokenizer = kwargs["model"], kwargs["processing_class"]
        every = self.config.save_steps
        if every > 0 and state.global_step % every == 0:
            self._save(step=state.global_step, model=model, tokenizer=tokenizer)
        every = self.config.eval_steps
        if every > 0 and state.global_step % every == 0:
            self._evaluate(step=state.global_step, model=model, tokenizer=tokenizer)

    def on_train_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        model, tokenizer = kwargs["model"], kwargs["processing_class"]
        if self.last_saved_step != state.global_step:
            self._save(step=state.global_step, model=model, tokenizer=tokenizer)
        if self.last_eval_step != state.global_step:
            self._evaluate(step=state.global_step, model=model, tokenizer=tokenizer)
        self.sink.emit(
            "log",
            {"message": f"GRPO finished after {state.global_step} steps; checkpoint at {self.last_location}"},
        )

    def _evaluate(self, *, step: int, model: Any, tokenizer: Any) -> None:
        if not self.config.eval_rows:
            return
        was_training = model.training
        scores = evaluate(
            model=model,
            tokenizer=tokenizer,
            rows=self.config.eval_rows,
            scorers=self.scorers,
            weights={v["name"]: float(v["weight"]) for v in self.config.verifiers},
            max_new_tokens=self.config.max_completion_length,
        )
        model.train(was_training)
        self.last_eval_step = step
        self.sink.emit("metric", {"step": step, **scores})

    def _save(self, *, step: int, model: Any, tokenizer: Any) -> None:
        local_dir = self.save_root / f"step-{step}"
        shutil.rmtree(local_dir, ignore_errors=True)
        model.save_pretrained(local_dir)
        tokenizer.save_pretrained(local_dir)
        location = self.checkpoints.save(step=step, local_dir=local_dir)
        # The store keeps its own copy; the local one would only fill the disk on long runs.
        shutil.rmtree(local_dir, ignore_errors=True)
        self.last_saved_step = step
        self.last_location = location
        self.sink.emit("checkpoint", {"step": step, "location": location})


def metric_payload(*, step: int, logs: dict) -> dict:
    """A metric event from one TRL log record: finite numbers only, Anneal's key names, the step added."""
    payload: dict[str, Any] = {"step": int(step)}
    for key, value in logs.items():
        if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
            continue
        if key.startswith("rewards/") and key.endswith("/mean"):
            key = key.removesuffix("/mean")
        payload[_METRIC_RENAMES.get(key, key)] = float(value)
    return payload


def _text(value: Any) -> str:
    """Plain text of a prompt or completion; TRL passes conversational ones as lists of messages."""
    if isinstance(value, str):
        return value
    if isinstance(value, list):
        return "\n".join(str(message.get("content", "")) for message in value if isinstance(message, dict))
    return str(value)
