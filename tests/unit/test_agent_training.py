"""A short real multi-turn GRPO job on the tiny model: several episodes per step, each in its own sandbox."""

import json
import os
import shutil
from pathlib import Path

import pytest

from gpu_jobs.agent.taskpack import pack_rows
from gpu_jobs.config import GRPOJobConfig
from gpu_jobs.grpo import main
from gpu_jobs.sink import FolderCheckpointStore, ListSink

pytestmark = pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap is not installed")

MODEL_STORE = Path(os.environ.get("ANNEAL_TEST_MODEL_STORE", "/tmp/anneal-test-models"))
# The tiny model has 512 positions and one token per character: a short system prompt, small observations.
ENVIRONMENT = {
    "max_turns": 3,
    "turn_tokens": 24,
    "token_budget": 60,
    "context_tokens": 460,
    "observation_chars": 120,
    "system_prompt": 'Fix the bug. Call one tool a turn: <tool>{"name": "run_tests", "arguments": {}}</tool>',
    "format_weight": 0.1,
}


@pytest.fixture(scope="module")
def job(tmp_path_factory):
    output_dir = tmp_path_factory.mktemp("agent-grpo")
    config = GRPOJobConfig(
        model_store=str(MODEL_STORE),
        output_dir=str(output_dir),
        rows=pack_rows(limit=4),
        verifiers=[],
        environment=ENVIRONMENT,
        max_steps=2,
        num_generations=2,
        prompts_per_step=2,
        seed=5,
        rollouts_per_step=2,
    )
    sink = ListSink()
    summary = main(config, sink=sink, checkpoints=FolderCheckpointStore(output_dir / "kept"))
    return summary, sink


def test_the_job_runs_several_multi_turn_episodes_per_step_and_finishes(job):
    summary, sink = job
    assert summary["steps"] == 2
    metrics = [m for m in sink.of_kind("metric") if "episode/turns" in m]
    assert [m["step"] for m in metrics] == [1, 2]
    for metric in metrics:
        # The tiny model never writes a tool call: every episode runs to its turn or token limit.
        assert metric["episode/turns"] > 1
        assert 0 <= metric["episode/tests"] < 1
        assert metric["episode/sandbox_seconds"] > 0
        assert metric["reward"] == pytest.approx(metric["rewards/environment"])
        assert metric["verify_time/environment"] >= metric["episode/sandbox_seconds"]  # billed sandbox time
    # The context budget (460 tokens) holds about one turn: later turns run on a running summary.
    assert any(m["episode/summaries"] > 0 for m in metrics)
    assert sink.of_kind("checkpoint")


def test_rollouts_carry_the_turns_of_each_episode(job):
    _, sink = job
    rollouts = sink.of_kind("rollout")
    assert sorted({r["step"] for r in rollouts}) == [1, 2]
    for rollout in rollouts:
        json.dumps(rollout)
        assert len(rollout["turns"]) >= 2
        assert rollout["end_reason"] in ("turn_limit", "token_budget", "finished", "context_limit")
        for turn in rollout["turns"]:
            assert turn["observation"]
            assert turn["status"] in ("error", "ok", "failed", "timeout", "output_limit", "memory")
        # With no fix the final state keeps the share of tests the bug does not break.
        assert rollout["parts"]["tests"] == pytest.approx(2 / 3) or rollout["parts"]["tests"] < 1
        assert rollout["reward"] == pytest.approx(
            rollout["parts"]["tests"] + 0.1 * rollout["parts"]["format"]
        )


