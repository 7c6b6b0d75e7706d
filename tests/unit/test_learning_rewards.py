"""The reward path of a training step: every verifier of a step in flight at once, each distinct
(row, completion) scored once, and the step reported once whichever verifier finishes last."""

import asyncio
import threading
from types import SimpleNamespace

from gpu_jobs.addition import addition_rows
from gpu_jobs.config import GRPOJobConfig
from gpu_jobs.grpo import ROW_INDEX_COLUMN, RolloutRecorder, score_distinct
from gpu_jobs.rewards import ScoreResult, build_scorer
from gpu_jobs.sink import ListSink

ROWS = addition_rows(n=4, seed=5)


class CountingExactMatch:
    """The real exact_match scorer, recording which completions it was asked to score."""

    def __init__(self) -> None:
        self.inner = build_scorer({"type": "exact_match", "reference_field": "answer"})
        self.batches: list[list[str]] = []

    def score_batch(self, rows: list[dict], completions: list[str]) -> list[ScoreResult]:
        self.batches.append(list(completions))
        return self.inner.score_batch(rows, completions)


class BarrierScorer:
    """Passes only if another scorer reaches the barrier at the same time: proves both run concurrently."""

    def __init__(self, barrier: threading.Barrier, score: float) -> None:
        self.barrier = barrier
        self.score = score

    def score_batch(self, rows: list[dict], completions: list[str]) -> list[ScoreResult]:
        self.barrier.wait(timeout=10)  # raises BrokenBarrierError when run one after another
        return [ScoreResult(self.score, reason=f"scored {self.score}") for _ in completions]


def recorder_config(tmp_path, verifiers) -> GRPOJobConfig:
    return GRPOJobConfig(
        model_store=str(tmp_path / "store"),
        output_dir=str(tmp_path / "out"),
        rows=ROWS,
        verifiers=verifiers,
        num_generations=2,
        prompts_per_step=2,
        rollouts_per_step=2,
    )


def batch(rows_idx: list[int], texts: list[str]) -> dict:
    return {
        "prompts": [ROWS[i]["prompt"] for i in rows_idx],
        "completions": texts,
        ROW_INDEX_COLUMN: rows_idx,
        "trainer_state": SimpleNamespace(global_step=6),
    }


def test_each_distinct_row_and_completion_is_scored_once_and_shared_by_its_copies():
    scorer = CountingExactMatch()
    right, wrong = ROWS[0]["answer"], "x"
    keys = [0, 0, 0, 1, 1, 1]
    texts = [right, right, wrong, right, right, right]  # ROWS[1]'s answer differs from ROWS[0]'s
    results, runs = score_distinct(scorer, ROWS, keys, texts)
    assert runs == 3
    assert scorer.batches == [[right, wrong, right]]
    assert [r.score for r in results] == [1.0, 1.0, 0.0] + [float(ROWS[1]["answer"] == right)] * 3
    # The same completion text for another row is a different pair and is scored against that row.
    assert results[3] is results[4] and results[0] is not results[3]


def test_concurrent_reward_functions_run_together_and_report_the_step_once(tmp_path):
    verifiers = [
        {"name": "slow a", "spec": {"type": "exact_match"}, "weight": 1.0},
        {"name": "slow b", "spec": {"type": "exact_match"}, "weight": 0.5},
    ]
    sink = ListSink()
    recorder = RolloutRecorder(config=recorder_config(tmp_path, verifiers), sink=sink, concurrent=True)
    barrier = threading.Barrier(2)
    funcs = [
        recorder.reward_function(name="slow a", scorer=BarrierScorer(barrier, 1.0)),
        recorder.reward_function(name="slow b", scorer=BarrierScorer(barrier, 0.0)),
    ]
    assert all(asyncio.iscoroutinefunction(f) for f in funcs)
    assert [f.__name__ for f in funcs] == ["slow a", "slow b"]
    kwargs = batch([0, 0, 1, 1], ["1", "2", "3", "4"])

    async def both():
        return await asyncio.gather(*(f(**kwargs) for f in funcs))

    scores = asyncio.run(both())
    assert scores == [[1.0] * 4, [0.0] * 4]
    rollouts = sink.of_kind("rollout")
    assert len(rollouts) == 2
    assert all(r["step"] == 7 and r["parts"] == {"slow a": 1.0, "slow b": 0.0} for r in rollouts)
    assert all(r["reward"] == 1.0 for r in rollouts)
    metrics = recorder.step_metrics[7]
    assert metrics["pass_rate"] == 0.0
    assert metrics["verify_distinct/slow a"] == 4.0 and "verify_time/slow b" in metrics


def test_sequential_mode_keeps_plain_functions_and_scores_every_sample_without_distinct(tmp_path):
    verifiers = [{"name": "exact", "spec": {"type": "exact_match", "reference_field": "answer"}, "weight": 1}]
    sink = ListSink()
    recorder = RolloutRecorder(
        config=recorder_config(tmp_path, verifiers), sink=sink, concurrent=False, distinct=False
    )
    scorer = CountingExactMatch()
    reward = recorder.reward_function(name="exact", scorer=scorer)
    assert not asyncio.iscoroutinefunction(reward)
    answer = ROWS[0]["answer"]
    assert reward(**batch([0, 0, 0, 0], [answer, answer, answer, "0"])) == [1.0, 1.0, 1.0, 0.0]
    assert scorer.batches == [[answer, answer, answer, "0"]]
    assert recorder.step_metrics[7]["pass_rate"] == 0.75
    assert len(sink.of_kind("rollout")) == 2


def test_two_steps_scored_at_once_are_each_reported_with_their_own_results(tmp_path):
    """With generate_ahead, the next batch's rewards can start before the last batch's end (a loaded host):
    verifier a of step 7, a of step 8, b of step 7, b of step 8. Each step is reported once, with its own
    batch's results (before, step 8's a overwrote step 7's, step 7 was reported with it and step 8 never)."""
    from gpu_jobs.ahead import STEP_COLUMN

    verifiers = [
        {"name": "a", "spec": {"type": "exact_match", "reference_field": "answer"}, "weight": 1.0},
        {"name": "b", "spec": {"type": "exact_match", "reference_field": "answer"}, "weight": 1.0},
    ]
    sink = ListSink()
    recorder = RolloutRecorder(config=recorder_config(tmp_path, verifiers), sink=sink, concurrent=False)
    a = recorder.reward_function(name="a", scorer=build_scorer(verifiers[0]["spec"]))
    b = recorder.reward_function(name="b", scorer=build_scorer(verifiers[1]["spec"]))
    right = [ROWS[0]["answer"], ROWS[0]["answer"]]
    wrong = ["x", "y"]
    step_7 = {**batch([0, 0], right), STEP_COLUMN: [7, 7]}
    step_8 = {**batch([0, 0], wrong), STEP_COLUMN: [8, 8]}
    assert a(**step_7) == [1.0, 1.0] and a(**step_8) == [0.0, 0.0]
    assert sink.of_kind("rollout") == []  # neither step has all its verifiers yet
    assert b(**step_7) == [1.0, 1.0] and b(**step_8) == [0.0, 0.0]
    rollouts = sink.of_kind("rollout")
    assert sorted({r["step"] for r in rollouts}) == [7, 8]
    for rollout in rollouts:
        expected = 1.0 if rollout["step"] == 7 else 0.0
        assert rollout["parts"] == {"a": expected, "b": expected}, rollout
    assert recorder.step_metrics[7]["pass_rate"] == 1.0 and recorder.step_metrics[8]["pass_rate"] == 0.0
