"""Supervised warm-up on scripted traces, before GRPO, for a model that never writes a tool call.

A model that never writes a well-formed call gets the same reward in every episode (the tests the bug does
not break), so GRPO's group-normalised advantage is zero and it learns nothing. With ``warmup_sft_steps`` > 0
in the job's environment, the job first trains the model, supervised, on scripted episodes:

- Tasks: the repo-fix pack's tasks neither the job's rows nor its held-out rows hold (``held_out_rows``,
  matched by repository and by files), so the warm-up never sees the scripted fix of a task the job then
  trains on or is judged on. With ``warmup_mutants``, each of those repositories also brings that many more of
  its bugs (gpu_jobs.agent.taskpack.mutants), traced alike: more fixes to learn from, in no repository the job
  holds.
- Traces: each task's scripted turns (run the tests, read the module, replace the buggy lines, run the tests,
  finish), played in a real sandbox session through ``Episode``, so the observations, limits and running
  summary are what a rollout has. The fix is a ``replace_text`` call of the changed lines alone
  (``minimal_fix_edits``), so that it fits a small turn budget: as a diff with the pack's 3 lines of context,
  32 of the 33 fix turns were over SmolLM2's default 96 tokens and its warm-up showed no edit at all; as a
  diff without context, 22 fit, and the patches SmolLM2 then wrote were refused (headers, counts, removed
  lines not in the file); as the changed lines, 30 fit (median 68 tokens). A turn longer than the turn budget
  is still left out (a model writing it would be cut off), and the job's log says which tools' turns were,
  warning when no trace shows an edit. A trace whose fix was left out is dropped when others show theirs
  (``build_examples``).
- Tokens: rendered by the job's renderer (gpu_jobs.agent.rendering.make_renderer: plain ``<tool>`` tags, the
  chat template's tool format with ``<tool_call>`` tags, or chat turns with ``<tool>`` tags where the template
  drops the tools), segment by segment as ``rollout_func`` builds them;
  the loss is on the model's own turns only (the prompt and observations are labelled -100).
- Training: a small AdamW loop on the job's device (full weights; a LoRA job then adds its adapters on top),
  saved as ``output_dir/warmup-model``, which GRPO starts from (and TRL takes as the reference model). A
  resumed job reuses that folder.
"""

from __future__ import annotations

import difflib
import json
import math
import os
import random
import shutil
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gpu_jobs.agent.episode import EDITS, Episode, edited
from gpu_jobs.agent.rendering import make_renderer
from gpu_jobs.agent.spec import EnvironmentSpec
from gpu_jobs.agent.taskpack import held_out_rows, with_mutants
from gpu_jobs.agent.tools import ToolCall

WARMUP_FOLDER = "warmup-model"
RECORD_FILE = "anneal_warmup.json"
TRACE_THREADS = 4  # scripted episodes run side by side, each in its own sandbox session
# (plan, call) of the scripted turns; the plans are short so that small models' turns fit their budget.
FINISH = ("Done.", ToolCall("finish"))
SHORT_SHARE = 0.3  # of the steps, on short windows of the segments first (see train_examples)
SHORT_CONTEXT = 48
SHORT_BATCH = 4
# A step's rows go through the model in micro-batches of at most this many padded tokens x hidden size x
# layers (their gradients summed, weighted to the batch's mean loss): the tiny model's whole batches fit in
# one; SmolLM2-135M takes its 1024-token segments one at a time (a batch of 4 at once held 22 GB and was
# killed on a 24 GB machine).
MICRO_BATCH_ACTIVATIONS = 1 << 24


@dataclass
class Example:
    """One conversation segment: its tokens, and which of them are the model's own (trained on)."""

    ids: list[int]
    mask: list[int]


