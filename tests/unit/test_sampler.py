"""The multi-domain sampler: domain weights, moving weight toward domains with signal, the floor, the
layout TRL expects, routing rows to their domain's verifiers, the forgetting alarm and the config's rules.
No model is loaded: these are fast."""

from collections import Counter

import pytest

from gpu_jobs.alarms import ForgettingWatch
from gpu_jobs.config import GRPOJobConfig
from gpu_jobs.domains import DomainScorer, check_domain_weights, is_scored
from gpu_jobs.rewards import build_scorer
from gpu_jobs.sampler import DomainSampler, DomainWeights, group_signal

ROWS = [{"prompt": f"a{i}", "domain": "a"} for i in range(30)] + [
    {"prompt": f"b{i}", "domain": "b"} for i in range(10)
]


def draw(sampler: DomainSampler) -> list[int]:
    return list(iter(sampler))


def test_prompts_follow_the_domain_weights_in_trl_layout():
    weights = DomainWeights({"a": 0.2, "b": 0.8})
    sampler = DomainSampler(
        rows=ROWS, weights=weights, batch_size=4, mini_repeat_count=3, repeat_count=2, seed=1
    )
    indices = draw(sampler)
    assert len(indices) == len(sampler) == 10 * 4 * 3 * 2
    # Each batch: 4 prompts, each repeated 3 times in a row, and the whole batch twice.
    for start in range(0, len(indices), 24):
        batch = indices[start : start + 24]
        assert batch[:12] == batch[12:]
        assert all(len(set(batch[i : i + 3])) == 1 for i in range(0, 12, 3))
    prompts = indices[::3]
    share_b = sum(ROWS[i]["domain"] == "b" for i in prompts) / len(prompts)
    assert 0.7 < share_b < 0.9
    # Seeded: the same seed draws the same prompts.
    again = DomainSampler(
        rows=ROWS, weights=weights, batch_size=4, mini_repeat_count=3, repeat_count=2, seed=1
    )
    assert draw(again) == indices


def test_rows_of_a_domain_are_drawn_without_replacement_before_repeating():
    sampler = DomainSampler(
        rows=ROWS, weights=DomainWeights({"a": 0.0, "b": 1.0}), batch_size=5, mini_repeat_count=1, seed=0
    )
    drawn = draw(sampler)
    assert {ROWS[i]["domain"] for i in drawn} == {"b"}
    counts = Counter(drawn[:20])
    assert set(counts) == set(range(30, 40)) and set(counts.values()) == {2}


def test_a_curriculum_order_is_followed_within_each_domain():
    order = [39, 38, 37, 36, 35]
    sampler = DomainSampler(
        rows=ROWS, weights=DomainWeights({"b": 1.0}), batch_size=1, mini_repeat_count=1, seed=0, order=order
    )
    assert draw(sampler) == order


def test_weight_moves_toward_the_domain_with_signal_and_every_domain_keeps_its_floor():
    weights = DomainWeights({"a": 0.5, "b": 0.5}, adaptive=True, floor=0.1)
    for _ in range(30):
        # Domain a: every group solved or failed alike (no signal); domain b: mixed groups.
        weights.observe({"a": (0, 8), "b": (6, 8)})
    assert weights.current["b"] > 0.85
    assert weights.current["a"] == pytest.approx(0.1, abs=1e-3)
    assert sum(weights.current.values()) == pytest.approx(1.0)
    metrics = weights.metrics()
    assert metrics["domain_weight/a"] == pytest.approx(0.1, abs=1e-3) and metrics["domain_signal/b"] > 0.7
    # Without adaptive sampling the weights stay as set, while the signal is still followed.
    fixed = DomainWeights({"a": 0.5, "b": 0.5}, adaptive=False)
    fixed.observe({"a": (0, 8), "b": (8, 8)})
    assert fixed.current == {"a": 0.5, "b": 0.5} and fixed.signal["b"] > fixed.signal["a"]


def test_adapted_weights_apply_to_the_next_batches_drawn():
    weights = DomainWeights({"a": 0.5, "b": 0.5}, adaptive=True, floor=0.05)
    sampler = DomainSampler(rows=ROWS, weights=weights, batch_size=10, mini_repeat_count=1, seed=2)
    stream = iter(sampler)
    for _ in range(20):
        weights.observe({"a": (8, 8), "b": (0, 8)})
    later = [next(stream) for _ in range(30)]
    assert sum(ROWS[i]["domain"] == "a" for i in later) >= 25


def test_group_signal_counts_groups_with_a_pass_rate_strictly_between_0_and_1():
    domains = ["a"] * 4 + ["a"] * 4 + ["b"] * 4
    passed = [True, False, True, True] + [True] * 4 + [False] * 4
    assert group_signal(domains, passed, 4) == {"a": (1, 2), "b": (0, 1)}


def test_rows_go_to_their_domains_verifiers_only():
    rows = [{"prompt": "x", "answer": "1", "domain": "a"}, {"prompt": "y", "answer": "2", "domain": "b"}]
    only_b = DomainScorer(build_scorer({"type": "exact_match"}), ["b"])
    results = only_b.score_batch(rows, ["1", "2"])
    assert not is_scored(results[0]) and results[1].score == 1.0
    everyone = DomainScorer(build_scorer({"type": "exact_match"}), None)
    assert [r.score for r in everyone.score_batch(rows, ["1", "9"])] == [1.0, 0.0]


