"""Does multi-turn GRPO teach an agent the habit the articles describe, on repositories it never trained on?

Through the real stack (tests/stack.py), as a user would over REST: the repo-fix pack's first --train-tasks
tasks as the training set and the next --held-tasks as the held-out set (POST /datasets/packs/agent with
offset and limit), an agent job on the tiny model with the supervised warm-up (on the pack's remaining tasks
only: neither trained nor judged on) and the job's own held-out evaluation every --eval-steps: one greedy
episode per held-out task, or --eval-episodes sampled ones (gpu_jobs.agent.evaluation). Step 0's evaluation
is the warm-up alone; the last is after GRPO. Per seed and over seeds (mean, min-max) it prints the share of
held-out tasks solved, of episodes that ran the tests after their last edit (or, with no edit, at all) and
then finished, of episodes that changed the code, of those that did both (changed the code, then tested and
finished), of turns with a valid tool call, and the mean turns, before and after.

    .venv/bin/python bench/agent_learning.py                       # 2 seeds, 30 GRPO steps each
    .venv/bin/python bench/agent_learning.py --seeds 0,1,2 --steps 60
    .venv/bin/python bench/agent_learning.py --habit 0.2           # reward the habit: tests + 0.2 * tested
    .venv/bin/python bench/agent_learning.py --habit 0.5 --habit-on edited_then_tested
    .venv/bin/python bench/agent_learning.py --beta 0.04           # a KL penalty against the warmed-up model
    .venv/bin/python bench/agent_learning.py --max-turns 8         # room to retry after a wrong edit
    .venv/bin/python bench/agent_learning.py --mutants 8 --warmup-mutants 8   # more bugs per repository
    .venv/bin/python bench/agent_learning.py --held-tasks 16 --eval-episodes 4   # a finer held-out measure
    .venv/bin/python bench/agent_learning.py --held-mutants 3   # 3 more bugs per held-out repository
    .venv/bin/python bench/agent_learning.py --guided-calls     # no call closes before its arguments

The reward is the environment's (tests + 0.1 * format) unless --habit gives the habit a weight
(environment formula "tests + 0.1 * format + H * tested", or "... + H * edited * tested" with
--habit-on edited_then_tested, which does not pay an episode that tests and finishes without an edit).

--model smollm2 runs the same with SmolLM2-135M-Instruct (imported into $ANNEAL_MODEL_STORE or var/models on
first use): LoRA (--lora-rank, default 16) after a full-weight warm-up at --warmup-lr (default 5e-5), in its
own chat turns with the tool instructions in the system message, the environment's default limits (6 turns
of 96 tokens, 1024 tokens of context) but 30 minutes of wall time per episode (its batched turns are slow on
a CPU), with activation checkpointing on. Meant for a GPU host: on 2 CPU cores its warm-up alone takes tens of
minutes. On a GPU host without the platform, `scripts/gpu_smoke.py --agent "OPTIONS"` runs the same job (this
bench's OPTIONS) in one process and prints the same report.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "platform")]

from bench.learning_smollm import run_job  # noqa: E402
from gpu_jobs.agent.spec import TINY_MODEL_ENVIRONMENT  # noqa: E402
from gpu_jobs.smollm import SMOLLM2_NAME, ensure_smollm2  # noqa: E402

SMOLLM2_EPISODE_S = 1800.0
TOKENS_PER_TURN = 64  # the environment's default budget: 384 tokens over 6 turns
HABITS = {
    "solved": "held-out tasks solved",
    "tests": "tests passing at the end",  # moves before solved does: an edit that fixes some tests
    "tested_before_finish": "ran the tests before finishing",
    "edited": "changed the code",
    "edited_then_tested": "changed code, tested, finished",
    "valid_calls": "turns with a valid tool call",
    "turns": "turns per episode",
}


def parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--train-tasks", type=int, default=12)
    parser.add_argument("--held-tasks", type=int, default=8)
    parser.add_argument("--steps", type=int, default=30, help="GRPO steps after the warm-up")
    parser.add_argument("--eval-steps", type=int, default=10)
    parser.add_argument("--prompts", type=int, default=2, help="tasks per step")
    parser.add_argument("--generations", type=int, default=4, help="episodes per task (a GRPO group)")
    parser.add_argument("--lr", type=float, default=1e-4)
    parser.add_argument("--temperature", type=float, default=0.7)
    parser.add_argument("--warmup-steps", type=int, default=200)
    parser.add_argument("--model", choices=("tiny", "smollm2"), default="tiny")
    parser.add_argument("--lora-rank", type=int, default=None, help="default: 16 for smollm2, 0 for tiny")
    parser.add_argument("--warmup-lr", type=float, default=None, help="default: 2e-3 tiny, 5e-5 smollm2")
    parser.add_argument("--habit", type=float, default=0.0, help="reward weight of the habit (--habit-on)")
    parser.add_argument(
        "--habit-on", choices=("tested", "edited_then_tested"), default="tested",
        help="what --habit pays: 'tested' (also an episode that tests and finishes without an edit) or "
        "'edited_then_tested' (edited * tested: only after an edit that applied)",
    )  # fmt: skip
    parser.add_argument("--beta", type=float, default=0.0, help="KL penalty against the warmed-up model")
    parser.add_argument(
        "--max-turns", type=int, default=None,
        help="model turns per episode (environment.max_turns, default the environment's), the episode's token "
        "budget scaled with it (64 tokens a turn, as the default 6 turns of 384)",
    )  # fmt: skip
    parser.add_argument(
        "--mutants", type=mutant_count, default=0,
        help="per training repository, this many more of its bugs as training tasks (the pack's 'mutants')",
    )  # fmt: skip
    parser.add_argument(
        "--warmup-mutants", type=mutant_count, default=0,
        help="per warm-up repository, this many more of its bugs traced (environment.warmup_mutants)",
    )  # fmt: skip
    parser.add_argument(
        "--held-mutants", type=mutant_count, default=0,
        help="per held-out repository, this many more of its bugs as held-out tasks: a finer held-out measure "
        "on repositories still never trained on",
    )  # fmt: skip
    parser.add_argument(
        "--guided-calls", action="store_true",
        help="environment.guided_calls: no token may close a tool call before its required arguments",
    )  # fmt: skip
    parser.add_argument("--seeds", type=seed_list, default="0,1", help="comma-separated, one job each")
    parser.add_argument(
        "--eval-episodes", type=int, default=1,
        help="held-out episodes per task: 1 greedy, more sampled at --temperature (environment.eval_episodes)",
    )  # fmt: skip
    parser.add_argument(
        "--held-out-episodes", type=Path, default=None, metavar="FOLDER",
        help="write each seed's held-out episodes (turns, final tests, parts) to FOLDER/seed-<n>.json",
    )  # fmt: skip
    return parser


def write_held_out_episodes(folder: Path, seed: int, events: list[dict]) -> Path:
    """The job's held-out evaluation episodes (rollouts marked held_out), in the order they were played."""
    episodes = [e["payload"] for e in events if e["kind"] == "rollout" and e["payload"].get("held_out")]
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"seed-{seed}.json"
    path.write_text(json.dumps(episodes, indent=1))
    return path


