"""The job page in words: curated metric groups, readable log lines, a first paint that agrees with the
stream (the step in progress, the latest metrics) and checkpoints by name with Deploy for writers only."""

import re

import pytest

from anneal.training.job_page import log_line, metric_groups, readable_log_message
from anneal.training.models import Checkpoint
from anneal.training.state import attempt_events_record
from tests.world import api_client, page_client

# One step's metric event as a TRL run reports it (gpu_jobs.grpo.metric_payload), plus Anneal's own keys.
TRL_STEP = {
    "step": 3,
    "loss": 0.0123,
    "grad_norm": 0.51,
    "learning_rate": 1e-05,
    "num_tokens": 4096.0,
    "completion_length": 7.25,
    "completions/min_length": 4.0,
    "completions/max_length": 12.0,
    "completions/clipped_ratio": 0.25,
    "completions/mean_terminated_length": 6.0,
    "reward": 0.4,
    "reward_std": 0.2,
    "rewards/exact": 0.5,
    "rewards/format": 0.3,
    "rewards/exact/std": 0.1,
    "frac_reward_zero_std": 0.5,
    "kl": 0.002,
    "entropy": 1.7,
    "clip_ratio/low_mean": 0.0,
    "clip_ratio/low_min": 0.0,
    "clip_ratio/high_mean": 0.01,
    "clip_ratio/high_max": 0.02,
    "clip_ratio/region_mean": 0.01,
    "step_time": 1.234,
    "pass_rate": 0.375,
    "pass_rate/math": 0.5,
    "pass_rate/code": 0.25,
    "verify_time/exact": 0.004,
    "epoch": 0.2,
}


def test_metric_groups_name_each_curated_metric_once_in_words():
    groups = metric_groups(TRL_STEP)
    titles = [group["title"] for group in groups]
    assert titles == [
        "Reward",
        "Pass rate",
        "Loss",
        "KL and entropy",
        "Completion length",
        "Speed",
        "Clipping",
        "Learning signal",
    ]
    rows = {row["key"]: (row["label"], row["value"]) for group in groups for row in group["rows"]}
    keys = [row["key"] for group in groups for row in group["rows"]]
    assert len(keys) == len(set(keys)), "a metric shown twice"
    assert rows["rewards/exact"] == ("verifier exact", "0.5000")
    assert rows["pass_rate/math"] == ("domain math", "50.0%")
    assert rows["pass_rate"] == ("all verifiers passed", "37.5%")
    assert rows["kl"][0] == "KL from the base model"
    assert rows["step_time"] == ("step time", "1.23 s")
    assert rows["num_tokens"][1] == "4,096"
    assert rows["learning_rate"][1] == "1.00e-05"
    # The trainer's minutiae stay under "Show all metrics": none of these is curated.
    for raw in ("clip_ratio/low_min", "clip_ratio/high_max", "rewards/exact/std", "epoch", "step"):
        assert raw not in rows
    # Every label reads as words, not as a trainer's key.
    assert not [label for label, _ in rows.values() if re.search(r"\w/\w|_", label)]


def test_metric_groups_of_no_metric_is_empty_and_evaluation_has_its_group():
    assert metric_groups({}) == []
    groups = metric_groups({"step": 0, "eval/mean": 0.25, "eval/math": 0.5})
    assert groups == [
        {
            "title": "Held-out evaluation",
            "rows": [
                {"key": "eval/mean", "label": "all domains", "value": "0.2500"},
                {"key": "eval/math", "label": "domain math", "value": "0.5000"},
            ],
        }
    ]


