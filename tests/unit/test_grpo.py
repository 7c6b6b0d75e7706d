"""GRPO on the tiny model: what a job reports (metrics, rollouts, checkpoints) and what its config accepts."""

import math
import os
from pathlib import Path

import pytest

from gpu_jobs.addition import addition_rows
from gpu_jobs.config import GRPOJobConfig
from gpu_jobs.grpo import main
from gpu_jobs.sink import FolderCheckpointStore, ListSink

MODEL_STORE = Path(os.environ.get("ANNEAL_TEST_MODEL_STORE", "/tmp/anneal-test-models"))
ROWS = addition_rows(n=64, seed=11)
VERIFIERS = [
    {"name": "exact", "spec": {"type": "exact_match", "reference_field": "answer"}, "weight": 1.0},
    {"name": "number", "spec": {"type": "exact_match", "extract": "last_number"}, "weight": 0.5},
]


def job_config(output_dir: Path, **overrides) -> GRPOJobConfig:
    values = dict(
        model_store=str(MODEL_STORE),
        output_dir=str(output_dir),
        rows=ROWS,
        verifiers=VERIFIERS,
        max_steps=5,
        num_generations=4,
        prompts_per_step=8,
        beta=0.04,
        seed=3,
        rollouts_per_step=3,
    )
    values.update(overrides)
    return GRPOJobConfig(**values)


def run(output_dir: Path, **overrides) -> tuple[dict, ListSink]:
    sink = ListSink()
    summary = main(
        job_config(output_dir, **overrides), sink=sink, checkpoints=FolderCheckpointStore(output_dir / "kept")
    )
    return summary, sink


@pytest.fixture(scope="module")
def job(tmp_path_factory) -> tuple[dict, ListSink, Path]:
    output_dir = tmp_path_factory.mktemp("grpo")
    summary, sink = run(output_dir, save_steps=2)
    return summary, sink, output_dir


def test_every_step_reports_the_contract_metrics(job):
    summary, sink, _ = job
    metrics = sink.of_kind("metric")
    assert [m["step"] for m in metrics] == [1, 2, 3, 4, 5]
    for metric in metrics:
        for key in ("reward", "reward_std", "rewards/exact", "rewards/number", "kl", "completion_length"):
            assert key in metric, key
        for key in ("entropy", "step_time", "learning_rate", "loss"):
            assert key in metric, key
        assert all(isinstance(v, float) and math.isfinite(v) for k, v in metric.items() if k != "step")
        # The reward is the verifiers' scores weighted 1.0 and 0.5.
        assert metric["reward"] == pytest.approx(metric["rewards/exact"] + 0.5 * metric["rewards/number"])
        assert metric["learning_rate"] == pytest.approx(3e-4)
    assert summary["steps"] == 5
    assert summary["reward"] == metrics[-1]["reward"]


def test_rollouts_carry_the_prompt_completion_and_why_they_scored(job):
    _, sink, _ = job
    rollouts = sink.of_kind("rollout")
    answers = {row["prompt"]: row["answer"] for row in ROWS}
    assert sorted({r["step"] for r in rollouts}) == [1, 2, 3, 4, 5]
    assert all(sum(r["step"] == step for r in rollouts) == 3 for step in range(1, 6))
    for rollout in rollouts:
        assert rollout["prompt"] in answers
        assert rollout["reference"] == answers[rollout["prompt"]]
        assert set(rollout["parts"]) == {"exact", "number"}
        exact = rollout["completion"].strip() == rollout["reference"]
        assert rollout["parts"]["exact"] == (1.0 if exact else 0.0), rollout
        assert rollout["reward"] == pytest.approx(
            rollout["parts"]["exact"] + 0.5 * rollout["parts"]["number"]
        )
        assert rollout["reason"].startswith("exact: ")
    # Spread over prompts rather than three samples of the same one.
    assert len({r["prompt"] for r in rollouts if r["step"] == 1}) == 3


def test_checkpoints_are_saved_every_save_steps_and_at_the_end_and_load(job):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    summary, sink, output_dir = job
    saved = sink.of_kind("checkpoint")
    assert [c["step"] for c in saved] == [2, 4, 5]
    assert summary["checkpoint"] == saved[-1]["location"]
    assert Path(saved[-1]["location"]).parent == output_dir / "kept"

    trained = AutoModelForCausalLM.from_pretrained(saved[-1]["location"])
    tokenizer = AutoTokenizer.from_pretrained(saved[-1]["location"])
    start = AutoModelForCausalLM.from_pretrained(summary["model_dir"])
    assert (
        tokenizer("12+45=")["input_ids"]
        == AutoTokenizer.from_pretrained(summary["model_dir"])("12+45=")["input_ids"]
    )
    changed = [
        name
        for (name, before), (_, after) in zip(
            start.state_dict().items(), trained.state_dict().items(), strict=True
        )
        if not before.equal(after)
    ]
    assert changed, "five GRPO steps left every weight as it was"
    logs = [event["message"] for event in sink.of_kind("log")]
    assert logs[0].startswith("GRPO started") and logs[-1].startswith("GRPO finished after 5 steps")


def test_the_same_seed_gives_the_same_run(job, tmp_path):
    _, first, _ = job
    _, second = run(tmp_path, save_steps=2, max_steps=2)
    rollouts = [r for r in first.of_kind("rollout") if r["step"] <= 2]
    assert second.of_kind("rollout") == rollouts
    assert [m["reward"] for m in second.of_kind("metric")] == [
        m["reward"] for m in first.of_kind("metric")[:2]
    ]


