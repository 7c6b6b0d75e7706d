"""GRPO training with TRL's GRPOTrainer: ``main(config, sink=..., checkpoints=...)`` runs one job.

The job reports only through its two interfaces (``gpu_jobs.sink``): metrics, sampled rollouts, log lines
and checkpoint locations go to the event sink; model folders go to the checkpoint store. It runs on the
CPU, or on a CUDA GPU with bf16, gradient checkpointing and vLLM rollouts (``gpu_jobs.device``).

Rewards: each verifier of the config becomes one TRL reward function named after the verifier, so TRL logs
``rewards/<name>/mean`` and weighs the functions with the verifiers' weights. The dataset handed to TRL
holds the prompt and the row's index only; reward functions look the rows up by index in
``config.rows``. Passing the rows' other columns through a ``datasets.Dataset`` instead would coerce them
to one Arrow type per column, which breaks on ordinary data (a "tests" value that is a string in one row
and a list in the next) and turns missing keys into None.

Past 400 lines: the GRPO entry point, its callbacks and the TRL wiring share one run's state; the callbacks
are the next to move out.
"""

from __future__ import annotations

import asyncio
import math
import shutil
import threading
import time
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from transformers import PrinterCallback, TrainerCallback

from gpu_jobs.agent.training import agent_rollouts
from gpu_jobs.ahead import STEP_COLUMN
from gpu_jobs.alarms import AlarmWatch, ForgettingWatch, TamperingLog
from gpu_jobs.config import GRPOJobConfig
from gpu_jobs.control import JobControl, NoControl, control_callback, latest_checkpoint
from gpu_jobs.device import HostInfo, device_args, install_vllm_engine_options, resolve_device
from gpu_jobs.domains import DomainScorer, is_scored, row_domain
from gpu_jobs.early_ends import PRESCORE
from gpu_jobs.evaluation import evaluate
from gpu_jobs.lengths import JobLengths, prepare_lengths
from gpu_jobs.model_store import resolve_model
from gpu_jobs.prompt_length import codec_from_folder, codec_from_tokenizer
from gpu_jobs.rewards import ScoreResult, build_scorer, slow_to_score
from gpu_jobs.rewards.base import TAMPERING_PART, BatchScorer, is_tampering, tampering_what
from gpu_jobs.sampler import DomainWeights, group_signal, prepare_sampling
from gpu_jobs.sink import CheckpointStore, EventSink
from gpu_jobs.trainers import algorithm_classes, generates_ahead, lora_config, save_model

