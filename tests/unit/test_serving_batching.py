"""The batch and turbo engines (gpu_jobs.serving.engine), in process on the tiny model. Continuous batching:
sequences that join a running batch late, with longer or shorter prompts, and sequences that leave it early,
each get the answer plain unbatched greedy generation gives; so do packed weights and prompt-lookup
decoding."""

from __future__ import annotations

import os
import threading
from pathlib import Path

import pytest

from gpu_jobs.serving.engine import Delta, Engine, EngineConfig, Failed, Finished, Job, Sequence, TextTracker
from gpu_jobs.serving.engine.batch import PREFILL_PADDING, RunningBatch, prefill_groups
from gpu_jobs.serving.engine.lookup import generate_lookup, propose
from gpu_jobs.serving.engine.packed import pack_linears
from gpu_jobs.serving.protocol import SamplingParams
from gpu_jobs.tiny_model import ensure_tiny_model

MODEL_STORE = Path(os.environ.get("ANNEAL_MODEL_STORE", "/tmp/anneal-test/models"))
# Prompts of different lengths (the tiny model's tokenizer has one token per character).
PROMPTS = ["7+8=", "12+30=", "user: 45+45=\nassistant:", "system: You add numbers.\nuser: 99+1=\nassistant:"]


@pytest.fixture(scope="module")
def engine() -> Engine:
    loaded = Engine(ensure_tiny_model(MODEL_STORE), EngineConfig(tier="batch", max_batch=8))
    loaded.load()
    return loaded


def _ids(engine: Engine, prompt: str) -> list[int]:
    return engine.tokenizer(prompt)["input_ids"]


def _unbatched(engine: Engine, prompt: str, max_tokens: int) -> str:
    """The reference: ``model.generate`` on the prompt alone, greedy, without EOS stopping."""
    import torch

    ids = torch.tensor([_ids(engine, prompt)])
    out = engine.model.generate(
        ids,
        attention_mask=torch.ones_like(ids),
        max_new_tokens=max_tokens,
        min_new_tokens=max_tokens,
        do_sample=False,
    )
    return engine.tokenizer.decode(out[0, ids.shape[1] :], skip_special_tokens=True)


class Collector:
    """A job's emit: gathers each sequence's text and finish event."""

    def __init__(self) -> None:
        self.texts: dict[int, str] = {}
        self.finished: dict[int, Finished] = {}
        self.failed: list[Failed] = []
        self.done = threading.Event()
        self.expected = 1

    def __call__(self, event: Delta | Finished | Failed) -> None:
        if isinstance(event, Delta):
            self.texts[event.index] = self.texts.get(event.index, "") + event.text
        elif isinstance(event, Finished):
            self.finished[event.index] = event
        else:
            self.failed.append(event)
        if len(self.finished) == self.expected or self.failed:
            self.done.set()


def _job(engine: Engine, prompt: str, max_tokens: int) -> tuple[Job, Collector]:
    params = SamplingParams(max_tokens=max_tokens, temperature=0.0, ignore_eos=True)
    collector = Collector()
    return Job([Sequence(0, _ids(engine, prompt), params)], collector), collector


def test_late_joiners_and_early_leavers_get_their_unbatched_answers(engine):
    batch = RunningBatch(engine)
    # A medium prompt starts alone; a longer one joins two steps later (the running row gets shifted), a
    # shorter one after that (padded on the left); the first leaves early, the others run on without it.
    plan = [(PROMPTS[1], 6, 0), (PROMPTS[3], 12, 2), (PROMPTS[0], 10, 4), (PROMPTS[2], 9, 4)]
    jobs = []
    for step in range(40):
        joining = [_job(engine, prompt, tokens) for prompt, tokens, at in plan if at == step]
        if joining:
            batch.join([(job, job.sequences[0]) for job, _ in joining])
            jobs += joining
        if not batch.rows and len(jobs) == len(plan):
            break
        if batch.rows:
            batch.step()
    assert not batch.rows and batch.kv.rows == 0
    for (prompt, tokens, _), (_, collector) in zip(plan, jobs, strict=True):
        assert collector.texts[0] == _unbatched(engine, prompt, tokens), prompt
        assert collector.finished[0] == Finished(0, "length", tokens)


