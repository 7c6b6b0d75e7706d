"""The job spec's training choices on the tiny model, each a short seeded run: several domains with routed
verifiers and adaptive weights, RLOO, LoRA with merged checkpoints, learning-rate schedules, and the
forgetting alarm."""

import json
import os
from pathlib import Path

import pytest

from gpu_jobs.addition import addition_rows
from gpu_jobs.config import GRPOJobConfig
from gpu_jobs.grpo import main
from gpu_jobs.sink import FolderCheckpointStore, ListSink

MODEL_STORE = Path(os.environ.get("ANNEAL_TEST_MODEL_STORE", "/tmp/anneal-test-models"))
# Two domains of sums, checked by different verifiers: "exact" only on "left", "number" only on "right".
ROWS = [dict(row, domain="left" if i % 2 else "right") for i, row in enumerate(addition_rows(n=48, seed=7))]
EVAL_ROWS = [
    dict(row, domain="left" if i % 2 else "right") for i, row in enumerate(addition_rows(n=24, seed=8))
]
ROUTED = [
    {"name": "exact", "spec": {"type": "exact_match"}, "weight": 1.0, "domains": ["left"]},
    {
        "name": "number",
        "spec": {"type": "exact_match", "extract": "last_number"},
        "weight": 1.0,
        "domains": ["right"],
    },
]


def run(tmp_path: Path, **overrides) -> tuple[dict, ListSink]:
    values = dict(
        model_store=str(MODEL_STORE),
        output_dir=str(tmp_path),
        rows=ROWS,
        verifiers=ROUTED,
        max_steps=3,
        num_generations=4,
        prompts_per_step=4,
        max_completion_length=4,
        seed=2,
        rollouts_per_step=16,
    )
    values.update(overrides)
    sink = ListSink()
    summary = main(GRPOJobConfig(**values), sink=sink, checkpoints=FolderCheckpointStore(tmp_path / "kept"))
    return summary, sink


def test_domains_are_weighted_routed_to_their_verifiers_and_reported(tmp_path):
    summary, sink = run(
        tmp_path,
        domain_weights={"left": 0.75, "right": 0.25},
        adaptive_sampling=True,
        domain_floor=0.1,
        eval_rows=EVAL_ROWS,
    )
    assert summary["steps"] == 3
    steps = [m for m in sink.of_kind("metric") if "reward" in m]
    for metric in steps:
        assert metric["domain_weight/left"] + metric["domain_weight/right"] == pytest.approx(1.0)
        assert min(metric["domain_weight/left"], metric["domain_weight/right"]) >= 0.1 - 1e-9
        assert {"domain_signal/left", "domain_signal/right"} <= set(metric)
    assert any("pass_rate/left" in m for m in steps) and any("reward/left" in m for m in steps)
    rollouts = sink.of_kind("rollout")
    assert rollouts
    for rollout in rollouts:
        # Each completion was scored by its domain's verifier only.
        expected = {"left": {"exact"}, "right": {"number"}}[rollout["domain"]]
        assert set(rollout["parts"]) == expected, rollout
    # Left was drawn more often than right (75/25 at the start, adapted after).
    domains = [r["domain"] for r in rollouts]
    assert domains.count("left") > domains.count("right")
    evals = [m for m in sink.of_kind("metric") if "eval/mean" in m]
    assert [m["step"] for m in evals] == [0, 3] and {"eval/left", "eval/right"} <= set(evals[0])
    sampler_logs = [log["message"] for log in sink.of_kind("log") if "domain sampler" in log["message"]]
    assert len(sampler_logs) == 1 and "left 0.75" in sampler_logs[0] and "right 0.25" in sampler_logs[0]


def test_rloo_trains_with_trl_rloo_trainer(tmp_path):
    summary, sink = run(tmp_path, algorithm="rloo", max_steps=2, lr_scheduler_type="linear")
    metrics = [m for m in sink.of_kind("metric") if "reward" in m]
    assert summary["steps"] == 2 and [m["step"] for m in metrics] == [1, 2]
    assert all("rewards/exact" in m or "rewards/number" in m for m in metrics)


def test_lora_checkpoints_are_plain_model_folders_and_the_schedule_warms_up(tmp_path):
    from transformers import AutoModelForCausalLM

    summary, sink = run(
        tmp_path,
        lora_rank=4,
        lora_alpha=8,
        lora_target_modules="q_proj,v_proj",
        learning_rate=1e-3,
        lr_scheduler_type="cosine",
        warmup_steps=2,
        max_steps=4,
    )
    rates = [m["learning_rate"] for m in sink.of_kind("metric") if "learning_rate" in m]
    # Warm-up rises to the peak, then cosine decays it.
    assert rates[0] < rates[1] and max(rates) == pytest.approx(1e-3, rel=0.01) and rates[-1] < max(rates)
    folder = Path(summary["checkpoint"])
    assert (folder / "config.json").is_file() and not (folder / "adapter_config.json").exists()
    model = AutoModelForCausalLM.from_pretrained(folder)
    assert not any("lora" in name for name, _ in model.named_parameters())
    assert json.loads((folder / "config.json").read_text())["model_type"] == "qwen2"


def test_the_forgetting_alarm_fires_when_a_domain_falls_below_the_base_model(tmp_path):
    # A learning rate far too high wrecks the model in a few steps: the held-out score falls.
    _, sink = run(
        tmp_path,
        verifiers=[{"name": "exact", "spec": {"type": "exact_match"}, "weight": 1.0}],
        learning_rate=0.05,
        max_steps=3,
        eval_rows=EVAL_ROWS,
        forgetting_margin=0.05,
    )
    evals = [m for m in sink.of_kind("metric") if "eval/mean" in m]
    fallen = [d for d in ("left", "right") if evals[0][f"eval/{d}"] - evals[-1][f"eval/{d}"] > 0.05]
    assert fallen, evals
    alarms = [a for a in sink.of_kind("alarm") if a["name"] == "forgetting"]
    assert sorted(a["message"].split("'")[1] for a in alarms) == sorted(fallen)
    assert all(a["step"] == 3 for a in alarms)
