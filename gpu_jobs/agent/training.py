"""Multi-turn GRPO: episodes as TRL rollouts, through GRPOTrainer's ``rollout_func``.

TRL 1.16 offers three ways to generate: single-turn, ``tools``/``environment_factory`` (its own tool loop,
which needs a chat template that renders tools and parses calls with the tokenizer's response schema, and has
no observation cap, token budget or running summary), and ``rollout_func`` (the caller generates and returns
token ids). Anneal uses ``rollout_func``: it works with the tiny model's plain tokenizer as well as chat
models, and keeps every limit of gpu_jobs.agent.episode.

Per batch, the episodes of all its prompts run in lockstep: each turn, the contexts of the episodes still
running are generated in one batched call, then each tool call runs in that episode's sandbox. The call goes
to the trainer's vLLM when the job runs with it (``use_vllm`` on a CUDA host, gpu_jobs.device: TRL syncs the
weights into vLLM before each ``rollout_func`` call; ``VLLMTurns``), else to the model's own ``generate``
(``TransformersTurns``). With vLLM the sampled tokens' log-probabilities go back to TRL for its importance
sampling correction (0 on observation tokens, which carry no loss). Several processes (accelerate) with vLLM in
server mode or tensor parallel would need every rank to make the same number of turn calls: not handled yet.
What is trained on: the prompt is the context the last segment started from (the task, or the task with the
running summary once one replaced earlier turns), the completion is everything after it; ``env_mask`` is 1 on
the model's own tokens and 0 on the observations, so only the model's tokens carry loss. Turns before a
summary are not trained on (the model saw them in a context that no longer exists).

The dataset handed to TRL holds a key per row (``anneal-row:<index>``), not the prompt: the environment
renders the real prompt from the row. Rewards: one TRL reward function "environment" (the episode reward of
gpu_jobs.agent.spec, weight 1), then the job's verifiers (if any) scored on the model's own text of the
episode, with their weights. Up to ``rollouts_per_step`` episodes a step go to the sink as rollout events
carrying ``turns`` (gpu_jobs.agent.episode.Step.to_payload), which the live view draws as a timeline; the
held-out evaluation's episodes go too, marked ``held_out``.

Past 400 lines: the episode rollout loop, its reward hand-off to TRL and its reporting share the trainer's
state; reporting is the next part to move out.
"""

from __future__ import annotations

import time
from collections import defaultdict
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from gpu_jobs.agent.episode import Episode, EpisodeResult
from gpu_jobs.agent.evaluation import agent_scores, edited_then_tested
from gpu_jobs.agent.generation import TransformersTurns, VLLMTurns, turn_generator
from gpu_jobs.agent.rendering import PlainRenderer, make_renderer
from gpu_jobs.agent.spec import validate_environment
from gpu_jobs.agent.tools import CALL_TAGS
from gpu_jobs.agent.warmup import warm_up_model, warmup_message, warmup_warning
from gpu_jobs.alarms import TamperingLog
from gpu_jobs.device import HostInfo, resolve_device
from gpu_jobs.rewards import ScoreResult, build_scorer
from gpu_jobs.rewards.base import TAMPERING_PART, tampering_what
from sandboxes.session import SessionPool

if TYPE_CHECKING:
    from gpu_jobs.config import GRPOJobConfig
    from gpu_jobs.rewards.outbound import Outbound
    from gpu_jobs.sink import EventSink

ROW_KEY = "anneal-row:"
MAX_PRESTARTED = 16  # blank sandboxes kept started for the next batch's episodes (SessionPool)
# Episodes whose sandbox work runs at once (each in its own session; the host's cores bound it).
SANDBOX_THREADS = 4
HELD_OUT_ROLLOUTS = 32  # held-out episodes reported per evaluation (eval_episodes can make 16 per task)
ENVIRONMENT_REWARD = "environment"