def minimal_fix_edits(row: dict) -> list[ToolCall]:
    """The fix of a pack row as ``replace_text`` calls, one per block of changed lines: the changed lines alone,
    widened by a neighbouring line where they do not occur once in the module (or, for lines the fix only
    adds, to hold the line they follow). Applied in order, they give the fixed module.
    Precondition: `row` is a pack row (``solution`` holds the fixed module, ``files`` the buggy one)."""
    ((module, fixed),) = row["solution"].items()
    buggy = row["files"][module]
    old_lines, new_lines = buggy.splitlines(keepends=True), fixed.splitlines(keepends=True)
    blocks: list[list[int]] = []  # [i1, i2, j1, j2]: changed blocks, those one or two lines apart joined
    matcher = difflib.SequenceMatcher(a=old_lines, b=new_lines, autojunk=False)
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        if tag == "equal":
            continue
        if blocks and i1 - blocks[-1][1] <= 2:
            blocks[-1][1], blocks[-1][3] = i2, j2
        else:
            blocks.append([i1, i2, j1, j2])
    calls = []
    for i1, i2, j1, j2 in blocks:
        before = after = 0
        while True:
            start, end = i1 - before, i2 + after
            old = "".join(old_lines[start:end])
            if old.strip() and buggy.count(old.rstrip("\n")) == 1:
                break
            if start > 0 and (after >= before or end >= len(old_lines)):
                before += 1
            elif end < len(old_lines):
                after += 1
            else:
                break
        new = "".join(old_lines[start:i1] + new_lines[j1:j2] + old_lines[i2:end])
        arguments = {"path": module, "old": old.rstrip("\n"), "new": new.rstrip("\n")}
        calls.append(ToolCall("replace_text", arguments))
    return calls


def scripted_turns(row: dict) -> list[tuple[str, ToolCall]]:
    """What a scripted fixer does on a pack row: run the tests, read the module, replace the buggy lines,
    check, finish."""
    ((module, _),) = row["solution"].items()
    return [
        ("Run the tests.", ToolCall("run_tests")),
        ("Read the code.", ToolCall("read_file", {"path": module})),
        *(("Fix the bug.", call) for call in minimal_fix_edits(row)),
        ("Check the fix.", ToolCall("run_tests")),
        FINISH,
    ]


def turn_text(plan: str, call: ToolCall, *, tag: str) -> str:
    """A turn as the model should write it: its plan, then the call in the job's tag (the renderer's)."""
    text = f"{plan}\n{call.plain_text()}"
    return text.replace("<tool>", f"<{tag}>").replace("</tool>", f"</{tag}>")


def trace_examples(row: dict, spec: EnvironmentSpec, renderer: Any) -> tuple[list[Example], dict]:
    """Play `row`'s scripted turns in a sandbox; the token examples (one per segment) and what happened.

    Precondition: `row` is a pack row (it has ``solution`` and ``fix_diff``).
    """
    episode = Episode(
        row,
        spec,
        measure=lambda messages: len(renderer.ids(messages)),
        plain_format=renderer.instructions,
        system_prompt=spec.system_prompt,
    )
    turns = scripted_turns(row)
    examples: list[Example] = []
    prompt: list[int] = []
    completion: list[int] = []
    mask: list[int] = []
    summaries = 0
    skipped: list[tuple[str, int]] = []  # (tool, tokens) of each turn over the budget

    def flush() -> None:
        if any(mask):
            # The observation after the segment's last turn carries no loss: left out, it costs nothing.
            end = len(prompt) + len(mask) - mask[::-1].index(1)
            examples.append(Example((prompt + completion)[:end], ([0] * len(prompt) + mask)[:end]))

    try:
        while not episode.done:
            context = episode.context()
            if episode.done:
                break
            if not prompt or episode.summaries != summaries:
                flush()
                prompt, completion, mask = renderer.ids(context), [], []
                summaries = episode.summaries
            budget = episode.turn_tokens()
            # The last turn left is finish; when a turn does not fit, the next one is tried.
            while (
                len(turns) > 1
                and (size := len(renderer.encode(turn_text(*turns[0], tag=renderer.tag)))) > budget
            ):
                skipped.append((turns.pop(0)[1].name, size))
            text = turn_text(*(turns.pop(0) if turns else FINISH), tag=renderer.tag)
            ids = renderer.encode(text)
            if len(ids) > budget:
                break
            before = [*episode.messages, {"role": "assistant", "content": text, "ended_with_eos": False}]
            episode.record(text, len(ids))
            observation = renderer.observation_ids(before, episode.messages[-1])
            completion += ids + observation
            mask += [1] * len(ids) + [0] * len(observation)
        flush()
    except BaseException:
        episode.abandon()
        raise
    result = episode.finish()
    edits = int(edited(result.steps))  # the scripted fix applied (gpu_jobs.agent.episode.edited)
    return examples, {"turns": len(result.steps), "skipped": skipped, "edits": edits, "reward": result.reward}


