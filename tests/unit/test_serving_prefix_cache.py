"""Prefix caching in the CPU serving engine (gpu_jobs.serving.engine.prefix), on the tiny model: a request
whose prompt starts with a cached prefix gets the same token ids as with no cache, in every tier; the cache
is bounded in bytes (least recently used out), keyed by model, never changed by the requests that reuse it,
and used by concurrent requests through the worker and the HTTP server."""

from __future__ import annotations

import os
import threading
from pathlib import Path

import pytest
import torch

from gpu_jobs.serving.engine import Delta, Engine, EngineConfig, Failed, Finished, Job, Sequence, TextTracker
from gpu_jobs.serving.engine.batch import RunningBatch
from gpu_jobs.serving.engine.lookup import generate_lookup
from gpu_jobs.serving.engine.prefix import PrefixCache
from gpu_jobs.serving.engine.sequential import _generate
from gpu_jobs.serving.protocol import SamplingParams
from gpu_jobs.tiny_model import ensure_tiny_model

MODEL_STORE = Path(os.environ.get("ANNEAL_MODEL_STORE", "/tmp/anneal-test/models"))
# The tiny model's tokenizer has one token per character: the shared start is about 100 tokens.
SYSTEM = (
    "system: You are a careful calculator. Read the two numbers the user gives and answer with their sum.\n"
)
QUESTIONS = ["user: 12+30=\nassistant:", "user: 45+45=\nassistant:", "user: 7+8=\nassistant:"]
BLOCK = 16
MB = 1024 * 1024


@pytest.fixture(scope="module", autouse=True)
def one_thread():
    """The tiny model's products are too small to split: on a busy 2-core host, two threads wait on each
    other far longer than they compute (10-50x slower here)."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@pytest.fixture(scope="module")
def base() -> Engine:
    engine = Engine(ensure_tiny_model(MODEL_STORE), EngineConfig(tier="standard", prefix_cache_bytes=0))
    engine.load()
    assert engine.prefix_cache is None
    return engine


def _twin(base: Engine, tier: str, cache: PrefixCache | None) -> Engine:
    """An engine of ``tier`` on ``base``'s loaded model, with ``cache`` as its prefix cache."""
    engine = Engine(base.model_dir, EngineConfig(tier=tier, prompt_lookup_tokens=6, prefix_cache_bytes=0))
    engine.model, engine.tokenizer, engine.eos_ids = base.model, base.tokenizer, base.eos_ids
    engine.pad_id, engine.context_len, engine.model_key = base.pad_id, base.context_len, base.model_key
    engine.prefix_cache = cache
    return engine


def _ids(engine: Engine, text: str) -> list[int]:
    return engine.tokenizer(text)["input_ids"]


def _generate_ids(engine: Engine, prompt_ids: list[int], max_tokens: int = 10) -> list[int]:
    """The token ids the engine's tier generates for the prompt (greedy, EOS ignored)."""
    params = SamplingParams(max_tokens=max_tokens, temperature=0.0, ignore_eos=True)
    sequence = Sequence(0, list(prompt_ids), params)
    job = Job([sequence], lambda event: None)
    if engine.config.tier == "batch":
        batch = RunningBatch(engine)
        batch.join([(job, sequence)])
        [row] = batch.rows
        while batch.rows:
            batch.step()
        return row.tracker.ids
    tracker = TextTracker(engine.tokenizer, params, engine.eos_ids)
    if engine.config.tier == "turbo":
        generate_lookup(engine, job, sequence, tracker)
    else:
        _generate(engine, job, sequence, tracker)
    return tracker.ids


def _snapshot(cache: PrefixCache) -> dict[bytes, torch.Tensor]:
    return {name: block.kv.clone() for name, block in cache._blocks.items()}


