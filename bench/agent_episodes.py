"""Agent episodes on the repo-fix task pack with a scripted policy: throughput, where the time goes, latency.

Each episode: run_tests, apply_patch (the task's fix), run_tests, finish, then the final-state verifier, all in
one persistent sandbox session (sandboxes/session.py). Printed:
  episodes per minute, sequential, with 2 episodes at a time (2 cores), and sequential with the sessions
  started ahead by a SessionPool (what training does between steps);
  the share of an episode's wall time spent in the sandbox (tool calls and verification, round trips
  included), in generation (the scripted policy's turns: near zero; a model's generation replaces it), in
  starting the session, and the rest (parsing, bookkeeping);
  sandbox round-trip latency per tool call (p50/p90 by tool) on a warm session, and for a trivial call
  (`true`) against the baseline of a fresh (cold) bubblewrap sandbox per call, which is what a stateless
  design would pay. Goal: p50 < 20 ms per tool call on a warm sandbox.

Run: .venv/bin/python bench/agent_episodes.py [--tasks N] [--latency-calls N]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections import defaultdict
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "platform")]

from gpu_jobs.agent.episode import ScriptedPolicy, run_episode  # noqa: E402
from gpu_jobs.agent.spec import validate_environment  # noqa: E402
from gpu_jobs.agent.taskpack import pack_rows  # noqa: E402
from gpu_jobs.agent.tools import ToolCall  # noqa: E402
from sandboxes.backends.bwrap import BwrapBackend  # noqa: E402
from sandboxes.session import SandboxSession, SessionPool  # noqa: E402
from sandboxes.types import RunRequest  # noqa: E402

SPEC = validate_environment({"max_turns": 8})


def policy(row: dict) -> ScriptedPolicy:
    return ScriptedPolicy(
        [ToolCall("run_tests"), ToolCall("apply_patch", {"diff": row["fix_diff"]}), ToolCall("run_tests")]
    )


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def episodes(rows: list[dict], workers: int, sessions: SessionPool | None = None) -> tuple[float, list]:
    started = time.monotonic()
    with ThreadPoolExecutor(max_workers=workers) as pool:
        results = list(pool.map(lambda row: run_episode(row, SPEC, policy(row), pool=sessions), rows))
    return time.monotonic() - started, results


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--tasks", type=int, default=0, help="first N tasks of the pack (0: all)")
    parser.add_argument("--latency-calls", type=int, default=100)
    args = parser.parse_args()
    rows = pack_rows(limit=args.tasks or None)

    seconds, results = episodes(rows, workers=1)
    solved = sum(r.reward == 1.0 for r in results)
    print(f"task pack: {len(rows)} tasks, scripted fix solved {solved}/{len(rows)}")
    print(
        f"sequential: {len(rows) / seconds * 60:.0f} episodes/min ({seconds / len(rows) * 1000:.0f} ms each)"
    )
    total = sum(r.seconds for r in results)
    sandbox = sum(r.sandbox_s for r in results)
    generation = sum(r.generation_s for r in results)
    start = sum(r.start_s for r in results)
    rest = total - sandbox - generation - start
    print(
        f"time share: sandbox calls {sandbox / total:.0%}, session start {start / total:.0%}, "
        f"generation (scripted) {generation / total:.1%}, bookkeeping {rest / total:.0%}"
    )
    by_tool: dict[str, list[float]] = defaultdict(list)
    for result in results:
        for step in result.steps:
            if step.action and step.action["name"] != "finish":
                by_tool[step.action["name"]].append(step.sandbox_s * 1000)
    for name, values in sorted(by_tool.items()):
        print(
            f"  {name:12s} p50 {percentile(values, 0.5):6.1f} ms  p90 {percentile(values, 0.9):6.1f} ms  (n={len(values)})"
        )

    seconds2, _ = episodes(rows, workers=2)
    print(f"2 at a time: {len(rows) / seconds2 * 60:.0f} episodes/min")
    sessions = SessionPool(size=2)
    time.sleep(1.0)  # let the pool start its first sandboxes, as it would between training steps
    seconds3, pooled = episodes(rows, workers=1, sessions=sessions)
    sessions.close()
    start = sum(r.start_s for r in pooled) / len(pooled)
    print(
        f"sequential, sessions pre-started (SessionPool of 2): {len(rows) / seconds3 * 60:.0f} episodes/min, "
        f"session start {start * 1000:.0f} ms each"
    )

    files = rows[0]["files"]
    warm = []
    with SandboxSession(files=files) as session:
        print(f"session start (sandbox + files): {session.stats.started_s * 1000:.0f} ms")
        for _ in range(args.latency_calls):
            t0 = time.perf_counter()
            session.run("shell", "true")
            warm.append((time.perf_counter() - t0) * 1000)
    cold_backend = BwrapBackend(pool_size=0)
    cold = []
    for _ in range(max(10, args.latency_calls // 5)):
        t0 = time.perf_counter()
        cold_backend.run(RunRequest(language="shell", code="true", files=dict(files)))
        cold.append((time.perf_counter() - t0) * 1000)
    print(
        f"trivial tool call round trip: warm session p50 {statistics.median(warm):.1f} ms "
        f"(p90 {percentile(warm, 0.9):.1f}); baseline cold sandbox per call p50 {statistics.median(cold):.1f} ms "
        f"({statistics.median(cold) / statistics.median(warm):.1f}x); goal p50 < 20 ms"
    )


if __name__ == "__main__":
    main()