def test_activation_checkpointing_on_the_cpu_trains_the_same_run(job, tmp_path):
    # It only recomputes the activations in the backward pass: the same rollouts, rewards and losses.
    _, first, _ = job
    _, second = run(tmp_path, save_steps=2, max_steps=2, activation_checkpointing="on")
    assert second.of_kind("rollout") == [r for r in first.of_kind("rollout") if r["step"] <= 2]
    for key in ("reward", "loss"):
        assert [m[key] for m in second.of_kind("metric")] == pytest.approx(
            [m[key] for m in first.of_kind("metric")[:2]], rel=1e-5
        )


@pytest.mark.parametrize(
    ("overrides", "field"),
    [
        ({"num_generations": 1}, "num_generations"),
        ({"activation_checkpointing": "yes"}, "activation_checkpointing"),
        ({"prompts_per_step": 65}, "rows"),
        ({"rows": []}, "rows"),
        ({"rows": [{"answer": "3"}] * 8}, "rows[0].prompt"),
        ({"loss_type": "ppo"}, "loss_type"),
        ({"learning_rate": 0}, "learning_rate"),
        ({"beta": -0.1}, "beta"),
        ({"save_steps": -1}, "save_steps"),
        ({"verifiers": []}, "verifiers"),
        ({"verifiers": [{**VERIFIERS[0], "weight": -1}]}, "verifiers[0].weight"),
        ({"verifiers": [{**VERIFIERS[0], "weight": 0}]}, "verifiers"),
        ({"verifiers": [VERIFIERS[0], {**VERIFIERS[1], "name": "exact"}]}, "verifiers[1].name"),
        ({"verifiers": [{**VERIFIERS[0], "spec": {"type": "nope"}}]}, "verifiers[0].spec.type"),
        (
            {"verifiers": [{**VERIFIERS[0], "spec": {"type": "exact_match", "extract": "x"}}]},
            "verifiers[0].spec.extract",
        ),
    ],
)
def test_config_rejects_a_bad_value_naming_the_field(tmp_path, overrides, field):
    with pytest.raises(ValueError) as raised:
        job_config(tmp_path, **overrides)
    assert str(raised.value).startswith(f"{field}: ")


def test_config_round_trips_and_documents_every_field(tmp_path):
    config = job_config(tmp_path)
    assert GRPOJobConfig(**config.to_dict()) == config
    assert all(text.strip() for text in GRPOJobConfig.field_help().values())


def test_list_sink_rejects_what_a_database_sink_could_not_store():
    sink = ListSink()
    with pytest.raises(ValueError):
        sink.emit("metric", {"step": 1, "reward": float("nan")})
    with pytest.raises(TypeError):
        sink.emit("log", {"message": object()})
    with pytest.raises(ValueError, match="^kind:"):
        sink.emit("metrics", {"step": 1})
    assert sink.events == []


def test_folder_checkpoint_store_replaces_a_step_whole(tmp_path):
    store = FolderCheckpointStore(tmp_path / "kept")
    first, second = tmp_path / "a", tmp_path / "b"
    first.mkdir()
    second.mkdir()
    (first / "old.txt").write_text("old")
    (second / "new.txt").write_text("new")
    location = store.save(step=3, local_dir=first)
    assert store.save(step=3, local_dir=second) == location
    assert sorted(p.name for p in Path(location).iterdir()) == ["new.txt"]


def test_held_out_evaluation_per_domain_before_during_and_after(tmp_path):
    eval_rows = [
        dict(row, domain="small" if int(row["answer"]) < 100 else "large")
        for row in addition_rows(n=24, seed=5, split="test")
    ]
    _, sink = run(tmp_path, max_steps=3, eval_rows=eval_rows, eval_steps=2, beta=0.0)
    evals = [m for m in sink.of_kind("metric") if "eval/mean" in m]
    assert [m["step"] for m in evals] == [0, 2, 3]
    for metric in evals:
        domains = {key for key in metric if key.startswith("eval/")} - {"eval/mean"}
        assert domains == {f"eval/{row['domain']}" for row in eval_rows}
        assert all(0.0 <= metric[key] <= 1.0 for key in domains | {"eval/mean"})
        # Each verifier's own held-out mean too, per domain and over all: a domain's accuracy by its checker.
        own = {key for key in metric if key.startswith("eval_verifier/")}
        names = {key.split("/")[1] for key in own}
        assert names and all(f"eval_verifier/{name}/mean" in own for name in names)
        assert all(0.0 <= metric[key] <= 1.0 for key in own)
    # Training metrics are still one per step, apart from the evaluations.
    assert [m["step"] for m in sink.of_kind("metric") if "reward" in m] == [1, 2, 3]


def test_eval_rows_are_checked():
    with pytest.raises(ValueError, match=r"eval_rows\[1\].prompt"):
        job_config(Path("/tmp/x"), eval_rows=[{"prompt": "1+1="}, {"answer": "2"}])


def test_pass_rate_verifier_time_and_per_domain_metrics(tmp_path):
    rows = [dict(row, domain="small" if int(row["answer"]) < 100 else "large") for row in ROWS]
    _, sink = run(tmp_path, max_steps=2, rows=rows, beta=0.0)
    for metric in sink.of_kind("metric"):
        assert 0.0 <= metric["pass_rate"] <= min(metric["rewards/exact"], metric["rewards/number"]) + 1e-9
        assert metric["verify_time/exact"] >= 0 and metric["verify_time/number"] >= 0
        domains = {key.removeprefix("pass_rate/") for key in metric if key.startswith("pass_rate/")}
        assert domains and domains <= {"small", "large"}
        assert all(0.0 <= metric[f"reward/{domain}"] <= 1.0 for domain in domains)
