"""The vLLM command line for GPU hosts (vLLM cannot run here: no GPU, not in the CPU set), and the pieces of
the CPU engine that need no server: the text tracker (stop strings, EOS, length) and request parsing."""

from __future__ import annotations

import json

import pytest

from gpu_jobs.serving import TIERS, vllm_serve_argv
from gpu_jobs.serving.chat_template import render_chat, render_plain
from gpu_jobs.serving.engine import TextTracker
from gpu_jobs.serving.protocol import ApiError, SamplingParams, parse_chat, parse_completion
from gpu_jobs.tiny_model import build_char_tokenizer


def _flag(argv: list[str], name: str) -> str:
    return argv[argv.index(name) + 1]


def test_standard_argv_serves_the_model_with_usage_always():
    argv = vllm_serve_argv(
        "/models/ckpt", tier="standard", served_name="acme-7", port=8101, max_concurrency=12
    )
    assert argv[:3] == ["vllm", "serve", "/models/ckpt"]
    assert _flag(argv, "--host") == "127.0.0.1" and _flag(argv, "--port") == "8101"
    assert _flag(argv, "--served-model-name") == "acme-7"
    assert _flag(argv, "--max-num-seqs") == "12"
    assert "--enable-force-include-usage" in argv
    assert "--speculative-config" not in argv


def test_turbo_argv_uses_ngram_speculation_or_a_draft_model():
    ngram = json.loads(
        _flag(vllm_serve_argv("/m", tier="turbo", served_name="x", port=9000), "--speculative-config")
    )
    assert ngram["method"] == "ngram" and ngram["num_speculative_tokens"] >= 1
    assert 1 <= ngram["prompt_lookup_min"] <= ngram["prompt_lookup_max"]
    draft = vllm_serve_argv("/m", tier="turbo", served_name="x", port=9000, draft_model="/drafts/small")
    spec = json.loads(_flag(draft, "--speculative-config"))
    assert spec == {"method": "draft_model", "model": "/drafts/small", "num_speculative_tokens": 5}


def test_batch_argv_runs_large_batches():
    argv = vllm_serve_argv(
        "/m", tier="batch", served_name="x", port=9000, max_concurrency=4, max_model_len=4096
    )
    assert int(_flag(argv, "--max-num-seqs")) >= 256
    assert int(_flag(argv, "--max-num-batched-tokens")) >= 8192
    assert _flag(argv, "--max-model-len") == "4096"


@pytest.mark.parametrize(
    "kwargs",
    [
        {"tier": "fast"},
        {"tier": "batch", "draft_model": "/d"},
        {"tier": "standard", "port": 0},
        {"tier": "standard", "max_concurrency": 0},
        {"tier": "standard", "served_name": ""},
    ],
)
def test_argv_refuses_what_vllm_would(kwargs):
    arguments = {"served_name": "x", "port": 9000, **kwargs}
    with pytest.raises(ValueError):
        vllm_serve_argv("/m", **arguments)


def test_tiers_are_the_same_on_cpu_and_gpu():
    assert TIERS == ("standard", "turbo", "batch")
    for tier in TIERS:
        vllm_serve_argv("/m", tier=tier, served_name="x", port=9000)


@pytest.mark.parametrize("tier", ["standard", "turbo", "batch"])
def test_every_tier_turns_prefix_caching_on(tier):
    argv = vllm_serve_argv("/m", tier=tier, served_name="x", port=9000)
    assert "--enable-prefix-caching" in argv and "--no-enable-prefix-caching" not in argv


def _feed(tracker: TextTracker, tokenizer, text: str) -> str:
    out = ""
    for token in tokenizer(text)["input_ids"]:
        out += tracker.feed(token)
        if tracker.done:
            break
    return out


def test_tracker_cuts_at_stop_string_and_never_streams_part_of_it():
    tokenizer = build_char_tokenizer()
    tracker = TextTracker(tokenizer, SamplingParams(max_tokens=50, stop=("END",)), {tokenizer.eos_token_id})
    pieces = []
    for token in tokenizer("abc ENDxyz")["input_ids"]:
        pieces.append(tracker.feed(token))
        if tracker.done:
            break
    assert "".join(pieces) == "abc " and not any("E" in p for p in pieces)
    assert tracker.finish_reason == "stop" and tracker.completion_tokens == 7


def test_tracker_stops_at_eos_and_at_max_tokens():
    tokenizer = build_char_tokenizer()
    eos = tokenizer.eos_token_id
    tracker = TextTracker(tokenizer, SamplingParams(max_tokens=50), {eos})
    text = _feed(tracker, tokenizer, "42")
    assert tracker.feed(eos) == "" and text == "42"
    assert tracker.finish_reason == "stop" and tracker.completion_tokens == 2
    tracker = TextTracker(tokenizer, SamplingParams(max_tokens=3), {eos})
    assert _feed(tracker, tokenizer, "123456") == "123"
    assert tracker.finish_reason == "length" and tracker.completion_tokens == 3


def test_plain_chat_template_is_documented_shape():
    messages = [{"role": "system", "content": "You add."}, {"role": "user", "content": "1+2="}]
    assert render_plain(messages) == "system: You add.\nuser: 1+2=\nassistant:"
    assert render_chat(build_char_tokenizer(), messages) == render_plain(messages)


def test_request_parsing():
    chat = parse_chat(
        {"messages": [{"role": "user", "content": [{"type": "text", "text": "hi"}]}], "stop": "x"}
    )
    assert chat.messages == [{"role": "user", "content": "hi"}] and chat.stop == ("x",)
    assert chat.max_tokens is None and chat.temperature == 1.0
    completion = parse_completion({"prompt": ["a", "b"], "n": 2, "max_tokens": 3, "temperature": 0})
    assert completion.prompts == ["a", "b"] and completion.n == 2 and completion.temperature == 0.0
    assert parse_completion({"prompt": "a"}).max_tokens == 16
    with pytest.raises(ApiError) as caught:
        parse_completion({"prompt": ["a"] * 9, "n": 2})
    assert caught.value.param == "n" and "16" in caught.value.message
    with pytest.raises(ApiError) as caught:
        parse_completion({"prompt": "a", "presence_penalty": 0.5})
    assert caught.value.param == "presence_penalty" and caught.value.code == "unsupported_parameter"
    assert parse_completion({"prompt": "a", "presence_penalty": 0, "logprobs": None}).prompts == ["a"]
