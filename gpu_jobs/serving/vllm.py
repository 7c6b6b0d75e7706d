"""The command line of vLLM's OpenAI-compatible server for a model folder and a tier (GPU hosts).

vLLM serves the same ``/v1/completions`` and ``/v1/chat/completions`` shapes as the CPU server here;
``--enable-force-include-usage`` makes every response, streamed or not, carry ``usage`` (the platform meters
from it), and ``--generation-config vllm`` makes sampling defaults OpenAI's rather than the checkpoint's, as
on the CPU server. ``--enable-prefix-caching``, on every tier, reuses the KV cache of a prompt prefix that
requests share. vLLM is not installed in the CPU set (requirements/gpu.txt has it), so this module only
builds the argv; the worker on a GPU host runs it.

Tiers:

- ``standard``: ``--max-num-seqs`` = the deployment's maximum concurrency.
- ``turbo``: speculative decoding. Without a draft model, n-gram prompt lookup (``method: ngram``), which
  pays off on output that copies its input; with ``draft_model``, a smaller model of the same tokenizer
  (``method: draft_model``). Fewer sequences at once, for latency.
- ``batch``: large batches for throughput: ``--max-num-seqs`` 256 and a large token budget per step.
"""

from __future__ import annotations

import json
from pathlib import Path

from gpu_jobs.serving.chat_template import PLAIN_JINJA, folder_has_chat_template

VLLM_TIERS = ("standard", "turbo", "batch")
BATCH_MAX_NUM_SEQS = 256
BATCH_MAX_BATCHED_TOKENS = 16384
NUM_SPECULATIVE_TOKENS = 5
NGRAM_PROMPT_LOOKUP_MAX = 4
NGRAM_PROMPT_LOOKUP_MIN = 2


def vllm_serve_argv(
    model_dir: Path | str,
    *,
    tier: str,
    served_name: str,
    port: int,
    host: str = "127.0.0.1",
    max_concurrency: int = 16,
    max_model_len: int | None = None,
    draft_model: Path | str | None = None,
    num_speculative_tokens: int = NUM_SPECULATIVE_TOKENS,
    gpu_memory_utilization: float | None = None,
    executable: str = "vllm",
) -> list[str]:
    """The argv of ``vllm serve`` for ``model_dir`` at ``tier``, listening on ``host:port``.

    Preconditions: ``model_dir`` is a Hugging Face model folder on the GPU host; ``draft_model`` (turbo
    only) shares its tokenizer. Raises ValueError on a tier, port or limit that vLLM would refuse.
    """
    if tier not in VLLM_TIERS:
        raise ValueError(f"tier must be one of {', '.join(VLLM_TIERS)}, got {tier!r}")
    if not 0 < int(port) < 65536:
        raise ValueError(f"port must be in 1..65535, got {port}")
    if max_concurrency < 1:
        raise ValueError(f"max_concurrency must be at least 1, got {max_concurrency}")
    if draft_model is not None and tier != "turbo":
        raise ValueError("a draft model is used by the turbo tier only")
    if not served_name:
        raise ValueError("served_name is required")
    argv = [
        executable,
        "serve",
        str(model_dir),
        "--host",
        host,
        "--port",
        str(int(port)),
        "--served-model-name",
        served_name,
        "--enable-force-include-usage",
        "--generation-config",
        "vllm",
        # Requests sharing a prompt prefix (a system prompt, a document) reuse its KV blocks; said outright
        # rather than left to the version's default, as the CPU server does the same (engine/prefix.py).
        "--enable-prefix-caching",
    ]
    if folder_has_chat_template(model_dir) is False:
        # vLLM refuses chats for a model without a template; this one answers them as the CPU server does.
        argv += ["--chat-template", PLAIN_JINJA]
    if max_model_len is not None:
        if max_model_len < 1:
            raise ValueError(f"max_model_len must be at least 1, got {max_model_len}")
        argv += ["--max-model-len", str(max_model_len)]
    if gpu_memory_utilization is not None:
        if not 0 < gpu_memory_utilization <= 1:
            raise ValueError(f"gpu_memory_utilization must be in (0, 1], got {gpu_memory_utilization}")
        argv += ["--gpu-memory-utilization", str(gpu_memory_utilization)]
    if tier == "batch":
        argv += [
            "--max-num-seqs",
            str(max(BATCH_MAX_NUM_SEQS, max_concurrency)),
            "--max-num-batched-tokens",
            str(BATCH_MAX_BATCHED_TOKENS),
        ]
        return argv
    argv += ["--max-num-seqs", str(max_concurrency)]
    if tier == "turbo":
        if draft_model is not None:
            speculative = {
                "method": "draft_model",
                "model": str(draft_model),
                "num_speculative_tokens": num_speculative_tokens,
            }
        else:
            speculative = {
                "method": "ngram",
                "num_speculative_tokens": num_speculative_tokens,
                "prompt_lookup_max": NGRAM_PROMPT_LOOKUP_MAX,
                "prompt_lookup_min": NGRAM_PROMPT_LOOKUP_MIN,
            }
        argv += ["--speculative-config", json.dumps(speculative, separators=(",", ":"))]
    return argv
