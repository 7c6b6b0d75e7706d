"""The supervised warm-up on scripted traces: held-out tasks, traces rendered as the rollouts render them with
the loss on the model's own turns only, and a short agent job on the tiny model that, warmed up, writes tool
calls and gets a reward that differs within a group (GRPO's signal; without the warm-up it is flat)."""

import os
import random
import re
import shutil
from pathlib import Path

import pytest

from gpu_jobs.agent.spec import TINY_MODEL_ENVIRONMENT as ENVIRONMENT
from gpu_jobs.agent.spec import validate_environment
from gpu_jobs.agent.taskpack import pack_rows
from gpu_jobs.agent.tools import parse_turn
from gpu_jobs.config import GRPOJobConfig

pytestmark = pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap is not installed")

MODEL_STORE = Path(os.environ.get("ANNEAL_TEST_MODEL_STORE", "/tmp/anneal-test-models"))
WARMUP = {"warmup_sft_steps": 400, "warmup_sft_learning_rate": 1e-3, "warmup_sft_batch_size": 4}
JOB_TASKS = 4  # the job trains on the first 4 pack tasks and is judged on the next 2; the warm-up on the rest
EVAL_TASKS = 2


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ({"warmup_sft_steps": -1}, "environment.warmup_sft_steps: must be a whole number >= 0"),
        ({"warmup_sft_steps": "10"}, "environment.warmup_sft_steps: must be a whole number"),
        ({"warmup_sft_steps": 10**6}, "environment.warmup_sft_steps: at most"),
        ({"warmup_sft_learning_rate": 0}, "environment.warmup_sft_learning_rate: must be a number above 0"),
        ({"warmup_sft_learning_rate": "fast"}, "environment.warmup_sft_learning_rate:"),
        ({"warmup_sft_batch_size": 0}, "environment.warmup_sft_batch_size: must be a whole number >= 1"),
    ],
)
def test_bad_warmup_options_name_the_key(value, message):
    with pytest.raises(ValueError) as error:
        validate_environment(value)
    assert str(error.value).startswith(message)


def test_the_warmup_trains_on_pack_tasks_the_job_does_not_hold(tmp_path):
    from gpu_jobs.agent.taskpack import held_out_rows

    rows = pack_rows(limit=JOB_TASKS)
    held = held_out_rows(rows)
    assert len(held) == len(pack_rows()) - JOB_TASKS
    assert not {r["task"] for r in held} & {r["task"] for r in rows}
    # A row with a pack task's files but without its name is still recognised.
    anonymous = [{k: v for k, v in row.items() if k != "task"} for row in rows]
    assert {r["task"] for r in held_out_rows(anonymous)} == {r["task"] for r in held}
    with pytest.raises(ValueError, match="^environment.warmup_sft_steps: .*every one"):
        GRPOJobConfig(
            model_store=str(MODEL_STORE), output_dir=str(tmp_path), rows=pack_rows(), verifiers=[],
            environment={**ENVIRONMENT, **WARMUP},
        )  # fmt: skip


def test_a_scripted_trace_is_the_conversation_a_rollout_sees_with_only_the_models_turns_trained():
    from transformers import AutoTokenizer

    from gpu_jobs.agent.rendering import make_renderer
    from gpu_jobs.agent.warmup import trace_examples
    from gpu_jobs.tiny_model import ensure_tiny_model

    tokenizer = AutoTokenizer.from_pretrained(ensure_tiny_model(MODEL_STORE))
    row = pack_rows()[JOB_TASKS]
    # Room for every turn: the scripted fix is played whole, in one segment, and solves the task.
    roomy = validate_environment({"turn_tokens": 2000, "token_budget": 8000, "context_tokens": 20000})
    renderer = make_renderer(tokenizer, roomy)
    (example,), info = trace_examples(row, roomy, renderer)
    assert info == {"turns": 5, "skipped": [], "edits": 1, "reward": 1.0}
    own = tokenizer.decode([t for t, m in zip(example.ids, example.mask, strict=True) if m])
    names = [parse_turn(part + "</tool>").call.name for part in own.split("</tool>")[:-1]]
    assert names == ["run_tests", "read_file", "replace_text", "run_tests", "finish"]
    seen = tokenizer.decode([t for t, m in zip(example.ids, example.mask, strict=True) if not m])
    assert seen.startswith("You fix bugs") and "FAIL" in seen and "<observation>" in seen
    # The same task traced again is the same tokens: nothing in an observation depends on the machine's
    # load (unittest's "Ran 4 tests in 0.005s" did), so a seed's warm-up repeats.
    assert "Ran 4 tests\n" in seen and not re.search(r"Ran \d+ tests? in", seen)
    (again,), _ = trace_examples(row, roomy, renderer)
    assert (again.ids, again.mask) == (example.ids, example.mask)
    # The tiny model's budget: turns that do not fit are left out, and summaries start new segments.
    tight = validate_environment(ENVIRONMENT)
    examples, info = trace_examples(row, tight, make_renderer(tokenizer, tight))
    assert [tool for tool, _ in info["skipped"]] == ["read_file", "replace_text"]
    assert all(size > tight.turn_tokens for _, size in info["skipped"])
    assert info["turns"] == 3 and info["edits"] == 0  # run_tests, run_tests, finish
    assert len(examples) >= 2 and all(len(e.ids) <= tight.context_tokens for e in examples)


