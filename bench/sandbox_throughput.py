"""Checks per second through the python_tests verifier: each sandbox backend cold and warm, against a baseline.

A check is one code task (bench/tasks/code_tasks.py: a function, its planted solution, its asserts) run by the
real verifier (code_judge: a judge, a zygote and a runner process) in one sandbox run; warm pools also run the
same tasks as `call` tests and as stdin/stdout (`io`) tests. Printed side by side, in the same run:
  baseline    a fresh, unsandboxed `python3 main.py` subprocess per check (2 at a time)
  bwrap cold  a fresh bubblewrap sandbox per check (2 at a time)
  bwrap warm  a warm pool of 2 sandboxes, each a fork server: a check costs a fork
  docker cold a fresh container per check (on a subset: ~0.5 s each), docker warm a pool of 2 containers
and each warm pool's latency for a trivial program (p50/p90 over sequential runs). Each warm pool also runs
code_tests on every toolchain profile: the 42 hand-written problems' reference programs in C, C++ and
JavaScript (gpu_jobs/program_tasks.py), a check being one problem compiled once and run on all its tests; the
code tasks' asserts in the python-science profile (numpy preloaded); and the svg_shapes (render) and
sheet_formulas (spreadsheet, LibreOffice) packs' references. The docker rows need the
Podman Docker API and the image (`make sandbox-image`); they are left out, with the reason, without them.
Before them, HumanEval (bench/sandbox_scaling.py): its 164 canonical and 164 broken solutions in one batch through
the verifier on each warm pool, beside the same checks exec'd in one process, as a ratio, and beside the CPU that
a bare interpreter's fork and exit costs on this host (a runner is forked per check: no check outruns it); then
checks/s by batch size (1, 8, 64, 512) and pool size (1, 2, 4), plotted to docs/figures/sandbox_scaling.png.
Goals on 2 cores: warm >= 500 HumanEval checks/s; trivial warm p50 < 10 ms.

Run: .venv/bin/python bench/sandbox_throughput.py [--rounds N] [--part all|tasks|humaneval|scaling]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "platform")]

from bench import sandbox_scaling  # noqa: E402
from bench.tasks.code_tasks import FORMS, rows  # noqa: E402
from gpu_jobs.document_tasks import TASKS, document_rows  # noqa: E402
from gpu_jobs.program_tasks import LANGUAGES, problems, program_rows  # noqa: E402
from gpu_jobs.program_tasks import spec as program_spec  # noqa: E402
from gpu_jobs.rewards import build_scorer  # noqa: E402
from sandboxes.backends.bwrap import PYTHON_FLAGS, BwrapBackend  # noqa: E402
from sandboxes.backends.docker import DockerBackend  # noqa: E402
from sandboxes.types import RunRequest, RunResult, Status  # noqa: E402

WORKERS = 2
# A python-science runner's own verdict is not taken (numpy holds ctypes): tasks whose asserts need the program's
# objects fail there by design, with this reason.
OBJECTS = "needs the program's objects"


class UnsandboxedSubprocess:
    """The baseline: each request in a fresh temporary directory and a fresh interpreter, no isolation."""

    name = "baseline"

    def run(self, request: RunRequest) -> RunResult:
        started = time.monotonic()
        with tempfile.TemporaryDirectory() as workdir:
            for name, content in request.files.items():
                path = Path(workdir, name)
                path.parent.mkdir(parents=True, exist_ok=True)
                path.write_text(content)
            Path(workdir, "main.py").write_text(request.code)
            proc = subprocess.run(
                ["/usr/bin/python3", *PYTHON_FLAGS, "main.py"],
                cwd=workdir,
                input=request.stdin,
                capture_output=True,
                text=True,
                timeout=request.limits.wall_s,
                env={"PATH": "/usr/bin:/bin"},
            )
        status = Status.OK if proc.returncode == 0 else Status.FAILED
        return RunResult(status, proc.returncode, proc.stdout, proc.stderr, time.monotonic() - started)

    def run_many(self, requests: list[RunRequest]) -> list[RunResult]:
        with ThreadPoolExecutor(max_workers=WORKERS) as pool:
            return list(pool.map(self.run, requests))


def checks_per_second(backend, task_rows: list[tuple[dict, str]], *, rounds: int) -> tuple[float, int]:
    """Score every task `rounds` times in batches of one round; returns (checks/s, checks that failed)."""
    # tokens: an io task's printed float (2.0) must equal the assert's int (2), as == makes them in Python.
    spec = {"type": "python_tests", "tests_field": "tests", "io_compare": "tokens"}
    scorer = build_scorer(spec, sandbox=backend)
    dataset = [row for row, _ in task_rows]
    completions = [completion for _, completion in task_rows]
    failed = 0
    started = time.perf_counter()
    for _ in range(rounds):
        results = scorer.score_batch(dataset, completions)
        failed += sum(1 for result in results if result.score != 1.0)
    return rounds * len(task_rows) / (time.perf_counter() - started), failed


def profile_rates(backend) -> list[tuple[str, float, int, int]]:
    """code_tests on each toolchain profile: the hand-written problems' references (gpu_jobs/program_tasks.py),
    each compiled (C, C++) once and run on all its tests; (label, checks/s, checks, not 1.0) per language."""
    figures = []
    for language in LANGUAGES:
        problem_rows = program_rows(language=language, size=len(problems()), seed=0, difficulty=None)
        scorer = build_scorer(program_spec(language), sandbox=backend)
        scorer.score_batch(
            problem_rows[:2], [row["answer"] for row in problem_rows[:2]]
        )  # the profile's pool
        started = time.perf_counter()
        results = scorer.score_batch(problem_rows, [row["answer"] for row in problem_rows])
        rate = len(results) / (time.perf_counter() - started)
        failed = sum(1 for result in results if result.score != 1.0)
        figures.append((f"code_tests {language}", rate, len(results), failed))
    # python-science: the code tasks' asserts with numpy preloaded; render and spreadsheet: their packs.
    spec = {"type": "python_tests", "tests_field": "tests", "io_compare": "tokens", "libraries": ["numpy"]}
    task_rows = rows()
    rate, count, failed = _rate(
        spec, backend, [r for r, _ in task_rows], [c for _, c in task_rows], by_design=OBJECTS
    )
    figures.append((f"python-science (numpy; {failed[1]} need objects)", rate, count, failed[0]))
    for task in ("svg_shapes", "sheet_formulas"):
        pack = [
            row for level in range(6) for row in document_rows(task=task, size=8, seed=0, difficulty=level)
        ]
        figures.append(
            (
                f"{TASKS[task].spec['type']} ({task})",
                *_rate(TASKS[task].spec, backend, pack, [r["answer"] for r in pack]),
            )
        )
    return figures


def _rate(spec: dict, backend, dataset: list[dict], completions: list[str], by_design: str = ""):
    """(checks/s, checks, not 1.0) of one batch after a warm-up of two; with `by_design`, not 1.0 is (others,
    those whose reason holds it)."""
    scorer = build_scorer(spec, sandbox=backend)
    scorer.score_batch(dataset[:2], completions[:2])
    started = time.perf_counter()
    results = scorer.score_batch(dataset, completions)
    rate = len(results) / (time.perf_counter() - started)
    failed = [result for result in results if result.score < 1.0 - 1e-6]
    if not by_design:
        return rate, len(results), len(failed)
    expected = sum(1 for result in failed if by_design in result.reason)
    return rate, len(results), (len(failed) - expected, expected)


def trivial_latency_ms(backend, *, runs: int) -> tuple[float, float]:
    request = RunRequest(language="python", code="pass")
    timings = []
    for _ in range(runs):
        started = time.perf_counter()
        result = backend.run(request)
        timings.append((time.perf_counter() - started) * 1000)
        assert result.status == Status.OK, result
    timings.sort()
    return statistics.median(timings), timings[int(len(timings) * 0.9)]


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--rounds", type=int, default=5, help="times each task is checked on the warm pool")
    parser.add_argument(
        "--part",
        choices=("all", "tasks", "humaneval", "scaling"),
        default="all",
        help="tasks: the code tasks and profiles; humaneval: HumanEval's 328 checks against exec in one process; "
        "scaling: checks/s by batch and pool size, plotted (docs/figures/sandbox_scaling.png)",
    )
    args = parser.parse_args()
    exec_per_second = 0.0
    if args.part in ("all", "humaneval", "scaling"):
        exec_per_second = humaneval_figures()
    if args.part in ("all", "scaling"):
        scaling_figures(exec_per_second)
    if args.part in ("all", "tasks"):
        task_figures(args.rounds)


def humaneval_figures() -> float:
    """HumanEval through the verifier on each warm backend, and exec'd in this process; the exec rate."""
    exec_per_second, wrong = sandbox_scaling.exec_rate()
    print(f"HumanEval, 164 canonical + 164 broken, one batch of 328; load average {_load()}")
    print(
        f"  exec in one process (unsandboxed, 1 core): {exec_per_second:.0f} checks/s, {wrong} wrong verdicts"
    )
    floor = sandbox_scaling.fork_floor()
    print(
        f"  fork and exit of a bare interpreter (a runner's floor): {floor['parent_ms']:.2f} ms of CPU in the "
        f"parent, {floor['child_ms']:.2f} in the child: at most {floor['ceiling']:.0f} forks/s on "
        f"{os.cpu_count()} cores"
    )
    backends = [("bwrap", lambda: BwrapBackend(pool_size=WORKERS, recycle_after=5000))]
    docker_problem = DockerBackend().engine_problem()
    if docker_problem:
        print(f"  docker left out: {docker_problem}")
    else:
        backends.append(("docker", lambda: DockerBackend(pool_size=WORKERS, recycle_after=5000)))
    for label, make in backends:
        backend = make()
        backend.pool.warm_up()
        rate, wrong = sandbox_scaling.verifier_rate(backend)
        (backend.close if isinstance(backend, DockerBackend) else backend.pool.close)()
        print(
            f"  python_tests, {label} warm pool of {WORKERS}: {rate:.0f} checks/s, {wrong} wrong verdicts; "
            f"{rate / exec_per_second:.2f}x exec in one process ({rate / WORKERS / exec_per_second:.2f}x per core)"
        )
    return exec_per_second


