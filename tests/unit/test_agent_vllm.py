"""The GPU path of agent jobs, checked without a GPU: what use_vllm and device become for an environment job,
the refusals that name the field, and the rollout loop's turns through a vLLM engine (a stand-in at the edge:
no GPU here) with the sampled tokens' log-probabilities handed back to TRL."""

import os
import shutil
from pathlib import Path
from types import SimpleNamespace

import pytest

from gpu_jobs.agent.generation import TransformersTurns, VLLMTurns, turn_generator
from gpu_jobs.agent.taskpack import pack_rows
from gpu_jobs.agent.training import AgentRollouts
from gpu_jobs.config import GRPOJobConfig
from gpu_jobs.device import DeviceError, HostInfo, device_args
from gpu_jobs.sink import ListSink

MODEL_STORE = Path(os.environ.get("ANNEAL_TEST_MODEL_STORE", "/tmp/anneal-test-models"))
CPU_HOST = HostInfo(cuda_devices=0)
GPU_HOST = HostInfo(cuda_devices=1, bf16=True, vllm=True)
ENVIRONMENT = {
    "max_turns": 2,
    "turn_tokens": 24,
    "token_budget": 48,
    "context_tokens": 460,
    "observation_chars": 120,
    "system_prompt": "Fix the bug.",
}


def agent_config(tmp_path, **overrides):
    return GRPOJobConfig(
        model_store=str(MODEL_STORE), output_dir=str(tmp_path), rows=pack_rows(limit=2), verifiers=[],
        environment=ENVIRONMENT, prompts_per_step=2, num_generations=2, **overrides,
    )  # fmt: skip


def test_an_agent_job_generates_with_vllm_colocate_on_a_gpu_host_and_transformers_on_a_cpu(tmp_path):
    config = agent_config(tmp_path)
    assert config.use_vllm is True  # kept: an environment no longer turns vLLM off
    on_gpu = device_args(device=config.device, use_vllm=config.use_vllm, host=GPU_HOST)
    assert on_gpu["use_vllm"] is True and on_gpu["vllm_mode"] == "colocate"
    on_cpu = device_args(device=config.device, use_vllm=config.use_vllm, host=CPU_HOST)
    assert on_cpu["use_vllm"] is False


@pytest.mark.parametrize(
    ("overrides", "host", "field"),
    [
        ({"device": "cuda"}, CPU_HOST, "device:"),  # vLLM (or any GPU run) asked of a host without CUDA
        ({}, HostInfo(cuda_devices=1, bf16=True, vllm=False), "use_vllm:"),
    ],
)
def test_what_the_host_cannot_do_for_an_agent_job_is_refused_naming_the_field(
    tmp_path, overrides, host, field
):
    config = agent_config(tmp_path, **overrides)
    with pytest.raises(DeviceError) as error:
        device_args(device=config.device, use_vllm=config.use_vllm, host=host)
    assert str(error.value).startswith(field)


def test_the_rollout_loop_picks_the_trainers_vllm_engine_and_refuses_a_trainer_without_one():
    engine = SimpleNamespace(max_completion_length=16)
    trainer = SimpleNamespace(use_vllm=True, vllm_generation=engine, args=SimpleNamespace(temperature=1.0))
    assert isinstance(turn_generator(trainer, None, None), VLLMTurns)
    trainer.use_vllm = False
    assert isinstance(turn_generator(trainer, None, None), TransformersTurns)
    with pytest.raises(ValueError, match="^use_vllm:"):
        turn_generator(SimpleNamespace(use_vllm=True, args=None), None, None)


class StandInVLLM:
    """TRL's VLLMGeneration as the rollout loop uses it (generate() from token ids, n=1 per prompt), sampling
    with the tiny model on the CPU; each sampled token's log-probability is set to a value that tells where
    it came from, so the test can follow it into what rollout_func returns."""

    def __init__(self, model, tokenizer):
        self.turns = TransformersTurns(model, tokenizer, temperature=1.0)
        self.max_completion_length = 256  # the job's; a turn asks for its own budget
        self.calls = []

    def generate(self, prompts, images, num_generations):
        assert images is None and num_generations == 1
        self.calls.append(self.max_completion_length)
        ids, _ = self.turns.generate(prompts, self.max_completion_length)
        logprobs = [[[-(i + 1) / 1000] for i, _ in enumerate(seq)] for seq in ids]
        return prompts, ids, logprobs, None


@pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap is not installed")
def test_turns_through_vllm_hand_their_log_probabilities_to_trl_and_zero_on_observations(tmp_path):
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from gpu_jobs.tiny_model import ensure_tiny_model

    model_dir = ensure_tiny_model(MODEL_STORE)
    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_pretrained(model_dir)
    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    agent = AgentRollouts(config=agent_config(tmp_path), sink=ListSink())
    engine = StandInVLLM(model, tokenizer)
    out = agent.run_episodes([0, 1], tokenizer, VLLMTurns(engine), step=1)
    assert engine.calls and set(engine.calls) == {ENVIRONMENT["turn_tokens"]}  # each turn's own budget
    assert engine.max_completion_length == 256  # put back after every turn
    for completion, mask, logprobs in zip(
        out["completion_ids"], out["env_mask"], out["logprobs"], strict=True
    ):
        assert len(logprobs) == len(completion) == len(mask)
        assert all(lp == 0.0 for lp, m in zip(logprobs, mask, strict=True) if m == 0)
        own = [lp for lp, m in zip(logprobs, mask, strict=True) if m == 1]
        # Each turn's tokens carry the engine's values in order: -0.001, -0.002, ... from each turn's start.
        assert own and own[0] == -0.001 and all(lp < 0 for lp in own)
    # Without vLLM there are no log-probabilities: TRL computes its own.
    plain = agent.run_episodes(
        [0, 1], tokenizer, TransformersTurns(model, tokenizer, temperature=1.0), step=2
    )
    assert plain["logprobs"] is None
