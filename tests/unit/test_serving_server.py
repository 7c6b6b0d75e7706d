"""The CPU serving process (gpu_jobs.serving) as deployments run it: real processes on 127.0.0.1 serving the
tiny model, called with the official ``openai`` client, unchanged, and with raw HTTP for malformed input."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import openai
import pytest

from gpu_jobs.serving.auth import CREDENTIAL_ENV
from gpu_jobs.serving.chat_template import render_plain
from gpu_jobs.tiny_model import ensure_tiny_model
from tests.stack import free_port

MODEL_STORE = Path(os.environ.get("ANNEAL_MODEL_STORE", "/tmp/anneal-test/models"))
NAME = "tiny-test"
ROOT = Path(__file__).resolve().parents[2]
PROMPTS = ["12+30=", "7+8=", "45+45=", "99+1="]
# Every replica demands its credential (tests/security/test_deploy_isolation.py checks the refusals).
CREDENTIAL = "test-replica-credential-" + "x" * 16
AUTH = {"Authorization": f"Bearer {CREDENTIAL}"}


class Replica:
    def __init__(self, model_dir: Path, tier: str, *extra: str) -> None:
        self.tier = tier
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        argv = [
            sys.executable,
            "-m",
            "gpu_jobs.serving",
            "--model",
            str(model_dir),
            "--tier",
            tier,
            "--port",
            str(self.port),
            "--served-name",
            NAME,
            "--threads",
            "1",
            *extra,
        ]
        env = {**os.environ, CREDENTIAL_ENV: CREDENTIAL}
        self.process = subprocess.Popen(
            argv, cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
        )
        self.health_codes: list[int] = []

    def wait_ready(self, timeout: float = 120.0) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise AssertionError(
                    f"{self.tier} replica exited: {self.process.stderr.read().decode()[-2000:]}"
                )
            try:
                response = httpx.get(self.url + "/health", timeout=2, headers=AUTH)
                self.health_codes.append(response.status_code)
                if response.status_code == 200:
                    return
            except httpx.TransportError:
                pass
            time.sleep(0.2)
        raise AssertionError(f"{self.tier} replica not ready after {timeout} s")

    def client(self) -> openai.OpenAI:
        return openai.OpenAI(base_url=self.url + "/v1", api_key=CREDENTIAL, max_retries=0, timeout=60)

    def stop(self) -> None:
        self.process.terminate()
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait(timeout=10)


@pytest.fixture(scope="module")
def model_dir() -> Path:
    return ensure_tiny_model(MODEL_STORE)


@pytest.fixture(scope="module")
def replicas(model_dir):
    started = {
        "standard": Replica(model_dir, "standard", "--max-concurrency", "1"),
        "turbo": Replica(model_dir, "turbo"),
        "batch": Replica(model_dir, "batch", "--max-concurrency", "16"),
    }
    try:
        for replica in started.values():
            replica.wait_ready()
        yield started
    finally:
        for replica in started.values():
            replica.stop()


@pytest.fixture(scope="module")
def tokenizer(model_dir):
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(model_dir)


@pytest.fixture(scope="module")
def reference(model_dir, tokenizer):
    """Greedy completions computed here with plain transformers: the ground truth for every tier."""
    import torch
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(model_dir).eval()
    answers = {}
    for prompt in PROMPTS:
        ids = torch.tensor([tokenizer(prompt)["input_ids"]])
        with torch.no_grad():
            out = model.generate(ids, attention_mask=torch.ones_like(ids), max_new_tokens=8, do_sample=False)
        answers[prompt] = tokenizer.decode(out[0, ids.shape[1] :], skip_special_tokens=True)
    return answers


def _tokens(tokenizer, text: str) -> int:
    return len(tokenizer(text)["input_ids"])


def test_health_and_models(replicas):
    for tier, replica in replicas.items():
        health = httpx.get(replica.url + "/health", headers=AUTH).json()
        assert health["status"] == "ok" and health["tier"] == tier and health["model"] == NAME
        assert set(replica.health_codes) <= {200, 503}
        models = replica.client().models.list()
        assert [m.id for m in models.data] == [NAME]


def test_completion_matches_transformers_and_counts_usage(replicas, reference, tokenizer):
    client = replicas["standard"].client()
    for prompt in PROMPTS[:2]:
        result = client.completions.create(model=NAME, prompt=prompt, max_tokens=8, temperature=0)
        text = result.choices[0].text
        assert text == reference[prompt]
        assert result.usage.prompt_tokens == _tokens(tokenizer, prompt)
        assert result.usage.completion_tokens == _tokens(tokenizer, text) or (
            result.choices[0].finish_reason == "length" and result.usage.completion_tokens == 8
        )
        assert result.usage.total_tokens == result.usage.prompt_tokens + result.usage.completion_tokens


def test_length_limit_and_usage_with_ignore_eos(replicas):
    client = replicas["standard"].client()
    result = client.completions.create(
        model=NAME, prompt="1+1=", max_tokens=7, temperature=0, extra_body={"ignore_eos": True}
    )
    assert result.choices[0].finish_reason == "length"
    assert result.usage.completion_tokens == 7


def test_chat_plain_and_stream_agree(replicas, tokenizer):
    client = replicas["standard"].client()
    messages = [{"role": "system", "content": "add"}, {"role": "user", "content": "12+30="}]
    plain = client.chat.completions.create(model=NAME, messages=messages, max_tokens=6, temperature=0)
    assert plain.object == "chat.completion"
    assert plain.choices[0].message.role == "assistant"
    assert plain.usage.prompt_tokens == _tokens(tokenizer, render_plain(messages))

    chunks = list(
        client.chat.completions.create(
            model=NAME, messages=messages, max_tokens=6, temperature=0, stream=True
        )
    )
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text == plain.choices[0].message.content
    assert [c.choices[0].finish_reason for c in chunks if c.choices][-1] == plain.choices[0].finish_reason
    # Usage always rides on the last chunk, whose choices are empty, without stream_options.
    assert chunks[-1].choices == [] and chunks[-1].usage is not None
    assert chunks[-1].usage.model_dump() == plain.usage.model_dump()


def test_completion_stream_agrees(replicas, reference):
    client = replicas["standard"].client()
    chunks = list(
        client.completions.create(model=NAME, prompt=PROMPTS[0], max_tokens=8, temperature=0, stream=True)
    )
    assert "".join(c.choices[0].text for c in chunks if c.choices) == reference[PROMPTS[0]]
    assert chunks[-1].usage.completion_tokens > 0


def test_every_tier_gives_the_greedy_answer(replicas, reference):
    for tier in ("turbo", "batch"):
        client = replicas[tier].client()
        # Concurrent requests of different lengths: the batch tier runs them as one left-padded batch.
        with ThreadPoolExecutor(len(PROMPTS)) as pool:
            results = list(
                pool.map(
                    lambda p, c=client: c.completions.create(
                        model=NAME, prompt=p, max_tokens=8, temperature=0
                    ),
                    PROMPTS,
                )
            )
        assert {p: r.choices[0].text for p, r in zip(PROMPTS, results, strict=True)} == reference, tier
        streamed = list(
            client.chat.completions.create(
                model=NAME,
                messages=[{"role": "user", "content": "3+4="}],
                max_tokens=5,
                stream=True,
                temperature=0,
                extra_body={"ignore_eos": True},
            )
        )
        text = "".join(c.choices[0].delta.content or "" for c in streamed if c.choices)
        assert streamed[-1].usage.completion_tokens == 5 == len(text), tier


def test_sampling_n_seed_and_stop(replicas):
    for tier in ("standard", "batch"):
        client = replicas[tier].client()
        kwargs = dict(
            model=NAME,
            prompt="5+",
            max_tokens=12,
            temperature=1.5,
            n=3,
            seed=7,
            extra_body={"ignore_eos": True},
        )
        first = client.completions.create(**kwargs)
        again = client.completions.create(**kwargs)
        assert sorted(c.index for c in first.choices) == [0, 1, 2]
        assert [c.text for c in first.choices] == [c.text for c in again.choices], tier
        assert first.usage.completion_tokens == 36
        assert len({c.text for c in first.choices}) > 1, "n samples of one seed must differ"
        plain = dict(model=NAME, prompt="5+", max_tokens=12, temperature=0, extra_body={"ignore_eos": True})
        text = client.completions.create(**plain).choices[0].text
        stop = text[4:6]  # whatever the model writes, cut at the first place these two characters appear
        stopped = client.completions.create(**plain, stop=[stop, "never-written"])
        assert stopped.choices[0].text == text[: text.index(stop)], tier
        assert stopped.choices[0].finish_reason == "stop", tier


@pytest.mark.parametrize(
    ("body", "status", "param"),
    [
        ({"model": "nope", "messages": [{"role": "user", "content": "hi"}]}, 404, "model"),
        ({"messages": [{"role": "user", "content": "hi"}]}, 400, "model"),
        ({"model": NAME, "messages": []}, 400, "messages"),
        ({"model": NAME, "messages": "hi"}, 400, "messages"),
        ({"model": NAME, "messages": [{"role": "robot", "content": "hi"}]}, 400, "messages[0].role"),
        ({"model": NAME, "messages": [{"role": "user", "content": 5}]}, 400, "messages[0].content"),
        ({"model": NAME, "messages": [{"role": "user"}]}, 400, "messages[0].content"),
        (
            {"model": NAME, "messages": [{"role": "user", "content": "hi"}], "max_tokens": 100000},
            400,
            "max_tokens",
        ),
        ({"model": NAME, "messages": [{"role": "user", "content": "x" * 600}]}, 400, "messages"),
        (
            {"model": NAME, "messages": [{"role": "user", "content": "hi"}], "temperature": 9},
            400,
            "temperature",
        ),
        (
            {"model": NAME, "messages": [{"role": "user", "content": "hi"}], "max_tokens": 0},
            400,
            "max_tokens",
        ),
        ({"model": NAME, "messages": [{"role": "user", "content": "hi"}], "n": "2"}, 400, "n"),
        ({"model": NAME, "messages": [{"role": "user", "content": "hi"}], "stop": [1]}, 400, "stop"),
        ({"model": NAME, "messages": [{"role": "user", "content": "hi"}], "logprobs": True}, 400, "logprobs"),
    ],
)
def test_bad_chat_requests_get_openai_errors(replicas, body, status, param):
    response = httpx.post(replicas["batch"].url + "/v1/chat/completions", json=body, timeout=30, headers=AUTH)
    assert response.status_code == status, response.text
    error = response.json()["error"]
    assert error["param"] == param and error["message"] and error["type"]


def test_bad_completion_requests_and_raw_http(replicas):
    url = replicas["batch"].url
    oversized = httpx.post(
        url + "/v1/completions", json={"model": NAME, "prompt": "1", "max_tokens": 512}, headers=AUTH
    )
    assert oversized.status_code == 400 and oversized.json()["error"]["code"] == "context_length_exceeded"
    assert "512" in oversized.json()["error"]["message"]
    for content, param in [(b"{not json", None), (b"[1, 2]", None)]:
        response = httpx.post(url + "/v1/completions", content=content, headers=AUTH)
        assert response.status_code == 400 and response.json()["error"]["param"] == param
    response = httpx.post(url + "/v1/completions", json={"model": NAME, "prompt": [10**9]}, headers=AUTH)
    assert response.status_code == 400 and response.json()["error"]["param"] == "prompt"
    assert httpx.get(url + "/v1/nothing", headers=AUTH).json()["error"]["code"] == "not_found"
    assert httpx.get(url + "/v1/completions", headers=AUTH).status_code == 405
    # The openai client surfaces them as its own typed errors.
    client = replicas["batch"].client()
    with pytest.raises(openai.NotFoundError) as caught:
        client.completions.create(model="gpt-4", prompt="hi")
    assert caught.value.code == "model_not_found"
    with pytest.raises(openai.BadRequestError) as caught:
        client.chat.completions.create(
            model=NAME, messages=[{"role": "user", "content": "hi"}], max_tokens=10**6
        )
    assert caught.value.code == "context_length_exceeded"


def test_concurrency_limit_answers_429_then_recovers(replicas):
    replica = replicas["standard"]  # --max-concurrency 1
    client = replica.client()
    # 16 sequences of 400 tokens hold the only slot for many seconds; the role chunk proves it is held.
    stream = client.chat.completions.create(
        model=NAME,
        messages=[{"role": "user", "content": "1+1="}],
        max_tokens=400,
        n=16,
        stream=True,
        temperature=1.0,
        extra_body={"ignore_eos": True},
    )
    first = next(iter(stream))
    assert first.choices[0].delta.role == "assistant"
    with pytest.raises(openai.RateLimitError) as caught:
        client.completions.create(model=NAME, prompt="1+1=", max_tokens=2)
    assert caught.value.status_code == 429 and caught.value.code == "rate_limit_exceeded"
    stream.close()  # the client goes away: the server cancels the generation and frees the slot
    deadline = time.monotonic() + 30
    while True:
        try:
            result = client.completions.create(model=NAME, prompt="1+1=", max_tokens=2)
            break
        except openai.RateLimitError:
            assert time.monotonic() < deadline, "the slot was not released after the client left"
            time.sleep(0.2)
    assert result.usage.prompt_tokens == 4
    assert json.loads(httpx.get(replica.url + "/health", headers=AUTH).text)["requests_held"] == 0


def test_cli_refuses_a_folder_that_is_not_a_model(tmp_path):
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "gpu_jobs.serving",
            "--model",
            str(tmp_path),
            "--tier",
            "standard",
            "--port",
            "1",
            "--served-name",
            NAME,
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2 and "not a model folder" in done.stderr
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "gpu_jobs.serving",
            "--model",
            str(tmp_path),
            "--tier",
            "fastest",
            "--port",
            "1",
            "--served-name",
            NAME,
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2 and "fastest" in done.stderr


def test_cli_refuses_to_serve_without_a_credential(model_dir):
    env = {name: value for name, value in os.environ.items() if name != CREDENTIAL_ENV}
    argv = [sys.executable, "-m", "gpu_jobs.serving", "--model", str(model_dir), "--tier", "standard"]
    for credential in (None, "short"):
        if credential is not None:
            env[CREDENTIAL_ENV] = credential
        done = subprocess.run(
            [*argv, "--port", "1", "--served-name", NAME],
            cwd=ROOT,
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert done.returncode == 2 and CREDENTIAL_ENV in done.stderr and "32 characters" in done.stderr
