"""A checkpoint's model card (page, Markdown export, REST): base model, data and verifier versions, held-out
scores of the base model against the checkpoint per domain and per prompt-length bucket, the reward curve
and the alarms up to the checkpoint's step, cost and time; another team's checkpoint is a 404."""

import pytest

from anneal.datasets.services import dataset_version_create_from_rows
from anneal.training.events import job_events_record
from anneal.training.state import checkpoint_record
from tests.world import ROWS, api_client, page_client


def _eval(step, add, sub, by_length):
    payload = {"step": step, "eval/mean": (add + sub) / 2, "eval/add": add, "eval/sub": sub}
    for bound, score in by_length.items():
        payload[f"eval_length/{bound}/mean"] = score
        payload[f"eval_length_rows/{bound}"] = 4
    return ("metric", payload)


@pytest.fixture
def card_job(world, launch, tmp_path):
    held_out = dataset_version_create_from_rows(
        team=world["core"], user=world["owner"], name="held-out sums", rows=ROWS
    )
    job = launch("adder", eval_version=held_out, max_steps=10)
    events = [_eval(0, 0.25, 0.5, {8: 0.3, 16: 0.1})]
    events += [("metric", {"step": s, "reward": s / 10, "pass_rate": s / 20}) for s in range(1, 11)]
    events += [
        _eval(4, 0.75, 0.5, {8: 0.8, 16: 0.4}),
        ("alarm", {"name": "length_drift", "step": 3, "message": "completions grew 3x"}),
        ("alarm", {"name": "no_signal", "step": 9, "message": "after the checkpoint"}),
        _eval(10, 0.9, 0.6, {8: 0.9, 16: 0.5}),
    ]
    job_events_record(job_id=job.pk, events=events)
    checkpoint = checkpoint_record(job=job, step=5, location=str(tmp_path / "ckpt"), code_version="abc123")
    return job, checkpoint


def test_the_card_compares_the_base_model_with_the_checkpoint_s_own_evaluation(world, card_job):
    job, checkpoint = card_job
    response = api_client(world["teammate"]).get(f"/api/v1/checkpoints/{checkpoint.pk}/card")
    assert response.status_code == 200, response.content
    card = response.json()
    assert card["base_model"] == "tiny" and card["code_version"] == "abc123"
    assert [d["dataset"] for d in card["datasets"]] == ["sums"] and card["held_out_dataset"]["rows"] == 8
    assert [(v["verifier"], v["version"], v["type"]) for v in card["verifiers"]] == [
        ("exact", 1, "exact_match")
    ]
    # The checkpoint at step 5 is scored by the evaluation at step 4, not the final one at step 10.
    held = card["held_out"]
    assert held["evaluated_at_step"] == 4
    rows = {r["domain"]: r for r in held["rows"]}
    assert rows["add"]["base"] == 0.25 and rows["add"]["checkpoint"] == 0.75
    assert rows["add"]["change"] == pytest.approx(0.5) and rows["sub"]["change"] == pytest.approx(0.0)
    assert [(r["up_to_tokens"], r["base"], r["checkpoint"]) for r in card["held_out_by_length"]["rows"]] == [
        (8, 0.3, 0.8),
        (16, 0.1, 0.4),
    ]
    assert card["curves"]["reward"] == [[s, s / 10] for s in range(1, 6)]
    assert [a["name"] for a in card["alarms"]] == ["length_drift"]
    assert card["cost"]["currency"] == "USD" and card["settings"]["max_steps"] == 10


def test_the_markdown_export_carries_the_same_tables(world, card_job):
    _, checkpoint = card_job
    response = api_client(world["owner"]).get(f"/api/v1/checkpoints/{checkpoint.pk}/card/markdown")
    assert response.status_code == 200 and response["Content-Type"].startswith("text/markdown")
    text = response.content.decode()
    assert text.startswith("# Model card: adder, step 5")
    assert (
        "| add | 0.250 | 0.750 | +50.0 points |" in text and "| sub | 0.500 | 0.500 | +0.0 points |" in text
    )
    assert "| mean | 8 | 4 | 0.300 | 0.800 |" in text
    assert "**length_drift**" in text and "no_signal" not in text
    assert "| 5 | 0.500 |" in text  # the curve ends at the checkpoint's step
    asked = api_client(world["owner"]).get(
        f"/api/v1/checkpoints/{checkpoint.pk}/card/markdown", HTTP_ACCEPT="text/markdown"
    )
    assert asked.status_code == 200 and asked.content.decode() == text


def test_the_page_shows_the_card_links_its_export_and_the_job_page_links_the_card(world, card_job):
    job, checkpoint = card_job
    client = page_client(world["owner"])
    page = client.get(f"/checkpoints/{checkpoint.pk}/card/").content.decode()
    assert "Model card: adder, step 5" in page and "+50.0 points" in page
    assert f"/checkpoints/{checkpoint.pk}/card.md" in page and "<polyline points=" in page
    assert "length_drift" in page and "after the checkpoint" not in page
    download = client.get(f"/checkpoints/{checkpoint.pk}/card.md")
    assert download.status_code == 200 and "attachment" in download["Content-Disposition"]
    assert download.content.decode().startswith("# Model card: adder, step 5")
    assert f"/checkpoints/{checkpoint.pk}/card/" in client.get(f"/jobs/{job.pk}/").content.decode()