def test_the_worker_serves_jobs_submitted_at_once_and_later(engine):
    runner = Engine(engine.model_dir, EngineConfig(tier="batch", max_batch=3))
    runner.start()
    assert runner.ready.wait(60)
    try:
        first = [_job(runner, prompt, 8) for prompt in PROMPTS]  # one more than max_batch: one waits
        for job, _ in first:
            runner.submit(job)
        assert first[0][1].done.wait(60)
        late = _job(runner, PROMPTS[3], 5)
        runner.submit(late[0])
        for (job, collector), prompt in [*zip(first, PROMPTS, strict=True), (late, PROMPTS[3])]:
            assert collector.done.wait(60) and not collector.failed
            expected = 5 if job is late[0] else 8
            assert collector.texts.get(0, "") == _unbatched(engine, prompt, expected), prompt
    finally:
        runner.stop()


def test_a_cancelled_request_leaves_the_batch_and_the_others_finish(engine):
    batch = RunningBatch(engine)
    (kept, kept_out), (gone, gone_out) = _job(engine, PROMPTS[2], 10), _job(engine, PROMPTS[3], 10)
    batch.join([(kept, kept.sequences[0]), (gone, gone.sequences[0])])
    batch.step()
    gone.cancelled.set()
    batch.step()
    assert [row.job for row in batch.rows] == [kept] and batch.kv.rows == 1
    assert gone_out.finished[0].finish_reason == "length" and gone_out.finished[0].completion_tokens == 3
    while batch.rows:
        batch.step()
    assert kept_out.texts[0] == _unbatched(engine, PROMPTS[2], 10)


def test_prefill_groups_bound_padding():
    lengths = [129, 83, 95, 84, 138, 92, 104, 93, 131, 85, 97, 86, 134, 88, 100, 89, 2000]
    groups = prefill_groups(lengths)
    assert sorted(i for group in groups for i in group) == list(range(len(lengths)))
    for group in groups:
        sizes = [lengths[i] for i in group]
        assert len(group) * max(sizes) <= PREFILL_PADDING * sum(sizes)
    assert [16] in groups  # a prompt far longer than the rest goes alone
    assert len(groups) <= 3


def test_packed_linears_give_the_same_greedy_answers(engine):
    import torch

    packed = Engine(engine.model_dir, EngineConfig(tier="batch"))
    packed.load()
    assert pack_linears(packed.model) == sum(type(m) is torch.nn.Linear for m in engine.model.modules()) > 0
    ids = torch.tensor([_ids(engine, PROMPTS[3])])
    one_row = ids[:, -1:]
    # One row takes the default path (bit for bit); several rows the packed one (the same up to rounding).
    assert torch.equal(packed.model(one_row).logits, engine.model(one_row).logits)
    assert torch.allclose(packed.model(ids).logits, engine.model(ids).logits, atol=1e-4)
    for prompt in PROMPTS:
        batch = RunningBatch(packed)
        job, collector = _job(packed, prompt, 8)
        batch.join([(job, job.sequences[0])])
        while batch.rows:
            batch.step()
        assert collector.texts[0] == _unbatched(engine, prompt, 8), prompt


def test_propose_takes_what_followed_the_latest_earlier_occurrence_of_the_longest_ngram():
    assert propose([5, 6, 7, 1, 2, 9, 6, 7, 3, 6, 7], longest_ngram=3, count=4) == [3, 6, 7]
    assert propose([1, 2, 3, 4, 9, 2, 3], longest_ngram=2, count=2) == [4, 9]
    assert propose([1, 2, 3, 1, 2], longest_ngram=3, count=1) == [3]
    assert propose([1, 2, 3], longest_ngram=3, count=5) == []


@pytest.mark.parametrize("prompt", [*PROMPTS, "1+1=2\n1+1=2\n1+1=2\n1+1=", "12+30=42\n12+30=42\n12+30="])
def test_prompt_lookup_gives_the_plain_greedy_answer(engine, prompt):
    turbo = Engine(engine.model_dir, EngineConfig(tier="turbo", prompt_lookup_tokens=6))
    turbo.model, turbo.tokenizer, turbo.eos_ids = engine.model, engine.tokenizer, engine.eos_ids
    job, collector = _job(turbo, prompt, 14)
    tracker = TextTracker(turbo.tokenizer, job.sequences[0].params, turbo.eos_ids)
    generate_lookup(turbo, job, job.sequences[0], tracker)
    text = collector.texts.get(0, "") + tracker.stop()
    assert text == _unbatched(engine, prompt, 14) and tracker.completion_tokens == 14