def test_the_scripted_fix_replaces_only_the_changed_lines_and_fixes_every_pack_task(tmp_path):
    """The warm-up's fix is one replace_text call of the changed lines (it must fit a small model's turn
    budget: no diff headers, no context beyond what makes the old text occur once); the program the sandbox
    runs for the tool applies it to the buggy module and gives the fixed one, for every task of the pack."""
    import json
    import subprocess
    import sys

    from gpu_jobs.agent import environment
    from gpu_jobs.agent.warmup import minimal_fix_edits

    program = tmp_path / "replacing.py"
    program.write_text(environment.REPLACE_SOURCE)
    for row in pack_rows():
        ((module, fixed),) = row["solution"].items()
        folder = tmp_path / row["task"]
        folder.mkdir()
        (folder / module).write_text(row["files"][module])
        calls = minimal_fix_edits(row)
        assert len(calls) == 1, row["task"]
        arguments = calls[0].arguments
        assert len(arguments["old"]) + len(arguments["new"]) < len(row["fix_diff"]), row["task"]
        assert row["files"][module].count(arguments["old"]) == 1, row["task"]
        done = subprocess.run(
            [sys.executable, str(program)], input=json.dumps(arguments), text=True, cwd=folder,
            capture_output=True,
        )  # fmt: skip
        assert done.returncode == 0, (row["task"], done.stdout, done.stderr)
        assert done.stdout.startswith("replaced line"), row["task"]
        assert (folder / module).read_text() == fixed, row["task"]