class _LockedRenderer:
    """A renderer used from several threads: a fast tokenizer must not encode on two at once."""

    def __init__(self, renderer: Any) -> None:
        self.renderer = renderer
        self.instructions, self.tag = renderer.instructions, renderer.tag
        self.lock = threading.Lock()

    def ids(self, messages: list[dict]) -> list[int]:
        with self.lock:
            return self.renderer.ids(messages)

    def encode(self, text: str) -> list[int]:
        with self.lock:
            return self.renderer.encode(text)

    def observation_ids(self, before: list[dict], message: dict) -> list[int]:
        with self.lock:
            return self.renderer.observation_ids(before, message)


def build_examples(rows: list[dict], spec: EnvironmentSpec, renderer: Any) -> tuple[list[Example], dict]:
    """The examples of the rows' scripted traces, and a summary of the traces.

    When some traces show an edit, those whose fix turn was left out are dropped: they would teach going from
    reading the code straight to "check the fix" (SmolLM2 warmed up on both kinds, 8 with the fix and 7
    without, wrote run_tests after read_file on all 6 held-out tasks it was probed on). When none does (a turn
    budget too small for any fix: the tiny model's), all are kept, for the call format."""
    locked = _LockedRenderer(renderer)
    with ThreadPoolExecutor(max_workers=TRACE_THREADS) as pool:
        traced = list(pool.map(lambda row: trace_examples(row, spec, locked), rows))
    kept = [(row_examples, info) for row_examples, info in traced if info["edits"]] or traced
    examples = [example for row_examples, _ in kept for example in row_examples]
    stats = [info for _, info in traced]
    n = max(1, len(stats))
    left_out: dict[str, int] = {}
    for tool, _ in (skip for s in stats for skip in s["skipped"]):
        left_out[tool] = left_out.get(tool, 0) + 1
    edit_sizes = [size for s in stats for tool, size in s["skipped"] if tool in EDITS]
    return examples, {
        "tasks": [row["task"] for row in rows],
        "examples": len(examples),
        "turns_per_trace": sum(s["turns"] for s in stats) / n,
        "turns_left_out": sum(left_out.values()),
        "left_out_by_tool": left_out,
        # Traces that show an edit, and the turn budget the longest edit left out would need.
        "traces_with_edit": sum(s["edits"] > 0 for s in stats),
        "traces_left_out": len(traced) - len(kept),
        "edit_turn_tokens_needed": max(edit_sizes, default=0),
        "trace_reward": sum(s["reward"] for s in stats) / n,
        "model_tokens": sum(sum(e.mask) for e in examples),
    }