def test_log_lines_read_as_text_without_dict_reprs_or_server_paths():
    old = (
        "training finished: {'steps': 10, 'reward': 0.123456, 'checkpoint': 'job-4/step-10', "
        "'model_dir': '/srv/anneal/work/job-4/trainer/final', 'train_seconds': 31.5, 'stopped_for': None}"
    )
    text = readable_log_message(old)
    assert "{'" not in text and "/srv/" not in text
    assert text == "training finished: steps 10, reward 0.1235, checkpoint job-4/step-10, train_seconds 31.5"
    assert readable_log_message("GRPO finished; checkpoint at /var/lib/anneal/checkpoints/job-4/step-10") == (
        "GRPO finished; checkpoint at (server path)"
    )
    # Metric names and ordinary text are left alone; a brace that is not a dict stays as written.
    plain = "reward of rewards/exact rose; {not a dict}"
    assert readable_log_message(plain) == plain
    assert log_line({"message": "hello", "level": "warning"}) == {"level": "warning", "message": "hello"}
    assert log_line({"message": "hello", "level": "<script>"})["level"] == "info"


@pytest.fixture
def running(launch):
    job = launch("live", max_steps=10, save_steps=5)
    job.state = "running"
    job.save(update_fields=["state"])
    return job


def record(job, events):
    assert attempt_events_record(job_id=job.pk, attempt=job.attempt, events=events, pause_on=set())


def test_first_paint_shows_the_step_in_progress_and_why_metrics_are_missing(world, running):
    record(running, [("rollout", {"step": 1, "prompt": "1+1=", "completion": "2", "reward": 1.0})])
    html = page_client(world["owner"]).get(f"/jobs/{running.pk}/").content.decode()
    assert "step 1 / 10" in html
    assert "No metrics yet: step 1 is running; its metrics arrive when it ends." in html
    assert "No evaluation: this job has no held-out set." in html


def test_first_paint_groups_the_latest_metrics_and_folds_the_raw_keys(world, running):
    record(running, [("metric", {**TRL_STEP, "step": 1}), ("metric", {**TRL_STEP, "step": 2, "reward": 0.9})])
    html = page_client(world["owner"]).get(f"/jobs/{running.pk}/").content.decode()
    assert "step 2 / 10" in html
    groups_html = html.split('id="metric-groups"')[1].split('id="metrics-all"')[0]
    assert "mean reward</dt><dd>0.9000" in groups_html
    assert "clip_ratio/low_min" not in groups_html
    raw_html = html.split('id="metrics-all"')[1].split("</details>")[0]
    assert "<summary>Show all metrics" in raw_html and "clip_ratio/low_min" in raw_html


def test_a_checkpoint_shows_by_name_with_deploy_for_writers_only(world, running, tmp_path):
    location = tmp_path / "checkpoints" / f"job-{running.pk}" / "step-5"
    checkpoint = Checkpoint.objects.create(job=running, step=5, location=str(location))
    record(running, [("checkpoint", {"step": 5, "location": f"job-{running.pk}/step-5"})])
    # The stream carries the checkpoint's id, so a checkpoint that arrives live gets its Deploy link.
    assert running.events.get(kind="checkpoint").payload["checkpoint"] == checkpoint.pk
    owner_html = page_client(world["owner"]).get(f"/jobs/{running.pk}/").content.decode()
    viewer_html = page_client(world["teammate"]).get(f"/jobs/{running.pk}/").content.decode()
    for html in (owner_html, viewer_html):
        assert '<span class="checkpoint-name">step 5</span>' in html
        assert str(tmp_path) not in html
    assert f"/deployments/new/?checkpoint={checkpoint.pk}" in owner_html
    assert "/deployments/new/" not in viewer_html
    assert "deploying one needs the owner or expert role" in viewer_html


def test_the_events_api_hands_out_old_log_lines_as_text(world, running):
    old = "training finished: {'steps': 2, 'model_dir': '/srv/anneal/job-1/trainer/final'}"
    record(running, [("log", {"message": old})])
    body = api_client(world["owner"]).get(f"/api/v1/jobs/{running.pk}/events").json()
    logs = [event["payload"] for event in body["results"] if event["kind"] == "log"]
    assert logs == [{"message": "training finished: steps 2", "level": "info"}]