def test_a_warmup_that_shows_no_edit_says_so_and_names_the_turn_budget_that_would():
    from transformers import AutoTokenizer

    from gpu_jobs.agent.rendering import make_renderer
    from gpu_jobs.agent.warmup import (
        build_examples,
        minimal_fix_edits,
        trace_examples,
        turn_text,
        warmup_message,
        warmup_warning,
    )
    from gpu_jobs.tiny_model import ensure_tiny_model

    tokenizer = AutoTokenizer.from_pretrained(ensure_tiny_model(MODEL_STORE))
    rows = pack_rows()[JOB_TASKS : JOB_TASKS + 2]
    LOSSES = {"steps": 3, "loss_first": 2.0, "loss_last": 1.0, "seconds": 1.0}

    def fix(row):
        (call,) = minimal_fix_edits(row)
        return call

    tight = validate_environment(ENVIRONMENT)  # 72 tokens a turn: no fix turn fits
    _, record = build_examples(rows, tight, make_renderer(tokenizer, tight))
    assert record["traces_with_edit"] == 0
    assert record["left_out_by_tool"] == {"read_file": 2, "replace_text": 2}
    needed = record["edit_turn_tokens_needed"]
    assert needed > tight.turn_tokens
    assert record["traces_left_out"] == 0  # none shows its fix: all are kept, for the call format
    assert "4 turns over the turn budget left out: read_file 2, replace_text 2)" in warmup_message(
        record | LOSSES
    )
    warning = warmup_warning(record, tight)
    assert warning.startswith(
        "warm-up: no trace shows an edit: every fix turn is over environment.turn_tokens (72)"
    )
    assert f"{needed} tokens would fit them all" in warning
    # With room for the fix, the traces edit and nothing is said.
    roomy = validate_environment(
        {"turn_tokens": needed, "token_budget": 5 * needed, "context_tokens": 8 * needed}
    )
    _, record = build_examples(rows, roomy, make_renderer(tokenizer, roomy))
    assert record["traces_with_edit"] == 2 and "replace_text" not in record["left_out_by_tool"]
    assert record["traces_left_out"] == 0 and warmup_warning(record, roomy) == ""
    # Between the two, only the traces that show their fix are trained on: the others would teach skipping it.
    sizes = sorted(len(tokenizer.encode(turn_text("Fix the bug.", fix(row), tag="tool"))) for row in rows)
    assert sizes[0] < sizes[1]
    between = validate_environment(
        {"turn_tokens": sizes[0], "token_budget": 5 * needed, "context_tokens": 8 * needed}
    )
    examples, record = build_examples(rows, between, make_renderer(tokenizer, between))
    assert record["traces_with_edit"] == 1 and record["traces_left_out"] == 1
    assert "; 1 traces without their fix turn left out)" in warmup_message({**record, **LOSSES})
    fitting = min(
        rows, key=lambda row: len(tokenizer.encode(turn_text("Fix the bug.", fix(row), tag="tool")))
    )
    alone, _ = trace_examples(fitting, between, make_renderer(tokenizer, between))

    # The model's own turns are the fitting task's alone (observations carry timings: not compared).
    def own(examples):
        return [t for e in examples for t, m in zip(e.ids, e.mask, strict=True) if m]

    assert own(examples) == own(alone)