def test_a_job_without_held_out_rows_says_so_instead_of_an_empty_table(world, launch, tmp_path):
    job = launch("plain", max_steps=2)
    checkpoint = checkpoint_record(job=job, step=2, location=str(tmp_path / "c"), code_version="x")
    page = page_client(world["owner"]).get(f"/checkpoints/{checkpoint.pk}/card/").content.decode()
    assert "the job was launched without a held-out set" in page and "No reward was reported" in page
    text = (
        api_client(world["owner"]).get(f"/api/v1/checkpoints/{checkpoint.pk}/card/markdown").content.decode()
    )
    assert "No held-out evaluation" in text and "None raised." in text


def test_another_team_s_checkpoint_is_not_found(world, card_job):
    _, checkpoint = card_job
    outsider = api_client(world["outsider"])
    assert outsider.get(f"/api/v1/checkpoints/{checkpoint.pk}/card").status_code == 404
    assert outsider.get(f"/api/v1/checkpoints/{checkpoint.pk}/card/markdown").status_code == 404
    pages = page_client(world["outsider"])
    assert pages.get(f"/checkpoints/{checkpoint.pk}/card/").status_code == 404
    assert pages.get(f"/checkpoints/{checkpoint.pk}/card.md").status_code == 404


def test_a_single_domain_is_listed_once_by_length_not_again_as_the_mean(world, launch, tmp_path):
    job = launch("one", max_steps=4)
    evaluation = {"eval/mean": 0.5, "eval/all": 0.5, "eval_length/8/mean": 0.5, "eval_length/8/all": 0.5}
    job_events_record(
        job_id=job.pk,
        events=[
            ("metric", {"step": 0, **evaluation}),
            ("metric", {"step": 4, **evaluation, "eval_length/8/all": 0.75}),
        ],
    )
    checkpoint = checkpoint_record(job=job, step=4, location=str(tmp_path / "c"), code_version="x")
    card = api_client(world["owner"]).get(f"/api/v1/checkpoints/{checkpoint.pk}/card").json()
    assert [(r["domain"], r["checkpoint"]) for r in card["held_out_by_length"]["rows"]] == [("all", 0.75)]


def test_an_agent_job_s_card_shows_its_habits_on_held_out_tasks_base_against_checkpoint(
    world, launch, tmp_path
):
    job = launch("agent habits", max_steps=10)

    def habits(step, solved, tested, valid, turns):
        payload = {"step": step, "eval/repo": solved, "eval/mean": solved, "eval_agent/solved": solved}
        payload |= {"eval_agent/tested_before_finish": tested, "eval_agent/valid_calls": valid}
        payload |= {"eval_agent/edited": solved + 0.125, "eval_agent/edited_then_tested": solved}
        payload |= {"eval_agent/turns": turns, "eval_agent/tests": 0.5, "eval_agent/episodes": 8.0}
        return ("metric", payload)

    events = [habits(0, 0.0, 0.25, 0.35, 2.5), habits(5, 0.125, 0.5, 0.6, 3.0), habits(10, 0.0, 0.0, 0.1, 4)]
    job_events_record(job_id=job.pk, events=events)
    checkpoint = checkpoint_record(job=job, step=5, location=str(tmp_path / "ckpt"), code_version="abc")
    card = api_client(world["owner"]).get(f"/api/v1/checkpoints/{checkpoint.pk}/card").json()
    agent = card["held_out_agent"]
    assert agent["evaluated_at_step"] == 5
    assert [(r["habit"], r["base"], r["checkpoint"]) for r in agent["rows"]] == [
        ("solved", 0.0, 0.125),
        ("tested_before_finish", 0.25, 0.5),
        ("edited", 0.125, 0.25),
        ("edited_then_tested", 0.0, 0.125),
        ("valid_calls", 0.35, 0.6),
        ("tests", 0.5, 0.5),
        ("turns", 2.5, 3.0),
    ]
    text = (
        api_client(world["owner"]).get(f"/api/v1/checkpoints/{checkpoint.pk}/card/markdown").content.decode()
    )
    assert "| ran the tests after the last edit (or at all), then finished | 25% | 50% |" in text
    assert "| changed the code, ran the tests after, then finished | 0% | 12% |" in text
    assert "| turns per episode | 2.50 | 3.00 |" in text
    page = page_client(world["owner"]).get(f"/checkpoints/{checkpoint.pk}/card/")
    assert page.status_code == 200 and b'id="card-agent-habits"' in page.content
    assert b"<td>turns with a well-formed tool call</td><td>35%</td><td>60%</td>" in page.content
    assert agent["episodes_per_task"] == 1 and "One greedy episode per held-out task;" in text

    # A job that sampled several episodes per task says so, on the card and its export.
    job.spec = {**job.spec, "environment": {"eval_episodes": 4}}
    job.save(update_fields=["spec"])
    card = api_client(world["owner"]).get(f"/api/v1/checkpoints/{checkpoint.pk}/card").json()
    assert card["held_out_agent"]["episodes_per_task"] == 4
    text = (
        api_client(world["owner"]).get(f"/api/v1/checkpoints/{checkpoint.pk}/card/markdown").content.decode()
    )
    assert "4 episodes per held-out task, sampled at the job's temperature" in text
    page = page_client(world["owner"]).get(f"/checkpoints/{checkpoint.pk}/card/")
    assert b"4 episodes per held-out task, sampled" in page.content


def test_a_job_that_played_no_episodes_has_no_agent_section(world, card_job):
    _, checkpoint = card_job
    assert (
        api_client(world["owner"]).get(f"/api/v1/checkpoints/{checkpoint.pk}/card").json()["held_out_agent"]
        is None
    )
