"""The demo job's spec (what `make demo` launches and bench/learning.py measures) is a valid job whose
held-out rows are never trained on."""

from pathlib import Path

from gpu_jobs.addition import DEMO_EVAL_ROWS, DEMO_PARAMS, DEMO_TRAIN_ROWS, DEMO_VERIFIERS, addition_rows
from gpu_jobs.config import GRPOJobConfig

ROOT = Path(__file__).resolve().parents[2]


def test_the_demo_spec_is_a_valid_job_with_a_disjoint_held_out_split(tmp_path):
    train, held_out = addition_rows(**DEMO_TRAIN_ROWS), addition_rows(**DEMO_EVAL_ROWS)
    assert DEMO_EVAL_ROWS["split"] == "test" and DEMO_TRAIN_ROWS["split"] == "train"
    assert not {r["prompt"] for r in train} & {r["prompt"] for r in held_out}
    config = GRPOJobConfig(
        model_store=str(tmp_path),
        output_dir=str(tmp_path),
        rows=train,
        eval_rows=held_out,
        verifiers=[{"name": n, "spec": spec, "weight": w} for n, (spec, w) in DEMO_VERIFIERS.items()],
        **DEMO_PARAMS,
    )
    assert config.prompts_per_step * config.num_generations == 256
    # Answers are at most 3 digits: the completion budget must leave room for them and the end token.
    assert config.max_completion_length >= 4


def test_the_demo_seed_command_launches_that_spec():
    source = (ROOT / "platform/anneal/training/management/commands/demo_seed.py").read_text()
    assert "DEMO_PARAMS" in source and "DEMO_TRAIN_ROWS" in source and "DEMO_EVAL_ROWS" in source