def scaling_figures(exec_per_second: float) -> None:
    curves = sandbox_scaling.scaling(lambda size: BwrapBackend(pool_size=size, recycle_after=5000))
    sizes = sandbox_scaling.BATCH_SIZES
    print(f"\nHumanEval checks/s on bwrap by batch size (columns) and warm pool size (rows); load {_load()}")
    print(f"{'pool':<6}" + "".join(f"{size:>9}" for size in sizes))
    for pool_size, by_size in curves.items():
        print(f"{pool_size:<6}" + "".join(f"{by_size[size]:>9.0f}" for size in sizes))
    if exec_per_second:
        print(f"plot: {sandbox_scaling.plot(curves, exec_per_second=exec_per_second)}")


def _load() -> str:
    return ", ".join(f"{x:.2f}" for x in os.getloadavg())


def task_figures(rounds: int) -> None:
    task_rows = rows()
    print(
        f"\n{len(task_rows)} code tasks; {os.cpu_count()} CPUs; {WORKERS} checks at a time; load average {_load()}"
    )

    runs = [
        ("baseline (unsandboxed subprocess)", UnsandboxedSubprocess(), task_rows, 1),
        ("bwrap cold", BwrapBackend(pool_size=0, workers=WORKERS), task_rows, 1),
        ("bwrap warm", BwrapBackend(pool_size=WORKERS, recycle_after=200), task_rows, rounds),
    ]
    docker_problem = DockerBackend().engine_problem()
    if docker_problem:
        print(f"docker rows left out: {docker_problem}")
    else:
        runs += [
            ("docker cold (20 tasks)", DockerBackend(pool_size=0, workers=WORKERS), task_rows[:20], 1),
            ("docker warm", DockerBackend(pool_size=WORKERS, recycle_after=200), task_rows, rounds),
        ]
    figures, latencies = [], []
    for label, backend, subset, rounds in runs:
        pool = getattr(backend, "pool", None)
        if pool is not None:
            started = time.perf_counter()
            pool.warm_up()
            print(f"{label}: {WORKERS} sandboxes started in {(time.perf_counter() - started) * 1000:.0f} ms")
            checks_per_second(backend, subset[:10], rounds=1)  # first-touch costs out of the way
        rate, failed = checks_per_second(backend, subset, rounds=rounds)
        figures.append((f"{label}, assert", rate, rounds * len(subset), failed))
        if pool is not None:
            # The same tasks as call tests and as stdin/stdout tests (bench/tasks/code_tasks.py), warm only.
            for form in FORMS[1:]:
                rate, failed = checks_per_second(backend, rows(form), rounds=rounds)
                figures.append((f"{label}, {form}", rate, rounds * len(subset), failed))
        if pool is not None:
            figures += [(f"{label}, {name}", *rest) for name, *rest in profile_rates(backend)]
            p50, p90 = trivial_latency_ms(backend, runs=300)
            stats = pool.stats
            latencies.append(
                f"{label}, trivial program: p50 {p50:.2f} ms, p90 {p90:.2f} ms (300 sequential runs); "
                f"{stats.warm_runs} warm runs, {stats.started} sandboxes started, {stats.recycled} recycled, "
                f"{stats.discarded} discarded"
            )
            (backend.close if isinstance(backend, DockerBackend) else pool.close)()

    print(f"\n{'backend, test form or profile':<44}{'checks/s':>10}{'checks':>8}{'not 1.0':>9}")
    for label, rate, count, failed in figures:
        print(f"{label:<44}{rate:>10.1f}{count:>8}{failed:>9}")
    base = figures[0][1]
    python_rows = [
        (label, rate) for label, rate, *_ in figures[1:] if label.endswith(("assert", "call", "io"))
    ]
    print("\n" + "; ".join(f"{label} / baseline: {rate / base:.2f}x" for label, rate in python_rows))
    for line in latencies:
        print(line)
    print("load average at the end: " + ", ".join(f"{x:.2f}" for x in os.getloadavg()))
    if any(failed for *_, failed in figures):
        sys.exit("some planted solutions did not score 1.0: the figures above are not comparable")


if __name__ == "__main__":
    main()
