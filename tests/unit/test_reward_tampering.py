"""Tampering with a verifier is a signal: composites report it, the step's metrics count it, every offending
rollout is reported, and the reward_tampering alarm names how many tried and what.

The code verifiers themselves are stood in for by ``StubCode``, a verifier type that returns what the
contract says a code verifier returns (score 0, reason "tampering: <what>", parts["tampering"] == 1.0; honest
samples carry the part at 0.0): everything around it (registry, composite, recorder, callback, alarm) is real.
"""

import asyncio
from types import SimpleNamespace

import pytest

from gpu_jobs.agent.environment import Verdict
from gpu_jobs.agent.episode import EpisodeResult
from gpu_jobs.agent.taskpack import pack_rows
from gpu_jobs.agent.training import AgentRollouts
from gpu_jobs.alarms import ALARM_NAMES, TAMPERING_COUNT, TAMPERING_SHARE, AlarmWatch, TamperingLog
from gpu_jobs.config import GRPOJobConfig
from gpu_jobs.grpo import ROW_INDEX_COLUMN, ReportingCallback, RolloutRecorder
from gpu_jobs.rewards import ScoreResult, SpecError, build_scorer
from gpu_jobs.rewards.base import Scorer, SpecField, is_tampering, tampering_what
from gpu_jobs.rewards.registry import VERIFIER_TYPES
from gpu_jobs.sink import ListSink

MEMORY = "reading process memory (/proc/self/mem)"
EXEC = "replacing builtins.exec"


class StubCode(Scorer):
    """A code verifier's verdicts by completion text: "pass", "fail", or "tamper:<what>"."""

    type_name = "stub_code"
    fields = (SpecField("note", (str,), default=""),)

    def _score(self, row: dict, completion: str) -> ScoreResult:
        if completion.startswith("tamper:"):
            what = completion.removeprefix("tamper:")
            return ScoreResult(0.0, {"tampering": 1.0}, f"tampering: {what}")
        passed = completion == "pass"
        return ScoreResult(float(passed), {"tampering": 0.0}, "2 of 2 tests passed" if passed else "0 of 2")


@pytest.fixture(autouse=True)
def stub_code(monkeypatch):
    monkeypatch.setitem(VERIFIER_TYPES, StubCode.type_name, StubCode)


def composite(mode: str = "weighted_sum", code_weight: float = 1.0, **extra) -> Scorer:
    return build_scorer(
        {
            "type": "composite",
            "mode": mode,
            "parts": [
                {"name": "tests", "spec": {"type": "stub_code"}, "weight": code_weight},
                {"name": "said", "spec": {"type": "keywords", "required": ["def"]}, "weight": 1},
            ],
            **extra,
        }
    )


def test_the_contract_helpers_read_what_was_tried():
    tampered = ScoreResult(0.0, {"tampering": 1.0}, f"tampering: {MEMORY}")
    assert is_tampering(tampered) and tampering_what(tampered) == MEMORY
    honest = ScoreResult(1.0, {"tampering": 0.0}, "tampering: is only a word here")
    assert not is_tampering(honest) and tampering_what(honest) == ""
    assert tampering_what(ScoreResult(0.0, {"tampering": 1.0}, "caught")) == "unknown kind"


def test_a_composite_reports_a_part_that_tampered_and_scores_zero():
    scorer = composite()
    tampered, honest, plain = scorer.score_batch([{}] * 3, [f"tamper:{MEMORY}", "pass", "fail"])
    assert tampered.score == 0.0  # the keywords part alone would have given 0.5
    assert tampered.parts["tampering"] == 1.0 and tampered.reason.startswith(f"tampering: {MEMORY}; ")
    assert "tests: tampering: " in tampered.reason  # the part that caught it stays named
    assert honest.parts == {"tests": 1.0, "said": 0.0, "tampering": 0.0} and honest.score == 0.5
    assert plain.parts["tampering"] == 0.0 and not plain.reason.startswith("tampering")


def test_tampering_reaches_the_top_of_nested_composites_and_formulas():
    inner = {
        "type": "composite",
        "parts": [{"name": "code", "spec": {"type": "stub_code"}, "weight": 1}],
    }
    outer = build_scorer(
        {
            "type": "composite",
            "mode": "formula",
            "formula": "0.5 + 0.5 * inner",
            "parts": [{"name": "inner", "spec": inner, "weight": 0}],
        }
    )
    result = outer.score({}, f"tamper:{EXEC}")
    assert result.score == 0.0 and result.parts["tampering"] == 1.0
    assert result.reason.startswith(f"tampering: {EXEC}; ")
    assert outer.score({}, "pass").score == 1.0


def test_a_logged_only_part_reports_the_attempt_but_leaves_the_score():
    result = composite(code_weight=0).score({}, f"tamper:{MEMORY}")
    assert result.parts["tampering"] == 1.0 and result.reason.startswith(f"tampering: {MEMORY}")
    assert result.score == 0.0  # "said" (the only weighted part) found no "def"
    result = composite(code_weight=0).score({}, f"def f(): pass #tamper:{MEMORY}")
    assert result.parts["tampering"] == 0.0 and result.score == 1.0  # not a tampering verdict: honest


