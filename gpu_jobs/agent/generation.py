"""How an agent job generates its turns: ``TransformersTurns`` (the model's own ``generate``: the CPU, and a GPU
without vLLM) or ``VLLMTurns`` (the trainer's vLLM engine on a CUDA host, with the sampled tokens'
log-probabilities); ``turn_generator`` picks one from the trainer, as gpu_jobs.device set it up.

Both take whole contexts as token ids and return each continuation's ids (and log-probabilities or None);
gpu_jobs.agent.training cuts them to the turn's budget, the EOS and the end of the first tool call.
"""

from __future__ import annotations

from typing import Any


class TransformersTurns:
    """Turns sampled with the model's own ``generate`` (the CPU, and a GPU without vLLM); greedy when
    ``temperature`` is 0 (held-out evaluation)."""

    def __init__(self, model: Any, tokenizer: Any, *, temperature: float, guided: bool = False) -> None:
        self.model = model
        self.tokenizer = tokenizer
        self.temperature = temperature
        self.guided = guided  # environment.guided_calls: gpu_jobs.agent.guided_calls.CallGuard

    def generate(self, contexts: list[list[int]], max_new_tokens: int) -> tuple[list[list[int]], None]:
        """Each context's continuation (up to `max_new_tokens`); no log-probabilities."""
        import torch

        tokenizer, model = self.tokenizer, self.model
        longest = max(len(ids) for ids in contexts)
        pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id
        device = next(model.parameters()).device
        input_ids = torch.tensor([[pad] * (longest - len(ids)) + ids for ids in contexts], device=device)
        attention = torch.tensor(
            [[0] * (longest - len(ids)) + [1] * len(ids) for ids in contexts], device=device
        )
        sampling: dict[str, Any] = {"do_sample": False}
        if self.temperature > 0:
            sampling = {"do_sample": True, "temperature": self.temperature, "top_p": 1.0, "top_k": 0}
        if self.guided:
            from transformers import LogitsProcessorList

            from gpu_jobs.agent.guided_calls import CallGuard

            guard = CallGuard(tokenizer, start=longest, rows=len(contexts))
            sampling["logits_processor"] = LogitsProcessorList([guard])
        was_training = model.training
        model.eval()
        try:
            with torch.no_grad():
                out = model.generate(
                    input_ids=input_ids,
                    attention_mask=attention,
                    max_new_tokens=max_new_tokens,
                    **sampling,
                    pad_token_id=pad,
                    eos_token_id=tokenizer.eos_token_id,
                )
        finally:
            model.train(was_training)
        return out[:, longest:].tolist(), None


class VLLMTurns:
    """Turns sampled by the trainer's vLLM (TRL's ``VLLMGeneration``, colocate or server mode), with the
    log-probability of each sampled token. TRL has synced the training weights into it before rollout_func."""

    def __init__(self, vllm_generation: Any) -> None:
        self.vllm = vllm_generation

    def generate(
        self, contexts: list[list[int]], max_new_tokens: int
    ) -> tuple[list[list[int]], list[list[float | None]] | None]:
        vllm = self.vllm
        # VLLMGeneration samples up to its max_completion_length (the job's); a turn has its own budget.
        kept = vllm.max_completion_length
        vllm.max_completion_length = max_new_tokens
        try:
            # num_generations=1: each context is its own episode (server mode would keep every n-th otherwise).
            _, ids, logprobs, _ = vllm.generate(prompts=contexts, images=None, num_generations=1)
        finally:
            vllm.max_completion_length = kept
        # One list per token (the sampled token's first); keep the sampled token's.
        flat = None if logprobs is None else [[lp[0] for lp in seq] for seq in logprobs]
        return [list(seq) for seq in ids], flat


def turn_generator(
    trainer: Any, model: Any, tokenizer: Any, *, guided: bool = False
) -> TransformersTurns | VLLMTurns:
    """vLLM when the trainer was set up with it (``use_vllm`` on a CUDA host), else transformers, its calls
    guided when `guided` (environment.guided_calls: gpu_jobs.grpo then sets the trainer up without vLLM)."""
    if getattr(trainer, "use_vllm", False):
        vllm = getattr(trainer, "vllm_generation", None)
        if vllm is None:
            raise ValueError(
                "use_vllm: the trainer has no vLLM engine; set use_vllm to false or run on a GPU"
            )
        return VLLMTurns(vllm)
    return TransformersTurns(model, tokenizer, temperature=trainer.args.temperature, guided=guided)
