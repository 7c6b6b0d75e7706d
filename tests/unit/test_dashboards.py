"""The Dash dashboards answer through django-plotly-dash with the signed-in user's teams only."""

import json

import pytest

from anneal.training.events import job_events_record
from tests.world import page_client

pytestmark = pytest.mark.django_db


@pytest.fixture
def runs(world, launch) -> dict:
    """An evaluated job of Core (ours) and one of Rivals (theirs) with the same metrics, and the owner's
    browser-less client."""
    ours = launch("ours", eval_version=launch.version())
    theirs = launch("theirs", team=world["rivals"], eval_version=launch.version(world["rivals"]))
    for job in (ours, theirs):
        job_events_record(
            job_id=job.pk,
            events=[
                ("metric", {"step": 0, "eval/mean": 0.2, "eval/math": 0.1, "eval/code": 0.3}),
                ("metric", {"step": 1, "reward": 0.5}),
                ("metric", {"step": 2, "reward": 0.7}),
                ("metric", {"step": 2, "eval/mean": 0.6, "eval/math": 0.5, "eval/code": 0.7}),
            ],
        )
    return {"client": page_client(world["owner"]), "ours": ours, "theirs": theirs}


def dash_update(client, app: str, output: str, inputs: list[dict]) -> dict:
    body = {"output": output, "outputs": [], "inputs": inputs, "changedPropIds": []}
    response = client.post(
        f"/django_plotly_dash/app/{app}/_dash-update-component",
        json.dumps(body),
        content_type="application/json",
    )
    assert response.status_code == 200, response.content[:500]
    return json.loads(response.content)["response"]


def test_the_page_embeds_both_dashboards(runs):
    page = runs["client"].get("/dashboards/")
    assert page.status_code == 200
    assert b"/django_plotly_dash/app/CompareRuns/" in page.content
    assert b"/django_plotly_dash/app/EvaluationHeatmap/" in page.content


def test_compare_runs_offers_and_draws_only_the_users_jobs(runs):
    client, ours, theirs = runs["client"], runs["ours"], runs["theirs"]
    choices = dash_update(
        client,
        "CompareRuns",
        "..jobs.options...jobs.value..",
        [{"id": "metric", "property": "id", "value": "metric"}],
    )
    offered = [option["value"] for option in choices["jobs"]["options"]]
    assert offered == [ours.pk]
    figure = dash_update(
        client,
        "CompareRuns",
        "chart.figure",
        [
            {"id": "jobs", "property": "value", "value": [ours.pk, theirs.pk]},
            {"id": "metric", "property": "value", "value": "reward"},
        ],
    )["chart"]["figure"]
    assert [trace["name"] for trace in figure["data"]] == [f"#{ours.pk} ours"]
    assert figure["data"][0]["x"] == [1, 2] and figure["data"][0]["y"] == [0.5, 0.7]


def test_the_heatmap_shows_base_and_checkpoint_per_domain(runs):
    client, ours, theirs = runs["client"], runs["ours"], runs["theirs"]
    figure = dash_update(
        client, "EvaluationHeatmap", "heatmap.figure", [{"id": "job", "property": "value", "value": ours.pk}]
    )
    heat = figure["heatmap"]["figure"]["data"][0]
    assert heat["x"] == ["base", "step 2"]
    assert heat["y"] == ["code", "math", "mean"]
    assert heat["z"] == [[0.3, 0.7], [0.1, 0.5], [0.2, 0.6]]
    other = dash_update(
        client,
        "EvaluationHeatmap",
        "heatmap.figure",
        [{"id": "job", "property": "value", "value": theirs.pk}],
    )
    assert other["heatmap"]["figure"]["data"] == []


def test_an_empty_heatmap_says_why_instead_of_drawing_arbitrary_axes(runs, launch):
    waiting = launch("waiting", eval_version=launch.version())
    for job_id, why in ((waiting.pk, "No evaluation yet"), (None, "No job with a held-out set yet")):
        figure = dash_update(
            runs["client"],
            "EvaluationHeatmap",
            "heatmap.figure",
            [{"id": "job", "property": "value", "value": job_id}],
        )["heatmap"]["figure"]
        assert figure["data"] == []
        assert figure["layout"]["annotations"][0]["text"].startswith(why)
        assert figure["layout"]["xaxis"]["visible"] is False and figure["layout"]["yaxis"]["visible"] is False


def test_a_job_without_a_held_out_set_is_not_offered_for_the_heatmap(runs, launch):
    plain = launch("plain")
    assert plain.spec.get("eval_dataset_version") is None
    options = dash_update(
        runs["client"],
        "EvaluationHeatmap",
        "..job.options...job.value..",
        [{"id": "heatmap", "property": "id", "value": "heatmap"}],
    )
    offered = [option["value"] for option in options["job"]["options"]]
    assert runs["ours"].pk in offered and plain.pk not in offered