def test_micro_batches_give_the_whole_batchs_loss_and_gradients(monkeypatch):
    import torch
    from transformers import AutoModelForCausalLM

    from gpu_jobs.agent import warmup
    from gpu_jobs.tiny_model import ensure_tiny_model

    model = AutoModelForCausalLM.from_pretrained(ensure_tiny_model(MODEL_STORE), dtype=torch.float32)
    generator = random.Random(0)
    rows = []
    for length in (40, 17, 33, 25):  # differing lengths and trained shares: the weighting must hold
        ids = [generator.randrange(3, 120) for _ in range(length)]
        mask = [int(i > length // 3 and generator.random() < 0.7) for i in range(length)]
        rows.append((ids, mask))

    def gradients() -> tuple[float, list]:
        model.zero_grad(set_to_none=True)
        loss = warmup._backward(model, rows, pad_id=0, device=torch.device("cpu"))
        return loss, [p.grad.clone() for p in model.parameters()]

    whole_loss, whole = gradients()
    monkeypatch.setattr(warmup, "MICRO_BATCH_ACTIVATIONS", 1)  # one row a micro-batch
    micro_loss, micro = gradients()
    assert micro_loss == pytest.approx(whole_loss, rel=1e-5)
    assert all(torch.allclose(a, b, rtol=1e-4, atol=1e-6) for a, b in zip(whole, micro, strict=True))


@pytest.fixture(scope="module")
def job(tmp_path_factory):
    from gpu_jobs.grpo import main
    from gpu_jobs.sink import FolderCheckpointStore, ListSink

    output_dir = tmp_path_factory.mktemp("agent-warmup")
    config = GRPOJobConfig(
        model_store=str(MODEL_STORE),
        output_dir=str(output_dir),
        rows=pack_rows(limit=JOB_TASKS),
        eval_rows=pack_rows()[JOB_TASKS : JOB_TASKS + EVAL_TASKS],
        verifiers=[],
        environment={**ENVIRONMENT, **WARMUP},
        max_steps=2,
        num_generations=4,
        prompts_per_step=2,
        temperature=0.7,
        seed=3,
        rollouts_per_step=4,
    )
    sink = ListSink()
    summary = main(config, sink=sink, checkpoints=FolderCheckpointStore(output_dir / "kept"))
    return summary, sink, output_dir


def test_after_the_warmup_the_tiny_model_calls_tools_and_the_reward_is_no_longer_flat(job):
    summary, sink, output_dir = job
    assert summary["steps"] == 2 and sink.of_kind("checkpoint")
    log, warning = [e for e in sink.of_kind("log") if e["message"].startswith("warm-up:")]
    log = log["message"]
    # The tiny model's 72-token turns hold no fix: the job's log warns that the warm-up teaches no edit.
    assert warning["level"] == "warning" and "no trace shows an edit" in warning["message"]
    # Neither the training tasks nor the held-out ones are warmed up on.
    assert f"{len(pack_rows()) - JOB_TASKS - EVAL_TASKS} held-out pack tasks" in log
    assert (output_dir / "warmup-model" / "anneal_warmup.json").is_file()
    metrics = [m for m in sink.of_kind("metric") if "episode/turns" in m]
    assert len(metrics) == 2
    assert max(m["episode/called_tools"] for m in metrics) > 0
    assert max(m["episode/format"] for m in metrics) > 0
    # Some group's episodes earned different rewards: an advantage that is not zero.
    assert min(m["frac_reward_zero_std"] for m in metrics) < 1
    assert max(m["reward_std"] for m in metrics) > 0
    rollouts = sink.of_kind("rollout")
    called = [t for r in rollouts for t in r["turns"] if t["action"]]
    assert called


def test_the_held_out_tasks_are_played_before_training_and_at_the_end(job):
    _, sink, _ = job
    evaluations = [m for m in sink.of_kind("metric") if "eval_agent/solved" in m]
    # Before the first GRPO step (the warm-up alone) and after the last: one greedy episode per task.
    assert [m["step"] for m in evaluations] == [0, 2]
    for metric in evaluations:
        assert metric["eval_agent/episodes"] == EVAL_TASKS
        assert metric["eval/mean"] == metric["eval_agent/solved"] == metric["eval/repo_fix"]
        for key in ("solved", "tests", "tested_before_finish", "edited", "edited_then_tested", "valid_calls"):
            assert 0.0 <= metric[f"eval_agent/{key}"] <= 1.0
        both = metric["eval_agent/edited_then_tested"]
        assert both <= min(metric["eval_agent/edited"], metric["eval_agent/tested_before_finish"])
        assert 1 <= metric["eval_agent/turns"] <= ENVIRONMENT["max_turns"]
    # Warmed up, the model writes tool calls on tasks it has never seen.
    assert max(m["eval_agent/valid_calls"] for m in evaluations) > 0
    # Each evaluation's episodes are reported as rollouts marked held_out, whose figures are the metric's.
    held_out = [r for r in sink.of_kind("rollout") if r.get("held_out")]
    tasks = [row["task"] for row in pack_rows()[JOB_TASKS : JOB_TASKS + EVAL_TASKS]]
    for metric in evaluations:
        episodes = [r for r in held_out if r["step"] == metric["step"]]
        assert [r["task"] for r in episodes] == tasks and all(r["turns"] for r in episodes)
        for key in ("solved", "tests", "format"):
            figure = "valid_calls" if key == "format" else key
            shares = [r["parts"][key] for r in episodes]
            assert sum(shares) / len(shares) == pytest.approx(metric[f"eval_agent/{figure}"])
    assert len(held_out) == 2 * EVAL_TASKS


def test_an_agent_jobs_held_out_rows_must_be_tasks(tmp_path):
    bad = {k: v for k, v in pack_rows()[JOB_TASKS].items() if k != "test_files"}
    with pytest.raises(ValueError, match=r"^eval_rows\[1\]\.test_files: "):
        GRPOJobConfig(
            model_store=str(MODEL_STORE), output_dir=str(tmp_path), rows=pack_rows(limit=JOB_TASKS),
            eval_rows=[pack_rows()[JOB_TASKS + 1], bad], verifiers=[], environment=ENVIRONMENT,
            prompts_per_step=2,
        )  # fmt: skip
    # The warm-up needs pack tasks that are neither trained nor judged on.
    with pytest.raises(ValueError, match="^environment.warmup_sft_steps: .*every one"):
        GRPOJobConfig(
            model_store=str(MODEL_STORE), output_dir=str(tmp_path), rows=pack_rows()[:20],
            eval_rows=pack_rows()[20:], verifiers=[], environment={**ENVIRONMENT, **WARMUP},
        )  # fmt: skip