if TYPE_CHECKING:
    from gpu_jobs.curriculum import LengthCurriculum
    from gpu_jobs.rewards.outbound import Outbound
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
    control: JobControl | None = None,
    resume: bool = False,
    overlap_rewards: bool = True,
    outbound: Outbound | None = None,
) -> dict:
    """Run GRPO as ``config`` says and return ``{"steps", "reward", "checkpoint", "model_dir", "train_seconds"}``.

    Preconditions: ``config`` is valid (its ``__post_init__`` ran); ``config.model`` is "tiny" or a local
    folder ``from_pretrained`` loads; ``sandbox`` is given when a verifier runs code and a non-local sandbox
    is wanted (a local one is used otherwise). Seeded: the same config on the same machine gives the same run.
    ``overlap_rewards``: score each step's rewards while its forward passes run (gpu_jobs.overlap); the run is
    the same either way, only faster with it (off only to measure it, bench/train_step.py).
    ``outbound``: what verifiers that call out (model_judge) may reach, with the team's secrets; None: nothing.
    """
    from datasets import Dataset
    from transformers import AutoTokenizer, set_seed

    set_seed(config.seed)
    # The web side checked the name against the store and the hub setting at launch.
    model_dir = resolve_model(config.model, store=Path(config.model_store), allow_hub=True)
    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    # Rows fitted to max_prompt_length (as in evaluation and the deploy gate), the window checked, the length
    # curriculum set up (gpu_jobs.lengths): config.rows are the fitted rows from here on.
    lengths = prepare_lengths(
        config,
        codec=codec_from_folder(Path(model_dir)) or codec_from_tokenizer(tokenizer),
        model_dir=str(model_dir),
        sink=sink,
    )
    config = lengths.config
    host = HostInfo.detect()
    ahead_on = generates_ahead(
        config,
        device=resolve_device(config.device, host),
        slow_rewards=any(slow_to_score(verifier["spec"]) for verifier in config.verifiers),
    )
    trainer_config, trainer_class, algorithm_args = algorithm_classes(
        config, overlap=overlap_rewards, generate_ahead=ahead_on
    )
    recorder = RolloutRecorder(config=config, sink=sink)
    recorder.curriculum = lengths.curriculum
    # Each verifier scores only the rows of its domains (every row when it names none).
    scorers: dict[str, BatchScorer] = {
        verifier["name"]: DomainScorer(
            build_scorer(verifier["spec"], sandbox=sandbox, outbound=outbound), verifier.get("domains")
        )
        for verifier in config.verifiers
    }
    reward_funcs = [recorder.reward_function(name=name, scorer=scorer) for name, scorer in scorers.items()]
    dataset = Dataset.from_dict(
        {"prompt": [row["prompt"] for row in config.rows], ROW_INDEX_COLUMN: list(range(len(config.rows)))}
    )
    # Jobs with an environment run multi-turn episodes through TRL's rollout_func (gpu_jobs.agent.training).
    agent = agent_rollouts(
        config, sink=sink, step_metrics=recorder.step_metrics, outbound=outbound, tampering=recorder.tampering
    )
    start_dir: str | Path = model_dir
    if agent is not None:
        reward_funcs, dataset = agent.reward_funcs, agent.dataset()
        # A supervised warm-up on scripted traces first, when the environment asks for one.
        start_dir = agent.start_model(Path(model_dir), resume=resume)
    output_dir = Path(config.output_dir)
    # Guided tool calls (gpu_jobs.agent.guided_calls) steer transformers' generate; vLLM's turns are not guided.
    guided = bool(config.environment and config.environment.get("guided_calls"))
    placement = device_args(
        device=config.device,
        use_vllm=config.use_vllm and not guided,
        host=host,
        activation_checkpointing=config.activation_checkpointing,
    )
    if placement["use_vllm"]:
        # Prefix caching and chunked prefill in the colocated engine, for long prompts (gpu_jobs.device).
        install_vllm_engine_options()
    args = trainer_config(
        output_dir=str(output_dir / "trainer"),
        max_steps=config.max_steps,
        per_device_train_batch_size=config.prompts_per_step * config.num_generations,
        num_generations=config.num_generations,
        max_completion_length=config.max_completion_length,
        temperature=config.temperature,
        learning_rate=config.learning_rate,
        lr_scheduler_type=config.lr_scheduler_type,
        warmup_steps=config.warmup_steps,
        beta=config.beta,
        **algorithm_args,
        reward_weights=agent.reward_weights
        if agent is not None
        else [float(verifier["weight"]) for verifier in config.verifiers],
        seed=config.seed,
        data_seed=config.seed,
        logging_steps=1,
        # Model checkpoints for the store are written by ReportingCallback. The trainer's own checkpoints
        # (optimiser, scheduler, RNG and trainer state, only the newest kept) are what a killed or paused job
        # resumes from (gpu_jobs.control); ControlCallback also asks for one when the job must pause or stop.
        save_strategy="steps" if config.save_steps > 0 else "no",
        save_steps=config.save_steps if config.save_steps > 0 else 500,
        save_total_limit=1,
        # CPU: float32, no checkpointing; CUDA: bf16, gradient checkpointing, vLLM colocate (gpu_jobs.device).
        **placement,
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
        tampering=recorder.tampering,
        lengths=lengths,
        # An agent job's held-out rows are tasks: each evaluation plays one episode per task.
        agent_evaluate=agent.evaluate if agent is not None else None,
    )
    stopper = control_callback(control or NoControl())
    trainer = trainer_class(
        model=str(start_dir),
        peft_config=lora_config(config),
        reward_funcs=reward_funcs,
        args=args,
        train_dataset=dataset,
        processing_class=tokenizer,
        callbacks=[reporter, stopper],
        **({"rollout_func": agent.rollout_func} if agent is not None else {}),
    )
    # The sink is the job's record; the printer would only repeat each log line on stdout.
    trainer.remove_callback(PrinterCallback)
    # Multi-domain jobs draw prompts by domain weight (and profiled ones in an easy-to-hard order).
    recorder.domain_weights = prepare_sampling(
        trainer,
        config=config,
        scorers=scorers,
        sink=sink,
        curriculum=lengths.curriculum,
        row_stages=lengths.row_stages,
    )
    started = time.perf_counter()
    # resume: go on from the newest complete trainer checkpoint a stopped or killed run left (gpu_jobs.control).
    found = latest_checkpoint(Path(args.output_dir)) if resume else None
    trainer.train(resume_from_checkpoint=str(found[0]) if found else None)
    return {
        "steps": trainer.state.global_step,
        "reward": reporter.last_reward,
        "checkpoint": reporter.last_location,
        "model_dir": str(model_dir),
        "train_seconds": round(time.perf_counter() - started, 3),
        # "pause" or "stop" when the control ended training early (after a checkpoint), else None.
        "stopped_for": stopper.stopped_for,
    }