def seed_list(text: str) -> list[int]:
    """--seeds: "0,1" -> [0, 1]; argparse reports the ValueError's message against the option."""
    try:
        seeds = [int(seed) for seed in text.split(",") if seed.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a comma-separated list of integers") from None
    if not seeds:
        raise argparse.ArgumentTypeError("name at least one seed")
    return seeds


def mutant_count(text: str) -> int:
    """--mutants, --warmup-mutants: a whole number from 0 to the pack's MAX_MUTANTS per repository."""
    from gpu_jobs.agent.taskpack.mutants import MAX_MUTANTS

    if not text.isdigit() or int(text) > MAX_MUTANTS:
        raise argparse.ArgumentTypeError(
            f"{text!r} is not a whole number from 0 to {MAX_MUTANTS} per repository"
        )
    return int(text)


def job_params(args: argparse.Namespace, seed: int) -> dict:
    smollm2 = args.model == "smollm2"
    environment = {
        # SmolLM2 on CPU: a batched turn of 8 episodes takes ~20-60 s, so the default 120 s of wall time per
        # episode would end most of them by timeout after two or three turns; the limits that matter stay.
        **(
            {"format_weight": 0.1, "episode_timeout_s": SMOLLM2_EPISODE_S}
            if smollm2
            else TINY_MODEL_ENVIRONMENT
        ),
        "warmup_sft_steps": args.warmup_steps,
        "warmup_sft_learning_rate": args.warmup_lr or (5e-5 if smollm2 else 2e-3),
        "warmup_sft_batch_size": 4,
        "eval_episodes": args.eval_episodes,
        "warmup_mutants": args.warmup_mutants,
        "guided_calls": args.guided_calls,
    }
    if args.max_turns is not None:
        environment["max_turns"] = args.max_turns
        environment["token_budget"] = TOKENS_PER_TURN * args.max_turns
    if args.habit:
        habit = "edited * tested" if args.habit_on == "edited_then_tested" else "tested"
        environment["formula"] = f"tests + 0.1 * format + {args.habit} * {habit}"
    lora_rank = args.lora_rank if args.lora_rank is not None else (16 if smollm2 else 0)
    model = {"model": SMOLLM2_NAME, "lora_rank": lora_rank, "lora_alpha": 2 * lora_rank} if smollm2 else {}
    if smollm2:  # its ~1,100-token episodes took 21 GB a step without it on the CPU (OOM-killed)
        model["activation_checkpointing"] = "on"
    return {
        **model,
        "max_steps": args.steps,
        "prompts_per_step": args.prompts,
        "num_generations": args.generations,
        "learning_rate": args.lr,
        "temperature": args.temperature,
        "beta": args.beta,
        "eval_steps": args.eval_steps,
        "rollouts_per_step": 2,
        "seed": seed,
        "environment": environment,
    }


def evaluations(events: list[dict]) -> dict[int, dict[str, float]]:
    """step -> the held-out evaluation's eval_agent/* figures."""
    return {
        int(e["payload"]["step"]): {k.removeprefix("eval_agent/"): v for k, v in e["payload"].items()
                                    if k.startswith("eval_agent/")}
        for e in events
        if e["kind"] == "metric" and "eval_agent/solved" in e["payload"]
    }  # fmt: skip


TRAINING = {
    "episode/tested_before_finish": "ran the tests before finishing",
    "episode/edited_then_tested": "changed, tested, finished",
    "episode/format": "turns with a valid tool call",
    "reward": "reward",
}


def training_trend(events: list[dict]) -> tuple[int, dict[str, tuple[float, float]]]:
    """The sampled training episodes' habits: (window, key -> (mean of the first `window` steps, of the last)),
    the window 5 steps or, in a shorter run, half of them, so that the two share no step (but a one-step run)."""
    steps = [e["payload"] for e in events if e["kind"] == "metric" and "episode/format" in e["payload"]]
    window = max(1, min(5, len(steps) // 2))
    return window, {
        key: (
            statistics.mean(s.get(key, 0.0) for s in steps[:window]),
            statistics.mean(s.get(key, 0.0) for s in steps[-window:]),
        )
        for key in TRAINING
        if steps
    }


def pack(api, **body) -> tuple[int, int]:
    """A repo-fix pack version made over REST: (its id, its row count)."""
    made = api.post("/datasets/packs/agent", json=body)
    if made.status_code != 201:
        raise RuntimeError(f"pack {body}: {made.status_code} {made.text[:300]}")
    version = made.json()["dataset_version"]
    return version["id"], version["row_count"]


def spread(values: list[float], share: bool) -> str:
    shown = [f"{v:.0%}" if share else f"{v:.2f}" for v in (statistics.mean(values), min(values), max(values))]
    return f"{shown[0]} ({shown[1]}-{shown[2]})"


def agent_config(args: argparse.Namespace, seed: int, *, store: Path, output_dir: Path, overrides: dict):
    """The job this bench launches for ``seed`` (the same tasks, held-out tasks and settings), as a GRPOJobConfig
    to run in this process: ``scripts/gpu_smoke.py --agent`` runs it on a GPU, without the platform."""
    from gpu_jobs.agent.taskpack import pack_rows, with_mutants
    from gpu_jobs.config import GRPOJobConfig

    rows = pack_rows()
    return GRPOJobConfig(
        **{**job_params(args, seed), **overrides},
        model_store=str(store),
        output_dir=str(output_dir),
        rows=with_mutants(rows[: args.train_tasks], args.mutants),
        eval_rows=with_mutants(rows[args.train_tasks :][: args.held_tasks], args.held_mutants),
        verifiers=[],
    )


def report_seed(seed: int, title: str, wall_s: float, events: list[dict]) -> tuple[dict, dict]:
    """Prints one seed's held-out habits by step and its training episodes' trend; (first, last) evaluation."""
    by_step = evaluations(events)
    first, last = by_step[min(by_step)], by_step[max(by_step)]
    print(f"\nseed {seed} ({title}): wall {wall_s / 60:.1f} min", flush=True)
    for key, label in HABITS.items():
        curve = ", ".join(f"{step}: {figures[key]:.2f}" for step, figures in sorted(by_step.items()))
        print(f"  {label:<32} {first[key]:.2f} -> {last[key]:.2f}   by step {curve}", flush=True)
    window, trend = training_trend(events)
    for key, (start, end) in trend.items():
        print(
            f"  training episodes, {TRAINING[key]:<21} first {window} steps {start:.2f}, "
            f"last {window} {end:.2f}"
        )
    return first, last


def report_seeds(
    args: argparse.Namespace, seeds: list[int], runs: list[tuple[dict, dict]], held_count: int
) -> None:
    each = "one greedy episode" if args.eval_episodes == 1 else f"{args.eval_episodes} sampled episodes"
    print(f"\nover seeds {seeds} ({held_count} held-out tasks, {each} each):")
    print(f"  {'':<32} {'warm-up alone':<20} {'after GRPO':<20}")
    for key, label in HABITS.items():
        share = key != "turns"
        before = spread([first[key] for first, _ in runs], share)
        after = spread([last[key] for _, last in runs], share)
        print(f"  {label:<32} {before:<20} {after:<20}")


def main() -> None:
    from tests.stack import Stack

    args = parser().parse_args()
    seeds = args.seeds
    if args.model == "smollm2":
        ensure_smollm2(Path(os.environ.setdefault("ANNEAL_MODEL_STORE", str(ROOT / "var" / "models"))))
    stack = Stack(Path(tempfile.mkdtemp(prefix="anneal-agent-learning-")))
    stack.start()
    try:
        api = stack.client(stack.member("agent", team="Agents"))
        train, trained = pack(api, name="repo-fix train", limit=args.train_tasks, mutants=args.mutants)
        held, held_count = pack(
            api,
            name="repo-fix held-out",
            offset=args.train_tasks,
            limit=args.held_tasks,
            mutants=args.held_mutants,
        )
        print(
            f"training tasks: pack 0-{args.train_tasks - 1} ({trained} with mutants); held-out: {args.train_tasks}-"
            f"{args.train_tasks + args.held_tasks - 1} ({held_count} with mutants); the warm-up uses the rest",
            flush=True,
        )
        runs = []
        for seed in seeds:
            done = run_job(
                api, name=f"agent habit seed {seed}", train=train, held_out=held, verifiers=[],
                params=job_params(args, seed),
            )  # fmt: skip
            runs.append(report_seed(seed, f"job {done['id']}", done["wall_s"], done["events"]))
            if args.held_out_episodes is not None:
                path = write_held_out_episodes(args.held_out_episodes, seed, done["events"])
                print(f"  held-out episodes: {path}", flush=True)
        report_seeds(args, seeds, runs, held_count)
    finally:
        stack.stop()


if __name__ == "__main__":
    main()