def test_the_forgetting_alarm_compares_each_domain_with_the_base_model():
    watch = ForgettingWatch(margin=0.1)
    assert watch.observe(0, {"eval/a": 0.6, "eval/b": 0.4, "eval/mean": 0.5}) == []
    assert watch.observe(5, {"eval/a": 0.55, "eval/b": 0.5, "eval/mean": 0.52}) == []
    alarms = watch.observe(10, {"eval/a": 0.45, "eval/b": 0.5, "eval/mean": 0.47})
    assert [(a.name, a.step) for a in alarms] == [("forgetting", 10)]
    assert "'a'" in alarms[0].message and "0.600" in alarms[0].message and "0.450" in alarms[0].message
    # Raised once while it lasts, again after it has recovered and fallen again.
    assert watch.observe(15, {"eval/a": 0.4}) == []
    assert watch.observe(20, {"eval/a": 0.58}) == []
    assert len(watch.observe(25, {"eval/a": 0.3})) == 1
    off = ForgettingWatch(margin=0)
    off.observe(0, {"eval/a": 1.0})
    assert off.observe(1, {"eval/a": 0.0}) == []


def config(**overrides) -> GRPOJobConfig:
    values = dict(
        model_store="/tmp/store",
        output_dir="/tmp/out",
        rows=ROWS,
        prompts_per_step=2,
        num_generations=2,
        verifiers=[{"name": "e", "spec": {"type": "exact_match"}, "weight": 1.0}],
    )
    values.update(overrides)
    return GRPOJobConfig(**values)


@pytest.mark.parametrize(
    ("overrides", "start"),
    [
        ({"domain_weights": {"a": 0.5, "b": 0.6}}, "domain_weights: the weights must sum to 1"),
        ({"domain_weights": {"a": 1.2, "b": -0.2}}, "domain_weights.b: must be a number >= 0"),
        ({"domain_weights": {"a": 1.0}}, "domain_weights: no weight for domain(s) b"),
        ({"domain_weights": {"a": 0.5, "b": 0.25, "c": 0.25}}, "domain_weights.c: no row"),
        ({"num_generations": 4, "batch_size": 10}, "batch_size: 10 completions do not split"),
        ({"algorithm": "ppo"}, "algorithm: must be one of grpo, rloo"),
        ({"lr_scheduler_type": "step"}, "lr_scheduler_type: must be one of"),
        ({"domain_floor": 0.6}, "domain_floor: 0.6 x 2 domains"),
        ({"profile_k": 1}, "profile_k: must be 0 (off) or at least 2"),
        (
            {"verifiers": [{"name": "e", "spec": {"type": "exact_match"}, "weight": 1.0, "domains": ["a"]}]},
            "verifiers: no weighted verifier scores domain(s) b",
        ),
    ],
)
def test_the_config_names_the_wrong_field(overrides, start):
    with pytest.raises(ValueError) as error:
        config(**overrides)
    assert str(error.value).startswith(start), str(error.value)


def test_batch_size_sets_the_prompts_per_step():
    made = config(num_generations=4, batch_size=12)
    assert made.prompts_per_step == 3
    assert GRPOJobConfig(**made.to_dict()).prompts_per_step == 3
    check_domain_weights({}, ["a", "b"])  # empty: equal shares


def test_the_forgetting_alarm_also_fires_when_a_domain_gives_back_what_it_learned():
    """Two domains trained together: a learns first, then falls back while b trains, still above its base."""
    watch = ForgettingWatch(margin=0.1)
    watch.observe(0, {"eval/a": 0.18, "eval/b": 0.04})
    assert watch.observe(10, {"eval/a": 0.66, "eval/b": 0.19}) == []
    assert watch.observe(20, {"eval/a": 0.60, "eval/b": 0.15}) == []  # within the margin of its best
    alarms = watch.observe(30, {"eval/a": 0.47, "eval/b": 0.18})
    assert [(a.name, a.step) for a in alarms] == [("forgetting", 30)]
    assert "'a' fell from its best, 0.660 at step 10, to 0.470" in alarms[0].message
    # Back within the margin of its best: cleared; a new best raises the bar.
    assert watch.observe(40, {"eval/a": 0.58, "eval/b": 0.30}) == []
    assert [a.message.split("'")[1] for a in watch.observe(50, {"eval/a": 0.58, "eval/b": 0.19})] == ["b"]


def test_a_resumed_run_keeps_its_adapted_weights_and_its_base_scores(tmp_path):
    weights = DomainWeights({"a": 0.5, "b": 0.5}, adaptive=True, state_file=tmp_path / "w.json")
    for _ in range(5):
        weights.observe({"a": (0, 4), "b": (4, 4)})
    resumed = DomainWeights({"a": 0.5, "b": 0.5}, adaptive=True, state_file=tmp_path / "w.json")
    assert resumed.current == weights.current and resumed.current["b"] > 0.6
    # The resumed run does not evaluate its base model again: the watch still compares with it.
    ForgettingWatch(margin=0.1, state_file=tmp_path / "base.json").observe(0, {"eval/a": 0.8})
    after_restart = ForgettingWatch(margin=0.1, state_file=tmp_path / "base.json")
    assert [a.name for a in after_restart.observe(7, {"eval/a": 0.5})] == ["forgetting"]
    # And with its best: a domain that rose before the restart is compared with that.
    ForgettingWatch(margin=0.1, state_file=tmp_path / "best.json").observe(0, {"eval/a": 0.2})
    ForgettingWatch(margin=0.1, state_file=tmp_path / "best.json").observe(5, {"eval/a": 0.7})
    resumed_watch = ForgettingWatch(margin=0.1, state_file=tmp_path / "best.json")
    assert "its best, 0.700 at step 5" in resumed_watch.observe(9, {"eval/a": 0.5})[0].message
    # A state file from before the best was kept holds the base scores alone.
    (tmp_path / "old.json").write_text('{"a": 0.8}')
    assert len(ForgettingWatch(margin=0.1, state_file=tmp_path / "old.json").observe(3, {"eval/a": 0.6})) == 1
