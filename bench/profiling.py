"""What difficulty profiling costs and what it keeps: the tiny model's pass@k on held-out sums.

    .venv/bin/python bench/profiling.py                 # 256 prompts, k = 8
    .venv/bin/python bench/profiling.py --prompts 512 --k 4

Prints the profiling time (wall and CPU of this process), the prompts kept and dropped (always solved,
never solved), the mean pass rate and pass@k, and for comparison the share of GRPO groups that would carry
a learning signal (pass rate strictly between 0 and 1) on all prompts versus on the kept ones, measured with
a second, independent sample: the kept prompts are the ones where training has something to learn.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--prompts", type=int, default=256)
    parser.add_argument("--k", type=int, default=8)
    parser.add_argument("--store", default=os.environ.get("ANNEAL_MODEL_STORE", str(ROOT / "var" / "models")))
    args = parser.parse_args()

    from transformers import AutoModelForCausalLM, AutoTokenizer

    from gpu_jobs.addition import addition_rows
    from gpu_jobs.domains import DomainScorer
    from gpu_jobs.profiling import profile_rows
    from gpu_jobs.rewards import build_scorer
    from gpu_jobs.tiny_model import ensure_tiny_model

    folder = ensure_tiny_model(Path(args.store))
    model = AutoModelForCausalLM.from_pretrained(folder)
    tokenizer = AutoTokenizer.from_pretrained(folder)
    rows = addition_rows(n=args.prompts, seed=0, split="test")
    scorers = {"exact": DomainScorer(build_scorer({"type": "exact_match"}), None)}

    def run(seed: int):
        return profile_rows(
            model=model,
            tokenizer=tokenizer,
            rows=rows,
            scorers=scorers,
            weights={"exact": 1.0},
            k=args.k,
            max_new_tokens=4,
            temperature=1.0,
            seed=seed,
        )

    wall, cpu = time.perf_counter(), time.process_time()
    profile = run(seed=0)
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    summary = profile.summary(rows)
    print(f"profiled {summary['profiled']} prompts x k={args.k} in {wall:.1f} s wall, {cpu:.1f} s CPU")
    print(
        f"kept {summary['kept']}, dropped {summary['dropped_always_solved']} always solved and "
        f"{summary['dropped_never_solved']} never solved; mean pass rate {summary['mean_pass_rate']:.3f}, "
        f"pass@{args.k} {summary['pass_at_k']:.3f}"
    )
    # A second, independent sample: how many groups give GRPO a signal, over all prompts and the kept ones.
    again = dict(zip(profile.profiled, run(seed=1).rates, strict=True))
    kept = set(profile.order)
    for label, chosen in (("all prompts", list(again)), ("kept prompts", [i for i in again if i in kept])):
        share = sum(0 < again[i] < 1 for i in chosen) / max(1, len(chosen))
        print(f"groups with signal on a fresh sample, {label}: {share:.1%} of {len(chosen)}")


if __name__ == "__main__":
    main()