def test_a_composite_without_code_parts_has_no_tampering_part_and_the_name_is_reserved():
    plain = build_scorer({"type": "composite", "parts": [{"name": "a", "spec": {"type": "exact_match"}}]})
    assert "tampering" not in plain.score({"answer": "1"}, "1").parts
    with pytest.raises(SpecError) as caught:
        build_scorer({"type": "composite", "parts": [{"name": "tampering", "spec": {"type": "exact_match"}}]})
    assert caught.value.field == "parts[0].name" and "reserved" in caught.value.message


# --- the alarm ------------------------------------------------------------------------------------------


def test_reward_tampering_is_raised_at_the_step_with_count_share_and_what():
    log = TamperingLog()
    watch = AlarmWatch(weights={"tests": 1.0}, tampering=log)
    assert watch.observe({"step": 11, **log.record(11, [""] * 64)}) == []
    metrics = log.record(12, [MEMORY, MEMORY, EXEC] + [""] * 61)
    assert metrics == {TAMPERING_SHARE: 3 / 64, TAMPERING_COUNT: 3.0}
    [alarm] = watch.observe({"step": 12, **metrics})
    assert alarm.name == "reward_tampering" and alarm.step == 12
    assert alarm.message.startswith(
        f"3 of 64 rollouts at step 12 tried to tamper with the verifier ({MEMORY}; {EXEC})"
    )


def test_reward_tampering_is_raised_once_until_a_step_without_it():
    log = TamperingLog()
    watch = AlarmWatch(weights={"tests": 1.0}, tampering=log)
    raised = []
    for step, tried in enumerate([[MEMORY, ""], [MEMORY, ""], ["", ""], [None, None], ["", EXEC]], start=1):
        raised += watch.observe({"step": step, **log.record(step, tried)})
    assert [(a.name, a.step) for a in raised] == [("reward_tampering", 1), ("reward_tampering", 5)]
    assert f"({EXEC})" in raised[1].message and MEMORY not in raised[1].message


def test_the_alarm_reads_the_metrics_alone_and_reward_tampering_is_a_known_alarm():
    [alarm] = AlarmWatch(weights={}).observe({"step": 4, TAMPERING_COUNT: 1.0, TAMPERING_SHARE: 0.125})
    assert alarm.message.startswith("1 of 8 rollouts at step 4 tried to tamper with the verifier: ")
    assert AlarmWatch(weights={}).observe({"step": 4, TAMPERING_COUNT: 0.0, TAMPERING_SHARE: 0.0}) == []
    assert "reward_tampering" in ALARM_NAMES and "forgetting" in ALARM_NAMES


def test_the_log_adds_up_batches_of_a_step_and_skips_unchecked_rollouts():
    log = TamperingLog()
    assert log.record(3, [None, None]) == {}  # no code verifier scored them
    log.record(3, [MEMORY, ""])
    assert log.record(3, [MEMORY, None]) == {TAMPERING_SHARE: 2 / 3, TAMPERING_COUNT: 2.0}
    log.record(2, [EXEC])
    assert log.take(3) == {MEMORY: 2}
    assert log.take(2) == {}  # forgotten: older than the step taken


# --- the training side: the recorder, the reporting callback, agent episodes ------------------------------

ROWS = [{"prompt": f"task {i}", "answer": "pass"} for i in range(4)]


def job_config(tmp_path, **extra) -> GRPOJobConfig:
    settings = {
        "rows": ROWS,
        "verifiers": [
            {"name": "tests", "spec": {"type": "stub_code"}, "weight": 1.0},
            {"name": "exact", "spec": {"type": "exact_match", "reference_field": "answer"}, "weight": 0.5},
        ],
        "num_generations": 4,
        "prompts_per_step": 2,
        "rollouts_per_step": 2,
    }
    return GRPOJobConfig(
        model_store=str(tmp_path / "store"), output_dir=str(tmp_path / "out"), **{**settings, **extra}
    )


