"""Reward scoring overlapped with the rest of a training step, for TRL's GRPOTrainer and RLOOTrainer.

TRL runs a step in this order: generate; no-grad log-probabilities (old policy, reference model) where
the config needs them; rewards; advantages; shuffle; the policy's forward pass for the loss; backward;
optimiser step. The verifiers (Python tests in sandboxes above all) need only the decoded completions,
and the forward passes need only the token ids, so ``RewardOverlap`` starts the step's reward scoring on
a worker thread as soon as the completions are decoded, and while the sandboxes run the main thread does
TRL's no-grad forward passes and, ahead of time, the policy's forward pass for the loss (with its autograd
graph: the "early forward"). Only then does it wait for the scores. Backward needs the advantages, hence
the scores, so it cannot start sooner. The verifiers start sooner still: a batched generation runs until its
longest completion ends, and each time a quarter of the batch has ended (gpu_jobs.early_ends) those
completions are scored on the worker thread while the rest are generated; the step's own reward call then
takes their verdicts and scores only the others (RolloutRecorder.prescored), so the rewards are hidden behind
the tail of generation too.

The results are those of the plain trainer, bit for bit: the scores are the same function of the same
completions (a verdict scored early is keyed by its row and its decoded completion, so one the step's call
does not ask for is never used), and the early forward runs on exactly the rows, in exactly the order, that
the loss will use (the permutation TRL's shuffle draws next is read ahead and the random state put back).
The loss takes it only if it asks for the same ids, mask and model with unchanged weights; otherwise the
loss runs its own forward as usual, and the early forward is switched off for the rest of the run. The early
forward runs on half of torch's CPU threads (``_share_cores``): bit for bit as long as the CPU kernels sum
in the same order at either thread count, as they do for this repository's models on the machines it was
tested on (tests/unit/test_reward_overlap.py compares whole runs); a GPU's kernels do not depend on it.

What it gains depends on the host: the step waits for the verifiers about half as long (bench/train_step.py),
but on a CPU with no core to spare the forward passes slow down by about as much, as the sandboxes take the
same cores; the step gets shorter where the forward passes run on a GPU or the sandboxes on other hosts.

Left alone, on purpose: the next step's generation. It needs this step's update (GRPO is on-policy), so
generating it while this step is verified would train on completions one update old and change results.
The overlap also stands aside (the plain path runs) for multi-process runs, custom rollouts (agent
jobs), tools and environments, and reward models; the early forward also for multimodal rows and for
several optimiser steps per generation (``steps_per_generation`` or ``num_iterations`` above 1).
"""

from __future__ import annotations

import logging
import time
from concurrent.futures import Future, ThreadPoolExecutor
from concurrent.futures import wait as wait_for
from dataclasses import dataclass
from functools import cache
from typing import Any

from gpu_jobs.early_ends import EndWatch, early_scorers, score_early

logger = logging.getLogger(__name__)

# Metrics the overlap adds to each step (seconds, and 1.0 when the loss used the early forward).
REWARD_TIME = "overlap/reward_time"
REWARD_WAIT = "overlap/reward_wait"
EARLY_FORWARD = "overlap/early_forward"
# The share of the step's completions scored while the rest were generated (gpu_jobs.early_ends).
EARLY_SCORED = "overlap/early_scored"


@cache
def overlapped(trainer_class: type) -> type:
    """``trainer_class`` (TRL's GRPOTrainer or RLOOTrainer) with rewards overlapped (``RewardOverlap``)."""
    return type(f"Overlapped{trainer_class.__name__}", (RewardOverlap, trainer_class), {})


@dataclass
class PendingRewards:
    """A step's reward scoring in flight on the worker thread: ``future`` gives TRL's rewards tensor."""

    future: Future
    completions: list
    prompt_ids: list
    completion_ids: list


@dataclass
class EarlyForward:
    """The loss's forward pass, run while the step was being verified, and what it was run on."""

    model: Any
    input_ids: Any
    attention_mask: Any
    logits_to_keep: int
    weights_version: int
    result: tuple
    rng_after: RandomState

    def serves(self, model: Any, input_ids: Any, attention_mask: Any, logits_to_keep: int) -> bool:
        """True when ``model`` asks for exactly this forward pass, its weights untouched since."""
        return (
            model is self.model
            and logits_to_keep == self.logits_to_keep
            and input_ids.shape == self.input_ids.shape
            and attention_mask.shape == self.attention_mask.shape
            and bool((input_ids == self.input_ids).all())
            and bool((attention_mask == self.attention_mask).all())
            and weights_version(model) == self.weights_version
        )


