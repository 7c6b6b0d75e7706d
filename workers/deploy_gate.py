"""The regression gate's evaluation: `python -m workers.deploy_gate DEPLOYMENT_ID OUT_JSON`.

Scores the deployment's checkpoint and its job's base model with greedy completions (gpu_jobs.evaluation) on
two sets and writes {"scores": [{"set", "domain", "base", "candidate", "rows"}], "note"} to OUT_JSON:

- "held-out": the job's evaluation rows (its eval_dataset_version, at most ANNEAL_GATE_MAX_ROWS), fitted to
  the job's max_prompt_length by its overflow_policy exactly as in training (gpu_jobs.prompt_length), scored
  by the job's own verifiers and weights, per domain;
- "general": a fixed regression set both models are asked, the same for every deployment (held-out
  two-digit sums, scored numerically), so a checkpoint that forgot what its base model could do is caught
  even when its job had no evaluation set.

workers/deploy.py judges the numbers (anneal.deployments.gate).
"""

import json
import sys
import traceback
from pathlib import Path

import workers.celery_app  # noqa: F401  (puts platform/ on sys.path and sets Django up first)

# isort: split
from django.conf import settings

from anneal.datasets.ingest import read_rows
from anneal.datasets.models import DatasetVersion
from anneal.deployments.models import Deployment
from gpu_jobs.addition import addition_rows
from gpu_jobs.model_store import resolve_model
from gpu_jobs.prompt_length import codec_from_folder, codec_from_tokenizer, fit_rows

GENERAL_ROWS = 48
GENERAL_SPEC = {"type": "numeric"}


def base_model_dir(spec_model: str) -> Path:
    """The job's base model as the store holds it (built-in models are built or imported if missing)."""
    # The launch checked the name against the store and the hub setting.
    return Path(resolve_model(spec_model, store=settings.MODEL_STORE, allow_hub=True))


def gate_inputs(deployment: Deployment) -> dict:
    job = deployment.checkpoint.job
    verifiers = [
        {"name": jv.name, "spec": jv.verifier_version.spec, "weight": jv.weight}
        for jv in job.job_verifiers.select_related("verifier_version").order_by("id")
    ]
    version_id = job.spec.get("eval_dataset_version")
    held_out: list[dict] = []
    note = ""
    if version_id:
        held_out = read_rows(DatasetVersion.objects.get(pk=version_id).rows_path)[
            : settings.DEPLOY_GATE_MAX_ROWS
        ]
    else:
        note = "The job had no held-out evaluation set (eval_dataset_version): only the general set was compared."
    return {
        "base": str(base_model_dir(job.spec.get("model", "tiny"))),
        "candidate": deployment.checkpoint.location,
        "held_out": held_out,
        "verifiers": verifiers,
        "general": addition_rows(n=GENERAL_ROWS, seed=7, split="test"),
        "max_new_tokens": int(job.spec.get("max_completion_length", 8)),
        "max_prompt_length": int(job.spec.get("max_prompt_length") or 0),
        "overflow_policy": str(job.spec.get("overflow_policy") or "refuse"),
        "team": str(job.team_id),
        "note": note,
    }


def fitted_held_out(inputs: dict, *, model_dir: str, tokenizer) -> list[dict]:
    """The held-out rows as the model saw them in training: fitted to the job's max_prompt_length by its
    overflow_policy with the same function and the same token count (gpu_jobs.prompt_length)."""
    return fit_rows(
        inputs["held_out"],
        codec=codec_from_folder(Path(model_dir)) or codec_from_tokenizer(tokenizer),
        max_length=inputs.get("max_prompt_length", 0),
        policy=inputs.get("overflow_policy", "refuse"),
        what="held-out rows",
    ).rows


def evaluate_model(model_dir: str, inputs: dict, sandbox, outbound=None) -> dict[tuple[str, str], float]:
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from gpu_jobs.evaluation import evaluate
    from gpu_jobs.rewards import build_scorer

    model = AutoModelForCausalLM.from_pretrained(model_dir)
    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    scores: dict[tuple[str, str], float] = {}
    if inputs["held_out"] and inputs["verifiers"]:
        scorers = {
            v["name"]: build_scorer(v["spec"], sandbox=sandbox, outbound=outbound)
            for v in inputs["verifiers"]
        }
        weights = {v["name"]: float(v["weight"]) for v in inputs["verifiers"]}
        if sum(weights.values()) <= 0:
            weights = dict.fromkeys(weights, 1.0)
        result = evaluate(
            model=model,
            tokenizer=tokenizer,
            rows=fitted_held_out(inputs, model_dir=model_dir, tokenizer=tokenizer),
            scorers=scorers,
            weights=weights,
            max_new_tokens=inputs["max_new_tokens"],
        )
        # Per domain and the mean (eval/*); each verifier's own scores (eval_verifier/*) are not gated.
        scores.update(
            {
                ("held-out", key.removeprefix("eval/")): value
                for key, value in result.items()
                if key.startswith("eval/")
            }
        )
    general = evaluate(
        model=model,
        tokenizer=tokenizer,
        rows=inputs["general"],
        scorers={"numeric": build_scorer(GENERAL_SPEC)},
        weights={"numeric": 1.0},
        max_new_tokens=8,
    )
    scores[("general", "addition")] = general["eval/mean"]
    return scores


def run(deployment_id: int, out: Path) -> None:
    from sandboxes.client import SandboxClient

    deployment = Deployment.objects.select_related("checkpoint__job").get(pk=deployment_id)
    inputs = gate_inputs(deployment)
    sandbox = SandboxClient(
        mode=settings.SANDBOX_EXECUTION,
        backend=settings.SANDBOX_BACKEND,
        broker_url=settings.CELERY_BROKER_URL,
        result_backend_url=settings.CELERY_RESULT_BACKEND,
        team=inputs["team"],
        max_batch=settings.SANDBOX_TEAM_QUOTA,
    )
    from anneal.verifiers.outbound import team_outbound

    # A model judge among the verifiers reaches only the team's allowed hosts, with the team's secrets.
    outbound = team_outbound(deployment.team)
    base = evaluate_model(inputs["base"], inputs, sandbox, outbound)
    candidate = evaluate_model(inputs["candidate"], inputs, sandbox, outbound)
    rows = {"held-out": len(inputs["held_out"]), "general": len(inputs["general"])}
    scores = [
        {
            "set": key[0],
            "domain": key[1],
            "base": round(base[key], 6),
            "candidate": round(candidate.get(key, 0.0), 6),
            "rows": rows[key[0]],
        }
        for key in base
    ]
    out.write_text(json.dumps({"scores": scores, "note": inputs["note"]}))


def main() -> None:
    try:
        run(int(sys.argv[1]), Path(sys.argv[2]))
    except Exception as exc:
        traceback.print_exc()
        print(f"{type(exc).__name__}: {exc}", file=sys.stderr)
        sys.exit(1)


if __name__ == "__main__":
    main()