@pytest.mark.parametrize("tier", ["standard", "turbo", "batch"])
def test_a_cached_prefix_gives_the_token_ids_of_a_cold_run(base, tier):
    cold = _twin(base, tier, None)
    cache = PrefixCache(64 * MB, block_tokens=BLOCK)
    warm = _twin(base, tier, cache)
    prompts = [_ids(base, SYSTEM + question) for question in QUESTIONS]
    # A strict prefix of a cached prompt reuses its whole blocks too.
    prompts.append(prompts[0][:-7])
    expected = [_generate_ids(cold, ids) for ids in prompts]

    assert _generate_ids(warm, prompts[0]) == expected[0]
    assert cache.stats()["hits"] == 0 and cache.stats()["blocks"] == len(prompts[0]) // BLOCK
    stored = _snapshot(cache)
    for ids, want in zip(prompts[1:], expected[1:], strict=True):
        assert _generate_ids(warm, ids) == want
    assert _generate_ids(warm, prompts[0]) == expected[0]  # the whole prompt again: all but its last block

    stats = cache.stats()
    shared = len(os.path.commonprefix(prompts[:3]))
    assert stats["hits"] == 4 and stats["misses"] == 1
    assert stats["hit_tokens"] >= 3 * (shared // BLOCK * BLOCK) + (len(prompts[3]) - 1) // BLOCK * BLOCK
    # Copy on use: the blocks the later requests reused are bit for bit what the first one stored.
    for name, kv in stored.items():
        assert torch.equal(cache._blocks[name].kv, kv)


def test_least_recently_used_blocks_go_first_and_bytes_stay_bounded():
    layers, heads, dim = 3, 2, 4
    per_block = layers * 2 * heads * BLOCK * dim * 4  # float32
    cache = PrefixCache(4 * per_block, block_tokens=BLOCK)

    def kv(count: int, seed: int) -> list[tuple[torch.Tensor, torch.Tensor]]:
        generator = torch.Generator().manual_seed(seed)
        return [
            (
                torch.randn(heads, count, dim, generator=generator),
                torch.randn(heads, count, dim, generator=generator),
            )
            for _ in range(layers)
        ]

    first, second, third = ([seed] * (2 * BLOCK + 1) for seed in (1, 2, 3))  # two blocks each (+1 token)
    first_kv = kv(len(first), 1)
    assert cache.insert("m", first, first_kv) == 2
    assert cache.insert("m", second, kv(len(second), 2)) == 2
    assert cache.stats()["bytes"] == 4 * per_block
    length, reused = cache.lookup("m", first)  # first is now more recent than second
    assert length == 2 * BLOCK
    for (keys, values), (want_keys, want_values) in zip(reused, first_kv, strict=True):
        assert torch.equal(keys[0], want_keys[:, :length]) and torch.equal(values[0], want_values[:, :length])
    reused[0][0].fill_(0.0)  # the request owns what it got: the cache is not changed
    assert torch.equal(cache.lookup("m", first)[1][0][0][0], first_kv[0][0][:, : 2 * BLOCK])

    assert cache.insert("m", third, kv(len(third), 3)) == 2
    stats = cache.stats()
    assert stats["bytes"] == 4 * per_block <= stats["capacity_bytes"] and stats["evictions"] == 2
    assert cache.lookup("m", second)[0] == 0
    assert cache.lookup("m", first)[0] == cache.lookup("m", third)[0] == 2 * BLOCK

    # A prompt longer than the whole cache keeps only the start that fits.
    long = list(range(10 * BLOCK + 1))
    cache.insert("m", long, kv(len(long), 4))
    assert cache.lookup("m", long)[0] == 4 * BLOCK and cache.stats()["bytes"] == 4 * per_block


def test_two_models_never_share_blocks(base, tmp_path):
    # Another model: the tiny one with its value projections changed, saved in a folder of its own.
    other_dir = tmp_path / "tiny-other"
    projections = [layer.self_attn.v_proj.weight for layer in base.model.model.layers]
    originals = [weight.data.clone() for weight in projections]
    generator = torch.Generator().manual_seed(0)
    try:
        for weight in projections:
            weight.data.add_(torch.randn(weight.shape, generator=generator))
        base.model.save_pretrained(other_dir)
    finally:
        for weight, original in zip(projections, originals, strict=True):
            weight.data.copy_(original)
    base.tokenizer.save_pretrained(other_dir)
    other = Engine(other_dir, EngineConfig(tier="standard", prefix_cache_bytes=0))
    other.load()
    assert other.model_key != base.model_key

    shared = PrefixCache(64 * MB, block_tokens=BLOCK)
    prompt = _ids(base, SYSTEM + QUESTIONS[0])
    expected = _generate_ids(other, prompt)
    assert _generate_ids(_twin(base, "standard", shared), prompt) != expected  # the models differ
    other.prefix_cache = shared
    assert _generate_ids(other, prompt) == expected
    stats = shared.stats()
    assert stats["hits"] == 0 and stats["misses"] == 2 and stats["blocks"] == 2 * (len(prompt) // BLOCK)
    assert shared.lookup(base.model_key, prompt)[0] > 0 and shared.lookup("a third model", prompt)[0] == 0


class Collector:
    def __init__(self, expected: int) -> None:
        self.texts: dict[int, str] = {}
        self.finished: dict[int, Finished] = {}
        self.failed: list[Failed] = []
        self.expected = expected
        self.done = threading.Event()

    def __call__(self, event: Delta | Finished | Failed) -> None:
        if isinstance(event, Delta):
            self.texts[event.index] = self.texts.get(event.index, "") + event.text
        elif isinstance(event, Finished):
            self.finished[event.index] = event
        else:
            self.failed.append(event)
        if len(self.finished) == self.expected or self.failed:
            self.done.set()


def test_concurrent_requests_through_the_batch_worker(base):
    """Requests sent at once from several threads, two sequences each, all starting with the same system
    prompt: each gets its cold answer while the cache fills and is read (and its counters polled)."""
    engine = Engine(base.model_dir, EngineConfig(tier="batch", max_batch=4, prefix_cache_bytes=8 * MB))
    engine.start()
    assert engine.ready.wait(60) and engine.prefix_cache is not None
    cold = _twin(base, "standard", None)
    prompts = [SYSTEM + question for question in QUESTIONS * 2]
    params = SamplingParams(max_tokens=8, temperature=0.0, ignore_eos=True)
    collectors = [Collector(2) for _ in prompts]
    polled: list[dict] = []
    stop = threading.Event()

    def poll() -> None:
        while not stop.is_set():
            polled.append(engine.prefix_cache.stats())

    def send(prompt: str, collector: Collector) -> None:
        ids = _ids(engine, prompt)
        engine.submit(Job([Sequence(0, ids, params), Sequence(1, ids, params)], collector))

    threads = [threading.Thread(target=send, args=pair) for pair in zip(prompts, collectors, strict=True)]
    poller = threading.Thread(target=poll)
    try:
        poller.start()
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        for prompt, collector in zip(prompts, collectors, strict=True):
            assert collector.done.wait(60) and not collector.failed
            want = base.tokenizer.decode(_generate_ids(cold, _ids(base, prompt), 8), skip_special_tokens=True)
            assert collector.texts == {0: want, 1: want}, prompt
    finally:
        stop.set()
        poller.join()
        engine.stop()
    stats = engine.prefix_cache.stats()
    # Every sequence but the first one of each prefill found the shared start cached.
    assert stats["hits"] >= len(prompts) and stats["hits"] + stats["misses"] == 2 * len(prompts)
    assert polled and all(p["bytes"] <= p["capacity_bytes"] for p in polled)


def test_the_health_route_reports_the_counters(base):
    from starlette.testclient import TestClient

    from gpu_jobs.serving.server import create_app

    credential = "prefix-cache-test-credential-0123456789"
    engine = Engine(base.model_dir, EngineConfig(tier="standard", prefix_cache_bytes=4 * MB))
    headers = {"Authorization": f"Bearer {credential}"}
    with TestClient(create_app(engine, "tiny", credential=credential)) as client:
        assert engine.ready.wait(60)
        for question in QUESTIONS[:2]:
            body = {"model": "tiny", "prompt": SYSTEM + question, "max_tokens": 4, "temperature": 0}
            assert client.post("/v1/completions", json=body, headers=headers).status_code == 200
        counters = client.get("/health", headers=headers).json()["prefix_cache"]
    assert counters["hits"] == 1 and counters["misses"] == 1
    assert 0 < counters["bytes"] <= counters["capacity_bytes"] == 4 * MB and counters["hit_tokens"] >= 64


def test_replicas_get_the_prefix_cache_setting(settings):
    from gpu_jobs.serving.__main__ import parse_args
    from workers.deploy import serving_argv

    settings.DEPLOY_PREFIX_CACHE_MB = 96
    argv = serving_argv(model_dir="/m", tier="batch", port=5000, served_name="x", max_concurrency=2)
    args = parse_args(argv[argv.index("--model") :])
    assert args.prefix_cache_mb == 96 and args.tier == "batch"
    assert (
        parse_args(
            ["--model", "/m", "--tier", "standard", "--port", "1", "--served-name", "x"]
        ).prefix_cache_mb
        > 0
    )
    with pytest.raises(SystemExit):
        parse_args([*argv[argv.index("--model") :], "--prefix-cache-mb", "-1"])


def test_in_a_join_of_several_only_a_prefix_of_half_the_prompt_is_worth_a_prefill_alone(base):
    """A sequence prefilled from the cache goes alone; in a join of several, one whose cached start is under
    half its prompt (a short shared system line) is prefilled with the others instead. Either way its tokens
    are the cold run's."""
    cache = PrefixCache(8 * MB)
    engine = _twin(base, "batch", cache)
    short = "system: add.\n" + "-" * 19  # 32 tokens: two blocks
    long_questions = [f"user: {a}+{b}=" + " " * 70 + "\nassistant:" for a, b in ((12, 30), (45, 45), (7, 8))]
    for start in (short, SYSTEM):
        _generate_ids(engine, _ids(base, start + QUESTIONS[0]))  # caches the start's blocks
    params = SamplingParams(max_tokens=6, temperature=0.0, ignore_eos=True)

    def join(prompts: list[str]) -> tuple[list[list[int]], int, int]:
        hits, misses = cache.hits, cache.misses
        sequences = [Sequence(0, _ids(base, prompt), params) for prompt in prompts]
        batch = RunningBatch(engine)
        batch.join([(Job([sequence], lambda event: None), sequence) for sequence in sequences])
        rows = list(batch.rows)
        while batch.rows:
            batch.step()
        return [row.tracker.ids for row in rows], cache.hits - hits, cache.misses - misses

    cold = _twin(base, "batch", None)
    short_prompts = [short + question for question in long_questions]
    ids, hits, misses = join(short_prompts)
    assert (hits, misses) == (0, 3)
    assert sorted(ids) == sorted(_generate_ids(cold, _ids(base, p), 6) for p in short_prompts)
    long_prompts = [SYSTEM + question for question in QUESTIONS[1:]]
    ids, hits, misses = join(long_prompts)
    assert (hits, misses) == (2, 0)
    assert sorted(ids) == sorted(_generate_ids(cold, _ids(base, p), 6) for p in long_prompts)
