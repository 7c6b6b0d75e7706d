"""Long-context packs through the normal path: one request makes a dataset version and a verifier per family,
and the dataset page charts the prompt lengths in a chosen model's tokens against its context window."""

import re

import pytest
from django.urls import reverse

from anneal.datasets.models import DatasetVersion
from anneal.datasets.pack_catalogue import long_context_checks
from anneal.datasets.storage import read_rows
from anneal.verifiers.models import Verifier
from gpu_jobs.long_context import FAMILIES
from gpu_jobs.rewards import build_scorer
from tests.world import api_client, page_client

URL = "/api/v1/datasets/packs/long-context"


def make_pack(api, **settings):
    body = {"name": "long", "families": ["niah_single", "table_aggregate"], "lengths": [256, 1024], "size": 3}
    return api.post(URL, body | settings, format="json")


def test_every_family_passes_its_check():
    checks = long_context_checks()
    assert set(checks) == set(FAMILIES) and all(check.ok for check in checks.values()), checks


@pytest.mark.django_db
def test_one_request_makes_a_version_and_a_verifier_per_family(world):
    api = api_client(world["owner"])
    listed = api.get(URL).json()
    assert {f["family"] for f in listed["families"]} == set(FAMILIES)
    assert listed["min_length"] == 256 and listed["max_length"] == 131072

    made = make_pack(api)
    assert made.status_code == 201, made.content
    version = DatasetVersion.objects.get(pk=made.json()["dataset_version"]["id"])
    assert version.row_count == 12 and version.pack["source"] == "long_context"
    assert version.stats["domains"] == {"niah_single": 6, "table_aggregate": 6}
    assert version.stats["prompt_tokens"]["max"] <= 1024
    specs = {v.name.split("/")[1]: v.latest_version.spec for v in Verifier.objects.filter(team=world["core"])}
    assert set(specs) == {"niah_single", "table_aggregate"}
    rows = read_rows(version.rows_path)
    assert sorted({(r["domain"], r["length_bucket"]) for r in rows}) == [
        ("niah_single", 256),
        ("niah_single", 1024),
        ("table_aggregate", 256),
        ("table_aggregate", 1024),
    ]
    for row in rows:
        assert row["prompt_tokens"] <= row["length_bucket"]
        scorer = build_scorer(specs[row["domain"]])
        assert scorer.score(row, row["answer"]).score == 1.0
        assert scorer.score(row, "no idea").score == 0.0

    again = make_pack(api)
    assert again.status_code == 400 and again.json()["errors"][0]["field"] == "name"


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("change", "field", "words"),
    [
        ({"families": ["haystack"]}, "families", "unknown family 'haystack'"),
        ({"families": ["repo_qa"], "lengths": [512]}, "lengths", "repo_qa needs at least 1024"),
        ({"lengths": [131072], "size": 40}, "size", "at most 8,000,000"),
        ({"tokenizer": "../etc"}, "tokenizer", "not a model folder inside the model store"),
    ],
)
def test_requests_that_cannot_be_made_are_refused_by_field(world, change, field, words):
    made = make_pack(api_client(world["owner"]), **change)
    assert made.status_code == 400, made.content
    error = made.json()["errors"][0]
    assert error["field"] == field and words in error["message"]
    assert not DatasetVersion.objects.exists()


@pytest.mark.django_db
def test_the_dataset_page_charts_prompt_lengths_against_the_chosen_model_s_window(world):
    made = make_pack(api_client(world["owner"]))
    version = DatasetVersion.objects.get(pk=made.json()["dataset_version"]["id"])
    page = page_client(world["owner"])
    url = reverse("dataset-detail", args=[version.dataset_id])

    # The tiny model (the default: no job on this dataset yet) has a 512-token window: the 1,024 rows overflow.
    html = page.get(url).content.decode()
    chart = html[html.index('id="prompt-lengths"') :]
    assert 'data-model="tiny"' in chart and 'data-window="512"' in chart
    assert re.search(r'class="window-line" x1="[\d.]+"', chart)
    assert "6 prompts longer than the window" in chart
    counts = [int(n) for n in re.findall(r'class="count">(\d+)</text>', chart)]
    assert sum(counts) == 12  # every prompt in one bar; bars double in width (128-255, 256-511, ...)
    assert "128-255 tokens: 6 prompts" in chart

    # The long-context variant's 8,192 tokens hold every prompt; the line moves right.
    long_html = page.get(url, {"model": "tiny-long"}).content.decode()
    long_chart = long_html[long_html.index('id="prompt-lengths"') :]
    assert 'data-window="8192"' in long_chart and "every prompt fits" in long_chart
    x_tiny = float(re.search(r'class="window-line" x1="([\d.]+)"', chart).group(1))
    x_long = float(re.search(r'class="window-line" x1="([\d.]+)"', long_chart).group(1))
    assert x_long > x_tiny

    unknown = page.get(url, {"model": "gpt-9"})
    assert (
        unknown.status_code == 200
        and "model &#x27;gpt-9&#x27; is not in the model store" in unknown.content.decode()
    )

    # Another team's dataset page is not found.
    assert page_client(world["outsider"]).get(url).status_code == 404