def test_only_the_models_own_tokens_are_marked_for_training(tmp_path):
    """rollout_func's output, token by token: mask 1 exactly on what the model wrote, 0 on observations."""
    from types import SimpleNamespace

    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from gpu_jobs.agent.training import AgentRollouts
    from gpu_jobs.tiny_model import ensure_tiny_model

    model_dir = ensure_tiny_model(MODEL_STORE)
    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_pretrained(model_dir)
    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    # Context for two 24-token turns and their observations: every episode has turns to mask, whatever the
    # model writes.
    config = GRPOJobConfig(
        model_store=str(MODEL_STORE), output_dir=str(tmp_path), rows=pack_rows(limit=2), verifiers=[],
        environment={**ENVIRONMENT, "context_tokens": 440}, prompts_per_step=2, num_generations=2,
    )  # fmt: skip
    sink = ListSink()
    agent = AgentRollouts(config=config, sink=sink)
    trainer = (
        SimpleNamespace(  # TRL's trainer as rollout_func sees it (the edge: TRL itself is not under test)
            processing_class=tokenizer,
            model=model,
            accelerator=SimpleNamespace(unwrap_model=lambda m: m),
            state=SimpleNamespace(global_step=0),
            args=SimpleNamespace(temperature=1.0),
        )
    )
    out = agent.rollout_func(["anneal-row:0", "anneal-row:1"], trainer)
    assert len(out["completion_ids"]) == 2 and out["logprobs"] is None
    for completion, mask, episode_id in zip(
        out["completion_ids"], out["env_mask"], out["agent_episode"], strict=False
    ):
        result = agent.results[episode_id]
        assert len(result.steps) >= 2 and len(completion) == len(mask)
        model_ids = [token for token, m in zip(completion, mask, strict=False) if m == 1]
        # The model's tokens of the segment being trained (after the last running summary, if any).
        trained_turns = result.steps[
            next((i for i in range(len(result.steps) - 1, -1, -1) if result.steps[i].summary), 0) :
        ]
        assert len(model_ids) == sum(step.tokens for step in trained_turns)
        assert tokenizer.decode(model_ids, skip_special_tokens=True) == "".join(s.raw for s in trained_turns)
        observed = tokenizer.decode([token for token, m in zip(completion, mask, strict=False) if m == 0])
        assert all(step.observation in observed for step in trained_turns)
        assert observed.count("<observation>") == len(trained_turns)
    rollouts = sink.of_kind("rollout")
    assert rollouts and all(r["step"] == 1 for r in rollouts)


CHAT_TEMPLATE = (
    "{% if tools %}<|system|>tools: {% for t in tools %}{{ t.function.name }} {% endfor %}<|end|>\n{% endif %}"
    "{% for m in messages %}<|{{ m.role }}|>{{ m.content }}<|end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|assistant|>{% endif %}"
)


def test_a_tokenizer_with_a_chat_template_gets_its_own_tool_format(tmp_path):
    from transformers import AutoTokenizer

    from gpu_jobs.agent.episode import Episode
    from gpu_jobs.agent.rendering import ChatRenderer, PlainRenderer, make_renderer
    from gpu_jobs.agent.spec import validate_environment
    from gpu_jobs.agent.tools import ToolCall
    from gpu_jobs.tiny_model import ensure_tiny_model

    tokenizer = AutoTokenizer.from_pretrained(ensure_tiny_model(MODEL_STORE))
    assert isinstance(make_renderer(tokenizer, validate_environment({})), PlainRenderer)
    tokenizer.chat_template = CHAT_TEMPLATE
    renderer = make_renderer(tokenizer, validate_environment({}))
    assert isinstance(renderer, ChatRenderer)
    assert isinstance(make_renderer(tokenizer, validate_environment({"tool_format": "plain"})), PlainRenderer)
    episode = Episode(pack_rows(limit=1)[0], validate_environment({}), plain_format=False)
    try:
        context = episode.context()
        prompt = renderer.text(context)
        assert "tools: run_shell run_python read_file" in prompt and prompt.endswith("<|assistant|>")
        assert "<tool>{" not in prompt  # the template renders the tools: no plain-text instructions
        turn = (
            ToolCall("run_tests")
            .plain_text()
            .replace("<tool>", "<tool_call>")
            .replace("</tool>", "</tool_call>")
        )
        before = [*context, {"role": "assistant", "content": turn}]
        episode.record(turn, 10)
        observation = tokenizer.decode(renderer.observation_ids(before, episode.messages[-1]))
        # The sequence trained on reads exactly as the template renders the conversation.
        assert prompt + turn + observation == renderer.text(episode.messages)
        assert observation.startswith("<|end|>\n<|tool|>") and observation.endswith("<|assistant|>")
    finally:
        episode.finish()