class RolloutRecorder:
    """Makes the reward functions and reports a few scored rollouts per step.

    Every verifier scores the step's batch (each distinct row and completion once, see ``score_distinct``);
    with ``concurrent`` the reward functions are async and TRL runs them all at once. The scores of each are
    held until the last one has finished, then the sampled rollouts are emitted with the weighted total and
    every part.
    """

    def __init__(
        self, *, config: GRPOJobConfig, sink: EventSink, concurrent: bool = True, distinct: bool = True
    ) -> None:
        self.rows = config.rows
        self.weights = {verifier["name"]: float(verifier["weight"]) for verifier in config.verifiers}
        # Async reward functions (all verifiers of a step at once) when True, TRL's one-by-one calls if not.
        self.concurrent = concurrent
        # Score each distinct (row, completion) once (score_distinct) when True, every completion if not.
        self.distinct = distinct
        # Guards scoring, pending and step_metrics: concurrent reward functions finish on worker threads.
        self.lock = threading.Lock()
        self.per_step = config.rollouts_per_step
        self.sink = sink
        # Per step, the verifiers' results so far: with generate_ahead two steps' batches can be scored at once
        # (the next batch's rewards start before the last one's end, on a loaded host).
        self.scoring: dict[int, dict[str, list[ScoreResult]]] = defaultdict(dict)
        self.pending: dict[str, list[ScoreResult]] = {}  # the step being reported, all its verifiers' results
        self.group_size = config.num_generations
        # Set by main when the domain sampler is in use: told which domains' groups gave a learning signal.
        self.domain_weights: DomainWeights | None = None
        # Set by main when the job has a length curriculum: told each step's pass rate, it moves the stage on.
        self.curriculum: LengthCurriculum | None = None
        self.emitted: dict[int, int] = defaultdict(int)
        # Metrics TRL does not compute, per step, merged into that step's metric event by the callback.
        self.step_metrics: dict[int, dict[str, float]] = defaultdict(dict)
        # Rollouts scored as tampering with a verifier, per step: the reward_tampering alarm reads it.
        self.tampering = TamperingLog()
        # (step, verifier) -> verdicts of (row index, completion) pairs scored before the step's reward call
        # (completions that ended early in generation, gpu_jobs.early_ends); that call takes them from here.
        self.prescored: dict[tuple[int, str], dict[tuple[int, str], ScoreResult]] = defaultdict(dict)

    def reward_function(self, *, name: str, scorer: BatchScorer) -> Any:
        def score(prompts: list, completions: list, kwargs: dict) -> list[float]:
            rows = [self.rows[index] for index in kwargs[ROW_INDEX_COLUMN]]
            texts = [_text(completion) for completion in completions]
            # TRL's global_step counts finished steps; the metrics of this step will carry global_step + 1.
            # Generated ahead (gpu_jobs.ahead), a batch names the step that trains on it, when it reports.
            step = kwargs.get(STEP_COLUMN, [None])[0] or kwargs["trainer_state"].global_step + 1
            started = time.perf_counter()
            if self.distinct:
                with self.lock:
                    known = self.prescored.pop((step, name), {})
                    for stale in [key for key in self.prescored if key[0] < step]:
                        del self.prescored[stale]
                results, distinct = score_distinct(scorer, rows, kwargs[ROW_INDEX_COLUMN], texts, known=known)
            else:
                results, distinct = scorer.score_batch(rows, texts), len(texts)
            with self.lock:
                self.step_metrics[step][f"verify_time/{name}"] = time.perf_counter() - started
                self.step_metrics[step][f"verify_distinct/{name}"] = float(distinct)
                self.scoring[step][name] = results
                # Whichever verifier finishes last reports the step (in concurrent mode any may be last).
                if len(self.scoring[step]) == len(self.weights):
                    self.pending = self.scoring.pop(step)
                    self._report(step=step, rows=rows, kwargs=kwargs, prompts=prompts, texts=texts)
            return [result.score for result in results]

        if self.concurrent:
            # TRL awaits all async reward functions at once (asyncio.gather on its event-loop thread): every
            # verifier's batch, sandbox runs included, is in flight at the same time instead of one by one.
            async def reward_async(prompts: list, completions: list, **kwargs: Any) -> list[float]:
                return await asyncio.to_thread(score, prompts, completions, kwargs)

            reward: Any = reward_async
        else:

            def reward_sync(prompts: list, completions: list, **kwargs: Any) -> list[float]:
                return score(prompts, completions, kwargs)

            reward = reward_sync

        def prescore(*, inputs: list[dict], texts: list[str], step: int) -> None:
            """Score these rows' completions now, ahead of the step's call (distinct pairs only)."""
            if not self.distinct:
                return
            indices = [row[ROW_INDEX_COLUMN] for row in inputs]
            results, _ = score_distinct(scorer, [self.rows[i] for i in indices], indices, texts)
            with self.lock:
                self.prescored[(step, name)].update(
                    zip(zip(indices, texts, strict=True), results, strict=True)
                )

        setattr(reward, PRESCORE, prescore)
        # TRL names a reward function's metrics after __name__.
        reward.__name__ = name
        reward.__qualname__ = name
        return reward

    def _report(self, *, step: int, rows: list[dict], kwargs: dict, prompts: list, texts: list[str]) -> None:
        """Step metrics and rollouts, once every verifier has scored the step's batch."""
        self.step_metrics[step].update(self._pass_rates(rows))
        if self.domain_weights is not None:
            self.domain_weights.observe(
                group_signal([row_domain(r) for r in rows], self._passed(rows), self.group_size)
            )
            self.step_metrics[step].update(self.domain_weights.metrics())
        if self.curriculum is not None:
            self._curriculum_step(step)
        tried = self._tampering(len(rows))
        self.step_metrics[step].update(self.tampering.record(step, tried))
        self._emit(
            step=step, rows=rows, indices=kwargs[ROW_INDEX_COLUMN], prompts=prompts, texts=texts, tried=tried
        )

    def _curriculum_step(self, step: int) -> None:
        """The step's stage in its metrics; a log event with the transition when the stage ends."""
        assert self.curriculum is not None
        self.step_metrics[step]["curriculum/stage"] = float(self.curriculum.current + 1)
        moved = self.curriculum.observe(step=step, pass_rate=self.step_metrics[step].get("pass_rate", 0.0))
        if moved is not None:
            self.sink.emit(
                "log",
                {
                    "message": f"length curriculum: stage {moved['from_stage']} ended after step {step} "
                    f"({moved['reason']}); stage {moved['stage']} of {moved['stages']} (prompts up to "
                    f"{moved['max_length']} tokens) starts",
                    "curriculum": moved,
                },
            )

    def _tampering(self, count: int) -> list[str | None]:
        """Per completion: what it tried against a verifier that runs code ("" if nothing, None if no such
        verifier scored it)."""
        tried: list[str | None] = []
        for index in range(count):
            results = [results[index] for results in self.pending.values()]
            kinds = [tampering_what(result) for result in results if is_tampering(result)]
            checked = any(TAMPERING_PART in result.parts for result in results)
            tried.append("; ".join(dict.fromkeys(kinds)) if kinds else "" if checked else None)
        return tried

    def _pass_rates(self, rows: list[dict]) -> dict[str, float]:
        """Share of completions that every weighted verifier passed (scored 1), and the mean normalised
        reward, overall and per domain (a row's "domain" column)."""
        weighted = {name: results for name, results in self.pending.items() if self.weights[name] > 0}
        groups: dict[str, list[tuple[bool, float]]] = defaultdict(list)
        passed_rows = self._passed(rows)
        for index, row in enumerate(rows):
            # Only the verifiers routed to the row's domain scored it (the others left it unscored).
            scored = {
                name: results[index].score for name, results in weighted.items() if is_scored(results[index])
            }
            total_weight = sum(self.weights[name] for name in scored) or 1.0
            reward = sum(self.weights[name] * score for name, score in scored.items())
            outcome = (passed_rows[index], reward / total_weight)
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

    def _passed(self, rows: list[dict]) -> list[bool]:
        """Per completion: every weighted verifier that scored it gave full marks."""
        weighted = [results for name, results in self.pending.items() if self.weights[name] > 0]
        return [
            all(results[index].score >= 1.0 for results in weighted if is_scored(results[index]))
            for index in range(len(rows))
        ]

    def _emit(
        self,
        *,
        step: int,
        rows: list[dict],
        indices: list[int],
        prompts: list,
        texts: list[str],
        tried: list[str | None],
    ) -> None:
        pending, self.pending = self.pending, {}
        wanted = max(0, min(self.per_step - self.emitted[step], len(texts)))
        self.emitted[step] += wanted
        # Evenly spaced picks: completions come grouped by prompt, so this spreads them over prompts. Every
        # rollout that tried to tamper is reported too, so the job page can show each one.
        picks = sorted(
            {i * len(texts) // wanted for i in range(wanted)} | {i for i, t in enumerate(tried) if t}
        )
        rollouts = []
        for index in picks:
            parts = {
                name: results[index].score for name, results in pending.items() if is_scored(results[index])
            }
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
                        # What it tried against the verifier; the job page and API filter on this key.
                        **({TAMPERING_PART: tried[index]} if tried[index] else {}),
                    },
                )
            )
        # One write and one broadcast for the step's rollouts.
        if rollouts:
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
        scorers: dict[str, BatchScorer],
        step_metrics: dict[int, dict[str, float]],
        tampering: TamperingLog | None = None,
        lengths: JobLengths | None = None,
        agent_evaluate: Callable[..., dict[str, float]] | None = None,  # (rows, model, tokenizer, *, step)
    ) -> None:
        self.config = config
        self.lengths = lengths
        self.agent_evaluate = agent_evaluate
        self.step_metrics = step_metrics
        self.scorers = scorers
        self.last_eval_step: int | None = None
        self.sink = sink
        self.checkpoints = checkpoints
        self.save_root = save_root
        self.last_reward: float | None = None
        self.last_location: str | None = None
        self.last_saved_step: int | None = None
        self.alarms = AlarmWatch(
            weights={v["name"]: float(v["weight"]) for v in config.verifiers}, tampering=tampering
        )
        # The first evaluation (the base model) is what later ones are compared with, per domain.
        self.forgetting = ForgettingWatch(
            margin=config.forgetting_margin, state_file=Path(config.output_dir) / "eval_base.json"
        )

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
        if state.global_step == 0:  # a resumed run evaluated this step before it stopped
            self._evaluate(
                step=state.global_step, model=kwargs["model"], tokenizer=kwargs["processing_class"]
            )

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
            {
                "message": f"GRPO finished after {state.global_step} steps; "
                f"last checkpoint: step {self.last_saved_step}"
            },
        )

    def _evaluate(self, *, step: int, model: Any, tokenizer: Any) -> None:
        if not self.config.eval_rows:
            return
        was_training = model.training
        if self.agent_evaluate is not None:
            scores = self.agent_evaluate(self.config.eval_rows, model, tokenizer, step=step)
        else:
            scores = evaluate(
                model=model,
                tokenizer=tokenizer,
                rows=self.config.eval_rows,
                scorers=self.scorers,
                weights={v["name"]: float(v["weight"]) for v in self.config.verifiers},
                max_new_tokens=self.config.max_completion_length,
                # Scores per prompt-length bucket too (eval_length/<bound>/<domain>), when rows have lengths.
                lengths=self.lengths.eval_lengths if self.lengths and self.lengths.eval_bounds else None,
                bounds=self.lengths.eval_bounds if self.lengths else None,
            )
        model.train(was_training)
        self.last_eval_step = step
        self.sink.emit("metric", {"step": step, **scores})
        for alarm in self.forgetting.observe(step, scores):
            self.sink.emit("alarm", alarm.to_payload())

    def _save(self, *, step: int, model: Any, tokenizer: Any) -> None:
        local_dir = self.save_root / f"step-{step}"
        shutil.rmtree(local_dir, ignore_errors=True)
        save_model(model, local_dir)  # LoRA adapters merged: every checkpoint is a plain model folder
        tokenizer.save_pretrained(local_dir)
        location = self.checkpoints.save(step=step, local_dir=local_dir)
        # The store keeps its own copy; the local one would only fill the disk on long runs.
        shutil.rmtree(local_dir, ignore_errors=True)
        self.last_saved_step = step
        self.last_location = location
        self.sink.emit("checkpoint", {"step": step, "location": location})