class RewardOverlap:
    """Mixin, first in the bases of a TRL GRPOTrainer or RLOOTrainer (see ``overlapped``).

    Precondition: the trainer is TRL 1.16's, whose ``_generate_and_score_completions`` calls ``_generate``
    and then ``_calculate_rewards`` with the completions ``_generate`` returned, and whose ``_compute_loss``
    calls ``_get_per_token_logps_and_entropies``. Anything else only turns the overlap off: the checks
    below fall back to TRL's own path. Reward functions must not draw from torch's random state (they run
    beside the main thread's forward passes); Anneal's verifiers are torch-free (gpu_jobs.rewards).
    """

    _overlap_inputs: list[dict] | None = None
    _pending_rewards: PendingRewards | None = None
    _early_forward: EarlyForward | None = None
    _early_forward_on: bool = True
    _reward_pool: ThreadPoolExecutor | None = None
    _threads_before: int | None = None  # torch's intra-op threads while the step's rewards are in flight
    _rewards_started: float | None = None  # when the step's first rewards (early ones, or all) were started
    _early_rows = 0  # completions of the step handed to the verifiers while the rest were generated

    def train(self, *args: Any, **kwargs: Any) -> Any:
        try:
            return super().train(*args, **kwargs)  # type: ignore[misc]
        finally:
            if self._reward_pool is not None:
                self._reward_pool.shutdown(wait=True)
                self._reward_pool = None

    def _generate_and_score_completions(self, inputs: list[dict]) -> dict:
        self._overlap_inputs, self._early_forward = inputs, None
        try:
            return super()._generate_and_score_completions(inputs)  # type: ignore[misc]
        finally:
            self._overlap_inputs = None
            self._restore_threads()
            pending, self._pending_rewards = self._pending_rewards, None
            if pending is not None:
                # Only when the step failed between generation and rewards: let its sandbox runs finish
                # rather than leave them behind the error.
                wait_for([pending.future])

    def _generate(self, prompts: list) -> Any:
        self._rewards_started, self._early_rows = None, 0
        with self._end_watch(self._overlap_inputs):
            generated = super()._generate(prompts)  # type: ignore[misc]
        inputs, self._pending_rewards = self._overlap_inputs, None
        unpacked = prompt_completion_ids(generated)
        if inputs is None or unpacked is None or not self._can_overlap():
            return generated
        prompt_ids, completion_ids, completions = unpacked
        calculate = super()._calculate_rewards  # type: ignore[misc]

        started = self._rewards_started or time.perf_counter()

        def score() -> tuple[Any, float]:
            rewards = calculate(inputs, prompts, completions, completion_ids)
            return rewards, time.perf_counter() - started

        # TRL gives _calculate_rewards the very prompts it gave _generate, and the inputs unchanged when
        # there is no rollout_func (checked in _can_overlap), so this is the call it is about to make.
        self._pending_rewards = PendingRewards(
            future=self._pool().submit(score),
            completions=completions,
            prompt_ids=prompt_ids,
            completion_ids=completion_ids,
        )
        self._share_cores()
        return generated

    def _pool(self) -> ThreadPoolExecutor:
        """The worker thread the step's verifiers run on: one, so a step's early and later scoring keep
        their order."""
        if self._reward_pool is None:
            self._reward_pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="anneal-rewards")
        return self._reward_pool

    def _end_watch(self, inputs: list[dict] | None) -> Any:
        """While the step generates: each time a quarter of its completions have ended, the verifiers start on
        those (gpu_jobs.early_ends), each keeping its verdicts for the step's own reward call."""
        from contextlib import nullcontext

        prescorers = early_scorers(self.reward_funcs)  # type: ignore[attr-defined]
        training = self.model.training  # type: ignore[attr-defined]
        if not inputs or not prescorers or not training or not self._can_overlap():
            return nullcontext()
        pool, step = self._pool(), self.state.global_step + 1  # type: ignore[attr-defined]

        def on_ended(ended: dict[int, list[int]]) -> None:
            texts = self.processing_class.batch_decode(  # type: ignore[attr-defined]
                list(ended.values()), skip_special_tokens=True
            )
            self._rewards_started = self._rewards_started or time.perf_counter()
            self._early_rows += len(ended)
            self._share_cores()  # the sandboxes start now, beside the rest of the generation
            pool.submit(score_early, prescorers, rows=[inputs[row] for row in ended], texts=texts, step=step)

        return EndWatch(
            self.model,  # type: ignore[attr-defined]
            rows=len(inputs),
            end_ids=list(getattr(self, "eos_token_ids", None) or []),
            on_ended=on_ended,
        )

    def _calculate_rewards(
        self, inputs: list, prompts: list, completions: list, completion_ids_list: list
    ) -> Any:
        pending, self._pending_rewards = self._pending_rewards, None
        if pending is None or pending.completions is not completions:
            if pending is not None:
                wait_for([pending.future])
            plain = super()._calculate_rewards  # type: ignore[misc]
            return plain(inputs, prompts, completions, completion_ids_list)
        try:
            if self._can_forward_early(inputs):
                self._forward_early(pending.prompt_ids, pending.completion_ids)
        except BaseException:
            wait_for([pending.future])  # out of memory, say: the sandbox runs end before the error goes up
            raise
        waited = time.perf_counter()
        rewards, seconds = pending.future.result()
        self._restore_threads()
        metrics = self._metrics["train" if self.model.training else "eval"]  # type: ignore[attr-defined]
        metrics[REWARD_TIME].append(seconds)
        metrics[REWARD_WAIT].append(time.perf_counter() - waited)
        metrics[EARLY_SCORED].append(self._early_rows / max(1, len(inputs)))
        return rewards

    def _get_per_token_logps_and_entropies(
        self,
        model: Any,
        input_ids: Any,
        attention_mask: Any,
        logits_to_keep: int,
        batch_size: int | None = None,
        compute_entropy: bool = False,
        compute_aux_loss: bool = False,
        **extra: Any,
    ) -> tuple:
        early, self._early_forward = self._early_forward, None
        if early is not None:
            import torch

            # The loss's call: all entropies, no chunking, with gradients, no image inputs.
            loss_call = (
                compute_entropy
                and batch_size is None
                and compute_aux_loss == self.aux_loss_enabled  # type: ignore[attr-defined]
                and torch.is_grad_enabled()
                and all(value is None for value in extra.values())
            )
            served = loss_call and early.serves(model, input_ids, attention_mask, logits_to_keep)
            self._metrics["train"][EARLY_FORWARD].append(float(served))  # type: ignore[attr-defined]
            if served:
                # Where the random state would be had this forward pass run now, as in the plain trainer.
                early.rng_after.restore()
                return early.result
            self._early_forward_on = False
            logger.warning(
                "The loss did not match the early forward pass; it is off for the rest of the run."
            )
        return super()._get_per_token_logps_and_entropies(  # type: ignore[misc]
            model,
            input_ids,
            attention_mask,
            logits_to_keep,
            batch_size=batch_size,
            compute_entropy=compute_entropy,
            compute_aux_loss=compute_aux_loss,
            **extra,
        )

    def _share_cores(self) -> None:
        """While the rewards are in flight, the step's forward passes use half of torch's CPU threads: the
        sandboxes (local ones) take the other cores, and OpenMP threads that outnumber the free cores spin
        at every barrier for one that was preempted (on 2 cores the early forward ran ~10x slower)."""
        import torch

        threads = torch.get_num_threads()
        if threads > 1 and self._threads_before is None:
            self._threads_before = threads
            torch.set_num_threads(max(1, threads // 2))

    def _restore_threads(self) -> None:
        if self._threads_before is not None:
            import torch

            torch.set_num_threads(self._threads_before)
            self._threads_before = None

    def _can_overlap(self) -> bool:
        """Rewards can be scored on a worker thread: one process (``_calculate_rewards`` gathers across
        processes at its end), no custom rollouts, tools or environments (they change the inputs or the
        completions after ``_generate``), no reward model (a torch module)."""
        import torch

        return (
            self.accelerator.num_processes == 1  # type: ignore[attr-defined]
            and getattr(self, "rollout_func", None) is None
            and not getattr(self, "tools", None)
            and getattr(self, "environment_factories", None) is None
            and not any(
                isinstance(f, torch.nn.Module)
                for f in self.reward_funcs  # type: ignore[attr-defined]
            )
        )

    def _can_forward_early(self, inputs: list[dict]) -> bool:
        """The loss of this step will run on this generation batch, whole, right after it is shuffled."""
        args = self.args  # type: ignore[attr-defined]
        return (
            self._early_forward_on
            and self.model.training  # type: ignore[attr-defined]
            and args.steps_per_generation == 1
            and self.num_iterations == 1  # type: ignore[attr-defined]
            and not getattr(args, "use_liger_kernel", False)
            and "image" not in inputs[0]
            and "images" not in inputs[0]
        )

    def _forward_early(self, prompt_ids_list: list, completion_ids_list: list) -> None:
        """Run the loss's forward pass on the batch as TRL will build it: padded as in
        ``_generate_and_score_completions``, rows in the order ``_prepare_inputs``' shuffle will draw."""
        import torch

        prompt_ids, prompt_mask, completion_ids, completion_mask = self._padded(
            prompt_ids_list, completion_ids_list
        )
        before = RandomState.capture()
        try:
            # shuffle_sequence_dict's draw, the next use of the random state in the plain trainer.
            order = torch.randperm(len(prompt_ids_list))
            input_ids = torch.cat([prompt_ids[order], completion_ids[order]], dim=1)
            attention_mask = torch.cat([prompt_mask[order], completion_mask[order]], dim=1)
            model = self.model_wrapped  # type: ignore[attr-defined]
            logits_to_keep = completion_ids.size(1)
            with torch.enable_grad(), self.compute_loss_context_manager():  # type: ignore[attr-defined]
                result = super()._get_per_token_logps_and_entropies(  # type: ignore[misc]
                    model,
                    input_ids,
                    attention_mask,
                    logits_to_keep,
                    compute_entropy=True,
                    compute_aux_loss=self.aux_loss_enabled,  # type: ignore[attr-defined]
                )
            self._early_forward = EarlyForward(
                model=model,
                input_ids=input_ids,
                attention_mask=attention_mask,
                logits_to_keep=logits_to_keep,
                weights_version=weights_version(model),
                result=result,
                rng_after=RandomState.capture(),
            )
        finally:
            before.restore()

    def _padded(self, prompt_ids_list: list, completion_ids_list: list) -> tuple:
        """Prompt and completion ids and masks, padded exactly as TRL 1.16 pads them for the loss."""
        import torch
        from trl.trainer.utils import pad

        device = self.accelerator.device  # type: ignore[attr-defined]
        multiple = self.pad_to_multiple_of  # type: ignore[attr-defined]
        pad_id = self._tokenizer.pad_token_id  # type: ignore[attr-defined]
        prompts = [torch.tensor(ids) for ids in prompt_ids_list]
        completions = [torch.tensor(ids) for ids in completion_ids_list]
        prompt_ids = pad(prompts, padding_value=pad_id, padding_side="left", pad_to_multiple_of=multiple)
        prompt_mask = pad(
            [torch.ones_like(ids, dtype=torch.long) for ids in prompts],
            padding_value=0,
            padding_side="left",
            pad_to_multiple_of=multiple,
        )
        completion_ids = pad(
            completions, padding_value=pad_id, padding_side="right", pad_to_multiple_of=multiple
        )
        completion_mask = pad(
            [torch.ones_like(ids, dtype=torch.long) for ids in completions],
            padding_value=0,
            padding_side="right",
            pad_to_multiple_of=multiple,
        ).to(device=device)
        if self.mask_truncated_completions:  # type: ignore[attr-defined]
            ends = [*self.eos_token_ids, pad_id]  # type: ignore[attr-defined]
            truncated = torch.tensor([ids[-1] not in ends for ids in completion_ids_list], device=device)
            completion_mask = completion_mask * (~truncated).unsqueeze(1).int()
        return prompt_ids.to(device), prompt_mask.to(device), completion_ids.to(device), completion_mask


@dataclass
class RandomState:
    """Torch's CPU random state and, once CUDA is in use, the current device's."""

    cpu: Any
    cuda: Any

    @classmethod
    def capture(cls) -> RandomState:
        import torch

        cuda = torch.cuda.get_rng_state() if torch.cuda.is_initialized() else None
        return cls(cpu=torch.get_rng_state(), cuda=cuda)

    def restore(self) -> None:
        import torch

        torch.set_rng_state(self.cpu)
        if self.cuda is not None:
            torch.cuda.set_rng_state(self.cuda)


def weights_version(model: Any) -> int:
    """Changes whenever a parameter is modified in place (an optimiser step, a weight load)."""
    return sum(parameter._version for parameter in model.parameters())


def prompt_completion_ids(generated: tuple) -> tuple[list, list, list] | None:
    """(prompt ids, completion ids, completions) from ``_generate``'s result: GRPOTrainer returns 8 values,
    RLOOTrainer 3; None for any other shape (another TRL version), which keeps the plain path."""
    if isinstance(generated, tuple) and len(generated) == 8:
        return generated[0], generated[1], generated[3]
    if isinstance(generated, tuple) and len(generated) == 3:
        return generated[0], generated[1], generated[2]
    return None