@dataclass
class _Track:
    """The token record of one episode's current segment."""

    episode: Episode
    prompt_ids: list[int]
    completion_ids: list[int] = field(default_factory=list)
    mask: list[int] = field(default_factory=list)
    logprobs: list[float | None] = field(default_factory=list)
    summaries: int = 0


class AgentRollouts:
    """What an environment job gives GRPOTrainer: the dataset, the rollout function, the reward functions."""

    def __init__(
        self,
        *,
        config: GRPOJobConfig,
        sink: EventSink,
        step_metrics: dict[int, dict[str, float]] | None = None,
        outbound: Outbound | None = None,
        tampering: TamperingLog | None = None,
    ) -> None:
        self.config = config
        self.spec = validate_environment(config.environment)
        self.sink = sink
        self.rows = config.rows
        self.step_metrics: dict[int, dict[str, float]] = (
            step_metrics if step_metrics is not None else defaultdict(dict)
        )
        self.results: dict[int, EpisodeResult] = {}
        self.texts: dict[int, str] = {}
        self._next_id = 0
        self.emitted: dict[int, int] = defaultdict(int)
        # Episodes whose final-state verdict caught tampering, per step: the reward_tampering alarm reads it.
        self.tampering = tampering if tampering is not None else TamperingLog()
        self.scorers = {v["name"]: build_scorer(v["spec"], outbound=outbound) for v in config.verifiers}
        self.weights = {v["name"]: float(v["weight"]) for v in config.verifiers}
        self.renderer: PlainRenderer | None = None
        self.warmup: dict | None = None  # what the supervised warm-up did, when the environment asked for one
        # Sandboxes for the next batch's episodes start while the trainer works on this one's.
        self.sessions: SessionPool | None = None

    def start_model(self, model_dir: Path, *, resume: bool = False) -> Path:
        """The folder GRPO starts from: `model_dir`, or the model after the supervised warm-up on scripted
        traces when the environment asks for one (gpu_jobs.agent.warmup); the warm-up is reported as a log."""
        if not self.spec.warmup_sft_steps:
            return model_dir
        folder, self.warmup = warm_up_model(
            model_dir=model_dir,
            output_dir=Path(self.config.output_dir),
            spec=self.spec,
            # Neither the training nor the held-out tasks: the evaluation is on repositories never trained on.
            rows=[*self.rows, *self.config.eval_rows],
            device=resolve_device(self.config.device, HostInfo.detect()),
            seed=self.config.seed,
            resume=resume,
        )
        self.sink.emit("log", {"message": warmup_message(self.warmup)})
        if warning := warmup_warning(self.warmup, self.spec):
            self.sink.emit("log", {"level": "warning", "message": warning})
        return folder

    # What grpo.main hands to TRL --------------------------------------------------------------------------

    def dataset(self) -> Any:
        from datasets import Dataset

        return Dataset.from_dict(
            {
                "prompt": [f"{ROW_KEY}{index}" for index in range(len(self.rows))],
                "anneal_row": list(range(len(self.rows))),
            }
        )

    @property
    def reward_weights(self) -> list[float]:
        return [1.0, *self.weights.values()]

    @property
    def reward_funcs(self) -> list[Any]:
        def environment(prompts: list, completions: list, **kwargs: Any) -> list[float]:
            return [self.results[i].reward for i in kwargs["agent_episode"]]

        # TRL names a reward function's metrics after __name__: "rewards/environment".
        environment.__name__ = environment.__qualname__ = ENVIRONMENT_REWARD
        funcs = [environment]
        funcs += [self._verifier_reward(name) for name in self.scorers]
        return funcs

    def rollout_func(self, prompts: list, trainer: Any) -> dict:
        """One episode per prompt (TRL has already repeated each prompt num_generations times)."""
        tokenizer = trainer.processing_class
        model = trainer.accelerator.unwrap_model(trainer.model)
        positions = getattr(model.config, "max_position_embeddings", None)
        if positions is not None and self.spec.context_tokens > positions:
            raise ValueError(
                f"environment.context_tokens: {self.spec.context_tokens} is more than the model's "
                f"{positions} positions; lower it"
            )
        generator = turn_generator(trainer, model, tokenizer, guided=self.spec.guided_calls)
        step = trainer.state.global_step + 1
        return self.run_episodes([_row_index(prompt) for prompt in prompts], tokenizer, generator, step=step)

    def run_episodes(
        self, indices: list[int], tokenizer: Any, generator: TransformersTurns | VLLMTurns, *, step: int
    ) -> dict:
        """One episode for each row index, in lockstep; what rollout_func returns to TRL. The results stay in
        ``self.results`` (by the returned ``agent_episode`` ids) until the next call."""
        started = time.monotonic()
        # The previous batch's rewards were computed before this call: only this batch's episodes are kept.
        self.results.clear()
        self.texts.clear()
        tracks, results, generation_s, with_logprobs = self.play(
            [self.rows[index] for index in indices], tokenizer, generator
        )
        ids = []
        for result in results:
            ids.append(self._next_id)
            self.results[self._next_id] = result
            self.texts[self._next_id] = "\n".join(step_.raw for step_ in result.steps)
            self._next_id += 1
        self._metrics(step, results, generation_s, time.monotonic() - started)
        self._emit(step, results, indices)
        eos = tokenizer.eos_token_id if tokenizer.eos_token_id is not None else tokenizer.pad_token_id
        completion_ids, masks, logprob_lists = [], [], []
        for track in tracks:
            if not track.completion_ids:  # TRL needs a token; this one is not trained on
                track.completion_ids, track.mask, track.logprobs = [eos], [0], [0.0]
            completion_ids.append(track.completion_ids)
            masks.append(track.mask)
            logprob_lists.append(track.logprobs)
        return {
            "prompt_ids": [track.prompt_ids for track in tracks],
            "completion_ids": completion_ids,
            "logprobs": logprob_lists if with_logprobs else None,
            "env_mask": masks,
            "agent_episode": ids,
        }

    def evaluate(self, rows: list[dict], model: Any, tokenizer: Any, *, step: int) -> dict[str, float]:
        """The held-out rows' episodes with the model as it is now (gpu_jobs.agent.evaluation's scores over all
        of them: ``eval/<domain>`` is the solved share, ``eval_agent/*`` the habits): one greedy episode per
        row, or the environment's ``eval_episodes`` sampled at the job's temperature, one batch of the rows
        per round. The sampling is seeded alike at every evaluation (common random numbers) on a copy of the
        random state, so training's own random stream is the same with or without it. The episodes go to the
        sink as rollouts marked ``held_out`` (``_emit_held_out``)."""
        import torch

        rounds = self.spec.eval_episodes
        if rounds == 1:
            _, greedy, _, _ = self.play(
                rows,
                tokenizer,
                TransformersTurns(model, tokenizer, temperature=0.0, guided=self.spec.guided_calls),
            )
            self._emit_held_out(step, rows, greedy)
            return agent_scores(rows, greedy)
        sampler = TransformersTurns(
            model, tokenizer, temperature=self.config.temperature, guided=self.spec.guided_calls
        )
        devices = [torch.cuda.current_device()] if torch.cuda.is_available() else []
        played: list[dict] = []
        results: list[EpisodeResult] = []
        with torch.random.fork_rng(devices=devices):
            torch.manual_seed(self.config.seed)
            for _ in range(rounds):
                _, batch, _, _ = self.play(rows, tokenizer, sampler)
                played.extend(rows)
                results.extend(batch)
        self._emit_held_out(step, rows, results)
        return agent_scores(played, results)

    def play(
        self, rows: list[dict], tokenizer: Any, generator: TransformersTurns | VLLMTurns
    ) -> tuple[list[_Track], list[EpisodeResult], float, bool]:
        """One episode for each row, in lockstep: (their token records, their results, seconds spent
        generating, whether the generator gave log-probabilities)."""
        if self.renderer is None:
            self.renderer = make_renderer(tokenizer, self.spec)
        if self.sessions is None:
            self.sessions = SessionPool(size=min(len(rows), MAX_PRESTARTED), tmpfs_mb=self.spec.tmpfs_mb)
        tracks: list[_Track] = []
        generation_s = 0.0
        with_logprobs = False
        # Sandbox work (starting sessions, tool calls, verification) of different episodes runs side by side.
        with ThreadPoolExecutor(max_workers=SANDBOX_THREADS) as pool:
            try:
                starts = [pool.submit(self._start, row) for row in rows]
                failed = [error for future in starts if (error := future.exception()) is not None]
                tracks.extend(future.result() for future in starts if future.exception() is None)
                if failed:
                    raise failed[0]  # the sessions that did start are closed below
                while True:
                    active = [track for track in tracks if self._ready(track)]
                    if not active:
                        break
                    t0 = time.monotonic()
                    outputs, logprobs = self._generate(generator, tokenizer, active)
                    with_logprobs = with_logprobs or logprobs is not None
                    spent = time.monotonic() - t0
                    generation_s += spent
                    texts = [tokenizer.decode(ids, skip_special_tokens=True) for ids in outputs]
                    befores = [self._before(track, text, ids, tokenizer) for track, text, ids in
                               zip(active, texts, outputs, strict=True)]  # fmt: skip
                    # The tool calls run in their sandboxes side by side; tokenizing stays on this thread.
                    calls = [(track, text, len(ids), spent / len(active)) for track, text, ids in
                             zip(active, texts, outputs, strict=True)]  # fmt: skip
                    list(
                        pool.map(
                            lambda call: call[0].episode.record(call[1], call[2], generation_s=call[3]), calls
                        )
                    )
                    for i, (track, ids, before) in enumerate(zip(active, outputs, befores, strict=True)):
                        self._append_turn(track, ids, before, None if logprobs is None else logprobs[i])
            except BaseException:
                for track in tracks:
                    track.episode.abandon()
                raise
            results = list(pool.map(lambda track: track.episode.finish(), tracks))
        return tracks, results, generation_s, with_logprobs

    # The episode loop, batched -----------------------------------------------------------------------------

    def _start(self, row: dict) -> _Track:
        assert self.renderer is not None
        renderer = self.renderer
        episode = Episode(
            row,
            self.spec,
            measure=lambda messages: len(renderer.ids(messages)),
            plain_format=renderer.instructions,
            system_prompt=self.spec.system_prompt,
            pool=self.sessions,
        )
        return _Track(episode=episode, prompt_ids=[])

    def _ready(self, track: _Track) -> bool:
        """Prepare the episode's next turn; False when it is over."""
        episode = track.episode
        if episode.done:
            return False
        context = episode.context()
        if episode.done:
            return False
        if not track.prompt_ids or episode.summaries != track.summaries:
            # A new segment: the first turn, or a running summary replaced the turns so far.
            assert self.renderer is not None
            track.prompt_ids = self.renderer.ids(context)
            track.completion_ids, track.mask, track.logprobs = [], [], []
            track.summaries = episode.summaries
        if episode.turn_tokens() <= 0:
            episode.end_reason = "token_budget"
            return False
        return True

    def _generate(
        self, generator: TransformersTurns | VLLMTurns, tokenizer: Any, active: list[_Track]
    ) -> tuple[list[list[int]], list[list[float | None]] | None]:
        """Each active episode's turn: its tokens (within its budget, up to EOS or the end of its first tool
        call) and, from vLLM, their log-probabilities."""
        inputs = [track.prompt_ids + track.completion_ids for track in active]
        new_tokens = max(track.episode.turn_tokens() for track in active)
        generated, logprobs = generator.generate(inputs, new_tokens)
        results, kept = [], []
        for i, (track, ids) in enumerate(zip(active, generated, strict=True)):
            ids = ids[: track.episode.turn_tokens()]
            if tokenizer.eos_token_id in ids:
                ids = ids[: ids.index(tokenizer.eos_token_id) + 1]
            ids = _cut_after_call(ids, tokenizer)
            results.append(ids)
            if logprobs is not None:
                kept.append(list(logprobs[i][: len(ids)]))
        return results, (kept if logprobs is not None else None)

    def _before(self, track: _Track, text: str, ids: list[int], tokenizer: Any) -> list[dict]:
        """The conversation up to and including the model's new turn (before its observation)."""
        ended = bool(ids) and ids[-1] == tokenizer.eos_token_id
        return [*track.episode.messages, {"role": "assistant", "content": text, "ended_with_eos": ended}]

    def _append_turn(
        self, track: _Track, ids: list[int], before: list[dict], logprobs: list[float | None] | None = None
    ) -> None:
        """The turn's tokens (trained on) and its observation's (not) join the episode's segment."""
        track.completion_ids += ids
        track.mask += [1] * len(ids)
        track.logprobs += logprobs if logprobs is not None else [0.0] * len(ids)
        assert self.renderer is not None
        observation = self.renderer.observation_ids(before, track.episode.messages[-1])
        track.completion_ids += observation
        track.mask += [0] * len(observation)
        track.logprobs += [0.0] * len(observation)

    # Rewards, metrics, rollout events -----------------------------------------------------------------------

    def _verifier_reward(self, name: str) -> Any:
        scorer = self.scorers[name]

        def reward(prompts: list, completions: list, **kwargs: Any) -> list[float]:
            episode_ids = kwargs["agent_episode"]
            rows = [self.rows[_row_index(p)] for p in prompts]
            return [r.score for r in scorer.score_batch(rows, [self.texts[i] for i in episode_ids])]

        reward.__name__ = reward.__qualname__ = name
        return reward

    def _metrics(self, step: int, results: list[EpisodeResult], generation_s: float, total_s: float) -> None:
        n = len(results)
        metrics = self.step_metrics[step]
        metrics["episode/tests"] = sum(r.parts["tests"] for r in results) / n
        metrics["pass_rate"] = sum(r.parts["solved"] for r in results) / n
        metrics["episode/turns"] = sum(r.parts["turns"] for r in results) / n
        metrics["episode/format"] = sum(r.parts["format"] for r in results) / n
        # Episodes with at least one well-formed tool call: what a warm-up (gpu_jobs.agent.warmup) is for.
        metrics["episode/called_tools"] = sum(any(s.action for s in r.steps) for r in results) / n
        # Episodes that ran the tests after their last edit, then finished: the habit agents are trained for.
        metrics["episode/tested_before_finish"] = sum(r.parts.get("tested", 0.0) for r in results) / n
        metrics["episode/edited_then_tested"] = sum(edited_then_tested(r) for r in results) / n
        metrics["episode/summaries"] = sum(r.summaries for r in results) / n
        for reason in {r.end_reason for r in results}:
            metrics[f"episode/end/{reason}"] = sum(r.end_reason == reason for r in results) / n
        metrics["episode/generation_seconds"] = generation_s
        metrics["episode/sandbox_seconds"] = sum(r.sandbox_s for r in results)
        # What the job's sandboxes were busy for, billed like verifier time (workers/sink.py adds verify_time/*).
        metrics[f"verify_time/{ENVIRONMENT_REWARD}"] = sum(r.sandbox_s + r.start_s for r in results)
        metrics["episode/rollout_seconds"] = total_s
        metrics.update(self.tampering.record(step, [episode_tampering(r) for r in results]))

    def _emit(self, step: int, results: list[EpisodeResult], indices: list[int]) -> None:
        wanted = max(0, min(self.config.rollouts_per_step - self.emitted[step], len(results)))
        self.emitted[step] += wanted
        self._report(step, results, [int(index) for index in indices], self.rows, wanted)

    def _emit_held_out(self, step: int, rows: list[dict], results: list[EpisodeResult]) -> None:
        """The held-out evaluation's episodes (``results``: rounds of one episode per row of ``rows``) as
        rollouts marked ``held_out``, up to HELD_OUT_ROLLOUTS: what a user reads to see why a task the job
        never trained on was not solved. ``row_index`` is the row's place among the held-out rows."""
        indices = [pick % len(rows) for pick in range(len(results))]
        self._report(step, results, indices, rows, min(HELD_OUT_ROLLOUTS, len(results)), held_out=True)

    def _report(
        self,
        step: int,
        results: list[EpisodeResult],
        indices: list[int],
        rows: list[dict],
        wanted: int,
        **marks: Any,
    ) -> None:
        """``wanted`` of ``results``, evenly spaced, as rollout events (each result's row is
        ``rows[indices[i]]``; ``marks`` go into every payload); every episode that tried to tamper with its
        verdict is reported besides them."""
        tried = [episode_tampering(result) for result in results]
        picks = {i * len(results) // wanted for i in range(wanted)} | {i for i, t in enumerate(tried) if t}
        events = []
        for pick in sorted(picks):
            result, row = results[pick], rows[indices[pick]]
            payload = result.to_payload()
            if tried[pick]:
                payload[TAMPERING_PART] = tried[pick]
            payload.update(
                {
                    "step": step,
                    **marks,
                    "completion": "\n".join(s.raw for s in result.steps),
                    "reference": None,
                    "row_index": indices[pick],
                }
            )
            if row.get("domain"):
                payload["domain"] = str(row["domain"])
            events.append(("rollout", payload))
        if events:
            self.sink.emit_many(events)


def episode_tampering(result: EpisodeResult) -> str | None:
    """What the episode tried against its final-state verdict ("" when nothing; None when the verdict does
    not check for tampering)."""
    if TAMPERING_PART not in result.parts:
        return None
    return tampering_what(
        ScoreResult(0.0, {TAMPERING_PART: result.parts[TAMPERING_PART]}, result.verdict.reason)
    )


def _row_index(prompt: Any) -> int:
    text = prompt if isinstance(prompt, str) else str(prompt[-1].get("content", ""))
    if not text.startswith(ROW_KEY):
        raise ValueError(f"an environment job's prompt must be a row key ({ROW_KEY}N), got {text[:40]!r}")
    return int(text[len(ROW_KEY) :])


def _cut_after_call(ids: list[int], tokenizer: Any) -> list[int]:
    """The turn up to the end of its first complete tool call (the model would only talk past it)."""
    closers = tuple(f"</{tag}>" for tag in CALL_TAGS)
    if not any(tag in tokenizer.decode(ids, skip_special_tokens=False) for tag in closers):
        return ids
    # Token boundaries need not match characters: take the shortest prefix whose text holds the whole call.
    for n in range(1, len(ids) + 1):
        piece = tokenizer.decode(ids[:n], skip_special_tokens=False)
        if any(tag in piece for tag in closers):
            return ids[:n]
    return ids


def agent_rollouts(
    config: GRPOJobConfig,
    *,
    sink: EventSink,
    step_metrics: dict[int, dict[str, float]],
    outbound: Outbound | None = None,
    tampering: TamperingLog | None = None,
) -> AgentRollouts | None:
    """The agent parts of a job with an ``environment`` (None for a single-turn job): grpo.main's hook."""
    if getattr(config, "environment", None) is None:
        return None
    return AgentRollouts(
        config=config, sink=sink, step_metrics=step_metrics, outbound=outbound, tampering=tampering
    )