def score_distinct(
    scorer: BatchScorer,
    rows: list[dict],
    row_keys: list[int],
    texts: list[str],
    *,
    known: dict[tuple[int, str], ScoreResult] | None = None,
) -> tuple[list[ScoreResult], int]:
    """Scores of ``texts`` against ``rows`` and how many distinct pairs they are: each distinct (row key,
    completion) pair is scored once and its result shared by its copies; pairs in ``known`` (scored earlier
    in the step) are taken from there.

    A group's completions often repeat (a model that knows an answer gives it 8 times out of 8), so this
    cuts sandbox runs several-fold. Verifiers are meant to be deterministic; one that is not (a judge
    sampling) gives copies the same score, which also keeps identical answers from getting different
    advantages.
    """
    first: dict[tuple[int, str], int] = {}
    for index, key in enumerate(zip(row_keys, texts, strict=True)):
        first.setdefault(key, index)
    by_key = {key: known[key] for key in first if known and key in known}
    picked = [(key, index) for key, index in first.items() if key not in by_key]
    if picked:
        results = scorer.score_batch([rows[i] for _, i in picked], [texts[i] for _, i in picked])
        by_key.update(zip((key for key, _ in picked), results, strict=True))
    return [by_key[key] for key in zip(row_keys, texts, strict=True)], len(first)


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