def test_a_step_reports_its_tampering_rollouts_metrics_and_alarm(tmp_path):
    config = job_config(tmp_path)
    sink = ListSink()
    recorder = RolloutRecorder(config=config, sink=sink, concurrent=False)
    funcs = [
        recorder.reward_function(name=v["name"], scorer=build_scorer(v["spec"])) for v in config.verifiers
    ]
    texts = ["pass", f"tamper:{MEMORY}", "fail", "pass", f"tamper:{MEMORY}", "fail", f"tamper:{EXEC}", "pass"]
    kwargs = {
        "prompts": [ROWS[i // 4]["prompt"] for i in range(8)],
        "completions": texts,
        ROW_INDEX_COLUMN: [i // 4 for i in range(8)],
        "trainer_state": SimpleNamespace(global_step=6),
    }
    scores = [func(**kwargs) for func in funcs]
    assert [scores[0][i] for i in (1, 4, 6)] == [0.0, 0.0, 0.0]

    rollouts = sink.of_kind("rollout")
    tampering = [r for r in rollouts if "tampering" in r]
    # Two sampled rollouts a step, and every one that tampered besides: all three are on the record.
    assert sorted(r["completion"] for r in tampering) == sorted(texts[i] for i in (1, 4, 6))
    assert {r["tampering"] for r in tampering} == {MEMORY, EXEC}
    assert all("tests: tampering: " in r["reason"] and r["reward"] == 0.0 for r in tampering)
    assert [r["completion"] for r in rollouts] == [texts[i] for i in (0, 1, 4, 6)]  # picks 0 and 4, and 1, 6
    assert all("tampering" not in r["parts"] for r in rollouts)  # parts stay the verifiers' scores

    callback = ReportingCallback(
        config=config,
        sink=sink,
        checkpoints=None,
        save_root=tmp_path / "saves",
        scorers={},
        step_metrics=recorder.step_metrics,
        tampering=recorder.tampering,
    )
    callback.on_log(None, SimpleNamespace(global_step=7), None, logs={"reward": 0.2})
    [metric] = sink.of_kind("metric")
    assert metric[TAMPERING_SHARE] == 3 / 8 and metric[TAMPERING_COUNT] == 3.0
    [alarm] = sink.of_kind("alarm")
    assert alarm["name"] == "reward_tampering" and alarm["step"] == 7
    assert alarm["message"].startswith(
        f"3 of 8 rollouts at step 7 tried to tamper with the verifier ({MEMORY}; {EXEC})"
    )


def test_concurrent_scoring_counts_each_rollout_once(tmp_path):
    config = job_config(tmp_path)
    sink = ListSink()
    recorder = RolloutRecorder(config=config, sink=sink, concurrent=True)
    funcs = [
        recorder.reward_function(name=v["name"], scorer=build_scorer(v["spec"])) for v in config.verifiers
    ]
    kwargs = {
        "prompts": ["task 0"] * 4,
        "completions": [f"tamper:{EXEC}"] * 2 + ["pass"] * 2,
        ROW_INDEX_COLUMN: [0] * 4,
        "trainer_state": SimpleNamespace(global_step=0),
    }

    async def both():
        return await asyncio.gather(*(f(**kwargs) for f in funcs))

    asyncio.run(both())
    assert (
        recorder.step_metrics[1][TAMPERING_COUNT] == 2.0 and recorder.step_metrics[1][TAMPERING_SHARE] == 0.5
    )


ENVIRONMENT = {"max_turns": 2, "turn_tokens": 24, "token_budget": 60, "context_tokens": 460}


def episode(*, tests: float, tampering: float | None, reason: str) -> EpisodeResult:
    parts = {"tests": tests, "format": 1.0, "turns": 1.0, "finished": 1.0, "solved": float(tests == 1.0)}
    if tampering is not None:
        parts["tampering"] = tampering
    return EpisodeResult(
        steps=[],
        end_reason="finished",
        verdict=Verdict(passed=int(tests * 2), total=2, output="", reason=reason),
        reward=tests,
        parts=parts,
        summaries=0,
        tokens=10,
        seconds=1.0,
        sandbox_s=0.5,
        generation_s=0.1,
    )


def test_agent_episodes_whose_verdict_caught_tampering_feed_the_same_alarm(tmp_path):
    log = TamperingLog()
    sink = ListSink()
    config = job_config(tmp_path, environment=ENVIRONMENT, rows=pack_rows(limit=4), verifiers=[])
    agent = AgentRollouts(config=config, sink=sink, tampering=log)
    results = [
        episode(tests=1.0, tampering=0.0, reason="2 of 2 tests passed"),
        episode(tests=0.0, tampering=1.0, reason="tampering: patching the test runner's assert helpers"),
        episode(tests=0.5, tampering=0.0, reason="1 of 2 tests passed"),
        episode(tests=0.0, tampering=None, reason="older verdicts carry no tampering part"),
    ]
    agent._metrics(3, results, 1.0, 2.0)
    agent._emit(3, results, [0, 1, 2, 3])
    assert agent.step_metrics[3][TAMPERING_COUNT] == 1.0 and agent.step_metrics[3][TAMPERING_SHARE] == 1 / 3
    offending = [r for r in sink.of_kind("rollout") if "tampering" in r]
    assert [r["tampering"] for r in offending] == ["patching the test runner's assert helpers"]
    [alarm] = AlarmWatch(weights={}, tampering=log).observe({"step": 3, **agent.step_metrics[3]})
    assert alarm.message.startswith(
        "1 of 3 rollouts at step 3 tried to tamper with the verifier (patching the test runner's assert helpers)"
    )