# SmolLM2-Instruct's template, in essence: chat turns, and no word of the tools it is passed.
TEMPLATE_WITHOUT_TOOLS = (
    "{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)


def test_a_chat_template_that_drops_the_tools_gets_the_instructions_in_the_system_message():
    from transformers import AutoTokenizer

    from gpu_jobs.agent.episode import Episode
    from gpu_jobs.agent.rendering import ChatRenderer, make_renderer
    from gpu_jobs.agent.spec import validate_environment
    from gpu_jobs.agent.tools import TOOL_NAMES, ToolCall, parse_turn
    from gpu_jobs.agent.warmup import turn_text
    from gpu_jobs.tiny_model import ensure_tiny_model

    tokenizer = AutoTokenizer.from_pretrained(ensure_tiny_model(MODEL_STORE))
    tokenizer.chat_template = TEMPLATE_WITHOUT_TOOLS
    renderer = make_renderer(tokenizer, validate_environment({}))
    assert isinstance(renderer, ChatRenderer) and renderer.instructions and renderer.tag == "tool"
    assert renderer.format_name == "chat_template+instructions"
    episode = Episode(pack_rows(limit=1)[0], validate_environment({}), plain_format=renderer.instructions)
    try:
        prompt = renderer.text(episode.context())
        assert prompt.startswith("<|im_start|>system\n") and prompt.endswith("<|im_start|>assistant\n")
        assert all(f"- {name}(" in prompt for name in TOOL_NAMES)  # every tool, named in the system message
        turn = turn_text("Check.", ToolCall("run_tests"), tag=renderer.tag)
        assert turn.startswith("Check.\n<tool>{") and parse_turn(turn).call == ToolCall("run_tests")
    finally:
        episode.finish()
    tokenizer.chat_template = CHAT_TEMPLATE  # one that renders the tools: no instructions, its own tag
    renderer = make_renderer(tokenizer, validate_environment({}))
    assert (
        not renderer.instructions and renderer.tag == "tool_call" and renderer.format_name == "chat_template"
    )


def test_held_out_evaluation_samples_eval_episodes_per_task_seeded_alike_at_every_evaluation(tmp_path):
    """eval_episodes > 1: that many sampled episodes per held-out task, counted in the figures; the same noise
    at every evaluation (the same model gives the same figures); training's random stream is left as it was."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from gpu_jobs.agent.training import AgentRollouts
    from gpu_jobs.tiny_model import ensure_tiny_model

    model_dir = ensure_tiny_model(MODEL_STORE)
    model = AutoModelForCausalLM.from_pretrained(model_dir)
    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    held_out = pack_rows()[2:4]
    config = GRPOJobConfig(
        model_store=str(MODEL_STORE), output_dir=str(tmp_path), rows=pack_rows(limit=2), eval_rows=held_out,
        verifiers=[], environment={**ENVIRONMENT, "eval_episodes": 3}, prompts_per_step=2, num_generations=2,
        temperature=1.0, seed=5,
    )  # fmt: skip
    sink = ListSink()
    agent = AgentRollouts(config=config, sink=sink)
    played: list[list[str]] = []
    play = agent.play

    def recording_play(rows, tokenizer, generator):  # records what each round's episodes wrote
        out = play(rows, tokenizer, generator)
        played.append(["".join(step.raw for step in result.steps) for result in out[1]])
        return out

    agent.play = recording_play
    torch.manual_seed(123)
    first = agent.evaluate(held_out, model, tokenizer, step=0)
    after_evaluation = torch.rand(4)
    torch.manual_seed(123)
    assert torch.equal(after_evaluation, torch.rand(4))  # training's random state is not consumed
    assert first["eval_agent/episodes"] == 6
    assert len(played) == 3 and all(len(texts) == 2 for texts in played)
    # Sampled, not greedy: a task's episodes differ from round to round.
    assert len({texts[0] for texts in played}) > 1
    second = agent.evaluate(held_out, model, tokenizer, step=4)
    assert second == first and played[3:] == played[:3]  # seeded alike: the same model, the same episodes

    # Every held-out episode is reported as a rollout marked held_out, with its step, task and turns, so a user
    # can read why a task the job never trained on was not solved.
    rollouts = sink.of_kind("rollout")
    assert [(r["step"], r["held_out"], r["row_index"]) for r in rollouts] == [
        (step, True, index) for step in (0, 4) for _ in range(3) for index in (0, 1)
    ]
    # The first evaluation's episodes, round by round (the recorder joined the turns without newlines).
    assert [r["completion"].replace("\n", "") for r in rollouts[:6]] == [
        text.replace("\n", "") for texts in played[:3] for text in texts
    ]
    for rollout in rollouts:
        json.dumps(rollout)
        assert rollout["task"] == held_out[rollout["row_index"]]["task"] and rollout["turns"]


@pytest.mark.parametrize(
    ("value", "message"),
    [
        (0, "environment.eval_episodes: must be a whole number >= 1, got 0"),
        (2.5, "environment.eval_episodes: must be a whole number >= 1, got 2.5"),
        (17, "environment.eval_episodes: at most 16 episodes per held-out task, got 17"),
    ],
)
def test_bad_eval_episodes_name_the_option_and_the_limit(value, message):
    from gpu_jobs.agent.spec import validate_environment

    with pytest.raises(ValueError) as error:
        validate_environment({"eval_episodes": value})
    assert str(error.value) == message
