"""The training alarms fire on the metric patterns they name, once per episode, and not on healthy runs."""

from gpu_jobs.alarms import AlarmWatch


def feed(watch: AlarmWatch, rows: list[dict]) -> list:
    raised = []
    for step, metrics in enumerate(rows, start=1):
        raised.extend(watch.observe({"step": step, **metrics}))
    return raised


def test_no_signal_fires_after_a_window_of_flat_groups_and_once():
    watch = AlarmWatch(weights={"exact": 1.0}, window=5)
    raised = feed(watch, [{"frac_reward_zero_std": 1.0}] * 12)
    assert [(a.name, a.step) for a in raised] == [("no_signal", 5)]
    assert "nothing to learn" in raised[0].message


def test_no_signal_rearms_after_the_condition_clears():
    watch = AlarmWatch(weights={"exact": 1.0}, window=3)
    rows = (
        [{"frac_reward_zero_std": 1.0}] * 3
        + [{"frac_reward_zero_std": 0.2}]
        + [{"frac_reward_zero_std": 0.95}] * 3
    )
    assert [a.step for a in feed(watch, rows)] == [3, 7]


def test_length_drift_names_both_lengths():
    watch = AlarmWatch(weights={"exact": 1.0}, window=4)
    raised = feed(watch, [{"completion_length": 3.0}] * 4 + [{"completion_length": 1.0}] * 4)
    assert [a.name for a in raised] == ["length_drift"]
    assert "from 3.0 to 1.0 tokens" in raised[0].message


def test_one_part_dominating_the_reward():
    watch = AlarmWatch(weights={"format": 1.0, "answer": 1.0}, window=3)
    raised = feed(watch, [{"rewards/format": 1.0, "rewards/answer": 0.0}] * 3)
    assert [a.name for a in raised] == ["part_dominates"]
    assert "'format'" in raised[0].message


def test_a_healthy_run_raises_nothing():
    watch = AlarmWatch(weights={"format": 1.0, "answer": 1.0}, window=3)
    rows = [
        {
            "frac_reward_zero_std": 0.4,
            "completion_length": 3.0 + (i % 2) * 0.2,
            "rewards/format": 0.8,
            "rewards/answer": 0.5,
        }
        for i in range(20)
    ]
    assert feed(watch, rows) == []


def test_agent_episodes_cut_short_by_a_limit_name_the_setting_to_raise():
    watch = AlarmWatch(weights={"environment": 1.0})
    cut = {"episode/end/timeout": 0.75, "episode/end/finished": 0.25}
    raised = feed(watch, [cut, cut, {"episode/end/finished": 1.0}, cut, cut, cut, cut])
    assert [(a.name, a.step) for a in raised] == [("episodes_cut_short", 6)]
    assert "75% of the episodes" in raised[0].message and "episode_timeout_s" in raised[0].message
    several = {
        "episode/end/context_limit": 0.375,
        "episode/end/token_budget": 0.25,
        "episode/end/turn_limit": 0.375,
    }
    raised = feed(AlarmWatch(weights={"environment": 1.0}), [several] * 3)
    assert [a.name for a in raised] == ["episodes_cut_short"] and "context_tokens" in raised[0].message
    # Running out of turns, or finishing, is how an episode is meant to end; steps of other jobs have no episodes.
    ended = {"episode/end/turn_limit": 0.6, "episode/end/finished": 0.4}
    assert feed(AlarmWatch(weights={"environment": 1.0}), [ended] * 6 + [{"reward": 1.0}] * 6) == []


def test_agent_tool_calls_fading_from_the_first_step_name_what_to_change():
    watch = AlarmWatch(weights={"environment": 1.0})
    shares = [0.92, 0.6, 0.5, 0.1, 0.0, 0.8, 0.3]
    raised = feed(watch, [{"episode/format": share, "episode/end/turn_limit": 1.0} for share in shares])
    # Below half of step 1's 92% at step 4 (50% is not), once while it lasts; again at step 7, after step 6's 80%.
    assert [(a.name, a.step) for a in raised] == [("tool_calls_fading", 4), ("tool_calls_fading", 7)]
    assert "from 92% at step 1 to 10%" in raised[0].message and "beta" in raised[0].message


def test_tool_calls_never_learned_or_steps_without_episodes_raise_no_fading():
    # A model that starts without the format (no warm-up) has nothing to lose; other jobs have no episodes.
    rows = [{"episode/format": share} for share in (0.1, 0.0, 0.05)] + [{"reward": 1.0}] * 3
    assert feed(AlarmWatch(weights={"environment": 1.0}), rows) == []
    steady = [{"episode/format": share} for share in (0.7, 0.5, 0.9, 0.4)]
    assert feed(AlarmWatch(weights={"environment": 1.0}), steady) == []