def train_examples(
    model: Any,
    examples: list[Example],
    *,
    steps: int,
    batch_size: int,
    learning_rate: float,
    seed: int,
    pad_id: int,
) -> dict:
    """Next-token training on `examples`, loss on their masked-in tokens; the first and last losses.

    Sequence-length warm-up: the first ``SHORT_SHARE`` of the steps train on each segment from
    ``SHORT_CONTEXT`` tokens before its first turn (``SHORT_BATCH`` times as many a step, at about the same
    cost), the rest on whole segments. The short steps teach the call's syntax fast; the whole ones teach
    writing it after a real context. (On the tiny model: 60 short + 60 whole steps reached a loss of 0.3
    where 100 whole steps at twice the batch stayed at 2.1; after 60 + 140, 11 of 24 turns sampled at
    temperature 0.7 were well-formed calls.)

    Precondition: `examples` is not empty and `model` sits on the device to train on.
    """
    import torch

    positions = getattr(model.config, "max_position_embeddings", None) or 1 << 30
    device = next(model.parameters()).device
    optimizer = torch.optim.AdamW(
        [p for p in model.parameters() if p.requires_grad], lr=learning_rate, weight_decay=0.0
    )
    # A short ramp, the full rate, then a linear decay over the last quarter of the steps.
    ramp, tail_from = max(1, steps // 10), steps * 3 // 4
    scheduler = torch.optim.lr_scheduler.LambdaLR(
        optimizer,
        lambda step: min(1.0, (step + 1) / ramp) * min(1.0, (steps - step) / max(1, steps - tail_from)),
    )
    short_steps = int(steps * SHORT_SHARE)
    sampler = random.Random(seed)
    losses = []
    model.train()
    for step in range(steps):
        short = step < short_steps
        batch = [sampler.choice(examples) for _ in range(batch_size * (SHORT_BATCH if short else 1))]
        rows = []
        for example in batch:
            start = max(0, example.mask.index(1) - SHORT_CONTEXT) if short else 0
            rows.append((example.ids[start:][:positions], example.mask[start:][:positions]))
        losses.append(_backward(model, rows, pad_id=pad_id, device=device))
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        scheduler.step()
        optimizer.zero_grad(set_to_none=True)
    model.eval()
    tail = losses[-max(1, steps // 10) :]
    return {"loss_first": losses[0], "loss_last": sum(tail) / len(tail), "short_steps": short_steps}


def _backward(model: Any, rows: list[tuple[list[int], list[int]]], *, pad_id: int, device: Any) -> float:
    """Gradients of the mean loss over `rows`' trained tokens, summed over micro-batches
    (MICRO_BATCH_ACTIVATIONS); returns that loss."""
    import torch

    config = model.config
    per_token = (getattr(config, "hidden_size", 0) or 1) * (getattr(config, "num_hidden_layers", 0) or 1)
    width = max(len(ids) for ids, _ in rows)
    size = max(1, MICRO_BATCH_ACTIVATIONS // (width * per_token))
    # The model's loss is the mean over labelled tokens after the shift (the first token is never predicted).
    total = max(1, sum(sum(mask[1:]) for _, mask in rows))
    loss_sum = 0.0
    for start in range(0, len(rows), size):
        part = rows[start : start + size]
        counted = sum(sum(mask[1:]) for _, mask in part)
        if not counted:
            continue
        part_width = max(len(ids) for ids, _ in part)
        input_ids, labels, attention = [], [], []
        for ids, mask in part:
            pad = part_width - len(ids)
            input_ids.append(ids + [pad_id] * pad)
            labels.append([t if m else -100 for t, m in zip(ids, mask, strict=True)] + [-100] * pad)
            attention.append([1] * len(ids) + [0] * pad)
        loss = model(
            input_ids=torch.tensor(input_ids, device=device),
            attention_mask=torch.tensor(attention, device=device),
            labels=torch.tensor(labels, device=device),
        ).loss
        (loss * (counted / total)).backward()
        loss_sum += float(loss.detach()) * counted
    return loss_sum / total


def warm_up_model(
    *, model_dir: Path, output_dir: Path, spec: EnvironmentSpec, rows: list[dict], device: str, seed: int,
    resume: bool = False,
) -> tuple[Path, dict]:  # fmt: skip
    """The warmed-up model's folder (``output_dir/warmup-model``) and what the warm-up did.

    Preconditions: ``spec.warmup_sft_steps`` > 0; `rows` are the job's rows and held-out rows (their pack
    tasks are left out); `device` is "cpu" or "cuda" (gpu_jobs.device.resolve_device). With `resume`, a
    folder a previous run of the job left complete is reused as it is.
    """
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    target = Path(output_dir) / WARMUP_FOLDER
    if resume and (target / RECORD_FILE).is_file():
        return target, {**json.loads((target / RECORD_FILE).read_text()), "reused": True}
    started = time.perf_counter()
    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    renderer = make_renderer(tokenizer, spec)
    held_out = held_out_rows(rows)
    if not held_out:
        raise ValueError(
            "environment.warmup_sft_steps: no task-pack task is left out of the job's rows and held-out rows"
        )
    examples, record = build_examples(with_mutants(held_out, spec.warmup_mutants), spec, renderer)
    if not examples:
        raise ValueError(
            "environment.warmup_sft_steps: no scripted turn fits the turn budget; raise environment.turn_tokens"
        )
    traced = time.perf_counter()
    torch.manual_seed(seed)
    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32)
    model = model.to(device)  # type: ignore[arg-type]  # transformers' typed .to() wrapper drops `self`
    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id
    record.update(
        train_examples(
            model,
            examples,
            steps=spec.warmup_sft_steps,
            batch_size=spec.warmup_sft_batch_size,
            learning_rate=spec.warmup_sft_learning_rate,
            seed=seed,
            pad_id=pad,
        )
    )
    record.update(
        steps=spec.warmup_sft_steps,
        trace_seconds=round(traced - started, 2),
        seconds=round(time.perf_counter() - started, 2),
        tool_format=renderer.format_name,
    )
    if not all(math.isfinite(record[key]) for key in ("loss_first", "loss_last")):
        raise ValueError("environment.warmup_sft_learning_rate: the warm-up's loss diverged; lower it")
    building = target.with_name(f".{WARMUP_FOLDER}.tmp-{os.getpid()}")
    shutil.rmtree(building, ignore_errors=True)
    model.save_pretrained(building)
    tokenizer.save_pretrained(building)
    (building / RECORD_FILE).write_text(json.dumps(record, indent=2) + "\n")
    shutil.rmtree(target, ignore_errors=True)
    os.rename(building, target)
    del model
    if device == "cuda":
        torch.cuda.empty_cache()  # vLLM (colocate) and the trainer load the saved copy next
    return target, record


def warmup_message(record: dict) -> str:
    """The job's log line about its warm-up."""
    if record.get("reused"):
        return f"warm-up: reusing the warmed-up model of the earlier run ({record['steps']} steps)"
    by_tool = ", ".join(
        f"{tool} {count}" for tool, count in sorted(record.get("left_out_by_tool", {}).items())
    )
    return (
        f"warm-up: {record['steps']} supervised steps on scripted traces of {len(record['tasks'])} held-out "
        f"pack tasks ({record['examples']} segments, {record['model_tokens']} model tokens, "
        f"{record['turns_left_out']} turns over the turn budget left out{f': {by_tool}' if by_tool else ''}"
        f"{_traces_left_out(record)}); "
        f"loss {record['loss_first']:.3f} -> {record['loss_last']:.3f} in {record['seconds']:.1f} s"
    )


def _traces_left_out(record: dict) -> str:
    dropped = record.get("traces_left_out", 0)
    return f"; {dropped} traces without their fix turn left out" if dropped else ""


def warmup_warning(record: dict, spec: EnvironmentSpec) -> str:
    """A warning for the job's log when the warm-up teaches no edit ("" when it does, or was reused)."""
    if record.get("reused") or record.get("traces_with_edit", 1) or not record.get("tasks"):
        return ""
    needed = record.get("edit_turn_tokens_needed", 0)
    return (
        f"warm-up: no trace shows an edit: every fix turn is over environment.turn_tokens ({spec.turn_tokens})"
        + (f"; {needed} tokens would fit them all" if needed else "")
        + ". The model learns to run the tests and finish, not to change the code"
    )
