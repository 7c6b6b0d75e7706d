"""Does a real instruct model learn a domain through the platform? SmolLM2-135M-Instruct, reasoning-gym tasks, on
this machine's CPU, every step through the real stack.

Starts the platform (tests/stack.py: its own PostgreSQL and Redis databases, Daphne, Celery workers, a sandbox
host), then, as a user would over REST: uploads the task's rows (reasoning-gym's generator, each prompt ending
in an answer cue) as a training and a held-out dataset whose prompts never meet, creates the verifiers (the
task's own checker on the completion's first line, and a one-word format check), launches a GRPO job with LoRA
and the job's own held-out evaluation, waits for it and reads its events. Prints per domain the held-out
accuracy (the domain verifier's own score, eval_verifier/<name>/<domain>) of the base model and at the end, the
job's wall time and its median step time; with --runs 2 the same job spec twice. Plots held-out accuracy by
step to docs/figures/learning_smollm.png (or --plot).

    .venv/bin/python bench/learning_smollm.py                                  # chain_sum, 30 steps
    .venv/bin/python bench/learning_smollm.py --runs 2                         # the same spec twice
    .venv/bin/python bench/learning_smollm.py --tasks chain_sum,basic_arithmetic --adaptive   # two domains

Two domains train together with adaptive sampling; the job's forgetting alarm is listed if it rang. The model
is imported into var/models on first use (gpu_jobs.smollm, about a minute).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "platform")]

from bench import plots  # noqa: E402

PLOT = ROOT / "docs" / "figures" / "learning_smollm.png"
CUE = "\nAnswer:"  # the prompt ends where the answer starts: the model answers instead of restating
FORMAT_SPEC = {"type": "format", "require_think": False, "require_answer": False, "max_words": 1}


def task_rows(task: str, *, size: int, difficulty: int | None, eval_rows: int, seed: int) -> tuple:
    """(train rows, held-out rows, the task's verifier spec): reasoning-gym's rows with the answer cue; the
    held-out rows' prompts are a seeded fifth of the distinct prompts and never appear in training."""
    from anneal.datasets.pack_catalogue import generate_task

    pack = generate_task(task=task, size=size, seed=seed, difficulty=difficulty)
    rows = [{**row, "prompt": row["prompt"] + CUE} for row in pack.rows]
    prompts = sorted({row["prompt"] for row in rows})
    random.Random(seed).shuffle(prompts)
    held_prompts = set(prompts[: max(1, len(prompts) // 5)])
    held, seen = [], set()
    for row in rows:
        if row["prompt"] in held_prompts and row["prompt"] not in seen:
            seen.add(row["prompt"])
            held.append(row)
    train = [row for row in rows if row["prompt"] not in held_prompts]
    return train, held[:eval_rows], pack.spec


def job_params(args: argparse.Namespace) -> dict:
    """The job's settings (POST /api/v1/jobs params) for these command-line choices."""
    params = {
        "model": "smollm2-135m-instruct",
        "max_steps": args.steps,
        "prompts_per_step": args.prompts,
        "num_generations": args.generations,
        "max_completion_length": args.tokens,
        "learning_rate": args.lr,
        "lora_rank": args.lora_rank,
        "lora_alpha": 2 * args.lora_rank,
        "eval_steps": args.eval_steps,
        "rollouts_per_step": 2,
        "seed": args.seed,
    }
    if args.adaptive:
        params["adaptive_sampling"] = True
    if args.profile_k:
        # Difficulty profiling: prompts the base model always or never solves in k tries are dropped.
        params["profile_k"] = args.profile_k
        params["profile_max_prompts"] = args.profile_max_prompts
    return params


def job_verifiers(tasks: list[str], specs: dict[str, dict], format_weight: float) -> list[dict]:
    """[{name, spec, weight, domains?}]: each task's own checker on the first line of the completion, routed
    to its domain, and the one-word format check for every domain."""
    verifiers = [
        {
            "name": f"{task} answer",
            "spec": {**specs[task], "extract": "first_line"},
            "weight": 1.0,
            "domains": [task],
        }
        for task in tasks
    ]
    if format_weight:
        verifiers.append({"name": "one word", "spec": FORMAT_SPEC, "weight": format_weight})
    return verifiers


def parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--tasks", default="chain_sum", help="reasoning-gym tasks, separated by commas")
    parser.add_argument("--difficulty", type=int, default=0)
    parser.add_argument("--size", type=int, default=600, help="rows generated per task")
    parser.add_argument(
        "--eval-rows", type=int, default=100, help="held-out rows per task (distinct prompts)"
    )
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--eval-steps", type=int, default=5)
    parser.add_argument("--prompts", type=int, default=8, help="prompts per step")
    parser.add_argument("--generations", type=int, default=8)
    parser.add_argument("--tokens", type=int, default=8, help="max_completion_length")
    parser.add_argument("--lr", type=float, default=2e-4)
    parser.add_argument("--lora-rank", type=int, default=16)
    parser.add_argument("--format-weight", type=float, default=0.2)
    parser.add_argument("--adaptive", action="store_true", help="adaptive sampling across the domains")
    parser.add_argument("--profile-k", type=int, default=4, help="difficulty profiling tries (0: off)")
    parser.add_argument("--profile-max-prompts", type=int, default=160)
    parser.add_argument("--runs", type=int, default=1, help="run the same job spec this many times")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--plot", type=Path, default=PLOT)
    return parser


def domain_config(*, task: str, store: Path, output_dir: Path, overrides: dict | None = None):
    """The job this bench launches for one ``task`` (the same rows, verifiers and settings, the default
    command line), as a GRPOJobConfig to run in this process: scripts/gpu_smoke.py runs it on a GPU."""
    from gpu_jobs.config import GRPOJobConfig

    args = parser().parse_args([])
    train, held, spec = task_rows(
        task, size=args.size, difficulty=args.difficulty, eval_rows=args.eval_rows, seed=11
    )
    return GRPOJobConfig(
        **{**job_params(args), **(overrides or {})},
        model_store=str(store),
        output_dir=str(output_dir),
        rows=train,
        eval_rows=held,
        verifiers=job_verifiers([task], {task: spec}, args.format_weight),
    )


def upload(api, name: str, rows: list[dict]) -> int:
    from tests.stack import jsonl, wait_for

    created = api.post(
        "/datasets/uploads",
        data={"name": name, "answer_field": "answer", "domain_field": "domain"},
        files={"file": (f"{name}.jsonl", jsonl(rows))},
    ).json()
    done = wait_for(
        lambda: api.get(f"/datasets/uploads/{created['id']}").json(),
        lambda upload: upload["state"] in ("ready", "failed", "review"),
        timeout_s=600,
        what=f"the upload of {name}",
    )
    if done["state"] != "ready":
        raise RuntimeError(f"upload {name} ended {done['state']}: {json.dumps(done)[:500]}")
    return done["dataset_version"]


def verifier(api, name: str, spec: dict) -> int:
    made = api.post("/verifiers", json={"name": name, "spec": spec})
    if made.status_code != 201:
        raise RuntimeError(f"verifier {name}: {made.status_code} {made.text[:300]}")
    return made.json()["versions"][0]["id"]


def run_job(api, *, name: str, train: int, held_out: int, verifiers: list[dict], params: dict) -> dict:
    launched = api.post(
        "/jobs",
        json={
            "name": name,
            "dataset_version": train,
            "eval_dataset_version": held_out,
            "verifiers": verifiers,
            "params": params,
        },
    )
    if launched.status_code != 201:
        raise RuntimeError(f"launch: {launched.status_code} {launched.text[:500]}")
    job_id = launched.json()["id"]
    started = time.monotonic()
    from tests.stack import all_events, wait_for

    job = wait_for(
        lambda: api.get(f"/jobs/{job_id}").json(),
        lambda job: job["state"] in ("succeeded", "failed", "cancelled"),
        timeout_s=3 * 3600,
        what=f"job {job_id}",
    )
    if job["state"] != "succeeded":
        raise RuntimeError(f"job {job_id} {job['state']}: {job.get('error', '')}")
    events = all_events(api, job_id)
    return {"id": job_id, "wall_s": time.monotonic() - started, "events": events}


def held_out_by_step(events: list[dict], verifier_names: dict[str, str]) -> dict[str, dict[int, float]]:
    """domain -> {step: held-out accuracy}: the domain's own verifier's mean on the held-out rows."""
    curves: dict[str, dict[int, float]] = {domain: {} for domain in verifier_names}
    for event in events:
        payload = event["payload"]
        if event["kind"] != "metric" or "eval/mean" not in payload:
            continue
        for domain, name in verifier_names.items():
            key = f"eval_verifier/{name}/{domain}"
            if key in payload:
                curves[domain][int(payload["step"])] = float(payload[key])
    return curves


def step_seconds(events: list[dict]) -> float:
    times = [
        e["payload"]["step_time"] for e in events if e["kind"] == "metric" and "step_time" in e["payload"]
    ]
    return statistics.median(times) if times else float("nan")


def plot(runs: list[tuple[str, dict[str, dict[int, float]]]], path: Path, title: str) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axes = plt.subplots(figsize=(6, 3.6), dpi=110)
    for label, curves in runs:
        for domain, points in curves.items():
            steps = sorted(points)
            axes.plot(steps, [points[s] for s in steps], marker="o", label=f"{domain} ({label})")
    axes.set_xlabel("training step")
    axes.set_ylabel("held-out accuracy")
    axes.set_ylim(0, 1)
    axes.set_title(title, fontsize=10)
    return plots.finish(figure, axes, path)


def main() -> None:
    args = parser().parse_args()
    store = Path(os.environ.setdefault("ANNEAL_MODEL_STORE", str(ROOT / "var" / "models")))
    from gpu_jobs.smollm import ensure_smollm2

    ensure_smollm2(store)
    tasks = [task.strip() for task in args.tasks.split(",") if task.strip()]
    train_rows, held_rows, specs = [], [], {}
    for task in tasks:
        train, held, spec = task_rows(
            task, size=args.size, difficulty=args.difficulty, eval_rows=args.eval_rows, seed=11
        )
        train_rows += train
        held_rows += held
        specs[task] = spec
        print(
            f"{task}: {len(train)} training rows ({len({r['prompt'] for r in train})} distinct prompts), "
            f"{len(held)} held-out prompts, none of them trained on",
            flush=True,
        )

    from tests.stack import Stack  # the platform's services: not needed for domain_config on a GPU host

    stack = Stack(Path(tempfile.mkdtemp(prefix="anneal-learning-")))
    stack.start()
    try:
        api = stack.client(stack.member("expert", team="Learning"))
        train_version = upload(api, "train", train_rows)
        held_version = upload(api, "held-out", held_rows)
        chosen = []
        for entry in job_verifiers(tasks, specs, args.format_weight):
            choice = {
                "verifier_version": verifier(api, entry["name"], entry["spec"]),
                "weight": entry["weight"],
            }
            if "domains" in entry:
                choice["domains"] = entry["domains"]
            chosen.append(choice)
        names = {task: f"{task} answer" for task in tasks}
        params = job_params(args)
        print(f"job params: {json.dumps(params)}", flush=True)
        results = []
        for run in range(args.runs):
            done = run_job(
                api, name=f"learn {'+'.join(tasks)} #{run + 1}", train=train_version, held_out=held_version,
                verifiers=chosen, params=params,
            )  # fmt: skip
            curves = held_out_by_step(done["events"], names)
            alarms = [e["payload"] for e in done["events"] if e["kind"] == "alarm"]
            results.append((f"run {run + 1}", curves))
            print(
                f"\nrun {run + 1} (job {done['id']}): wall {done['wall_s'] / 60:.1f} min, median step "
                f"{step_seconds(done['events']):.1f} s, {args.steps} steps",
                flush=True,
            )
            for task in tasks:
                points = curves[task]
                base, final = points.get(0, float("nan")), points[max(points)]
                by_step = ", ".join(f"{step}: {value:.2f}" for step, value in sorted(points.items()))
                print(
                    f"  {task:<22} held-out accuracy {base:.1%} -> {final:.1%} ({(final - base) * 100:+.1f} "
                    f"points)   by step {by_step}",
                    flush=True,
                )
            profiled = [
                e["payload"]["profile"]
                for e in done["events"]
                if e["kind"] == "log" and "profile" in e["payload"]
            ]
            if profiled:
                p = profiled[0]
                print(
                    f"  difficulty profile: kept {p['kept']} of {p['profiled']} (dropped {p['dropped_always_solved']} "
                    f"always and {p['dropped_never_solved']} never solved), mean pass rate {p['mean_pass_rate']:.2f}",
                    flush=True,
                )
            rang = [f"{alarm.get('name')} at step {alarm.get('step')}" for alarm in alarms]
            print(f"  alarms: {', '.join(rang) if rang else 'none'}", flush=True)
        if len(results) > 1:
            for task in tasks:
                finals = [curves[task][max(curves[task])] for _, curves in results]
                print(
                    f"\n{task}: final held-out accuracy over {len(finals)} runs of the same spec: "
                    f"{', '.join(f'{f:.1%}' for f in finals)} (spread {100 * (max(finals) - min(finals)):.1f} points)"
                )
        path = plot(
            results, args.plot, f"SmolLM2-135M-Instruct, GRPO + LoRA on 2 CPU cores\n{', '.join(tasks)}"
        )
        print(f"\nplot: {path.relative_to(ROOT) if path.is_relative_to(ROOT) else path}")
    finally:
        stack.stop()


if __name__ == "__main__":
    main()
