"""The launch form for a domain expert: essentials up front with the newest dataset chosen, the rest folded
under Advanced in plain words with glossary links, the cost estimate in place saying what it was timed from,
and a warning (page and API) when max completion length cannot hold the data's longest reference answer.

Named users: owner (owner of Core), teammate (viewer in Core), outsider (owner of Rivals).
"""

import re

import pytest
from django.urls import reverse

from anneal.datasets.services import dataset_version_create_from_rows
from anneal.glossary import ANCHORS, TERMS
from anneal.training import launch_layout
from anneal.training.forms import LaunchForm
from anneal.training.models import Job, JobState
from anneal.verifiers.services import verifier_create
from tests.world import api_client, page_client

pytestmark = pytest.mark.django_db

SHORT = [{"prompt": f"{a}+{b}=", "answer": str(a + b)} for a, b in [(1, 2), (3, 4), (5, 6), (7, 8)] * 2]
# Row 3's answer is 12 characters: 12 tokens of the tiny model's character tokenizer.
LONG = [{"prompt": f"q{n}", "answer": a} for n, a in enumerate(["1", "22", "twelve chars", "4444"] * 2)]
MODULE_PATH = re.compile(r"\b(gpu_jobs|anneal|workers|sandboxes)\.[a-z_]+")


@pytest.fixture
def team(world):
    """Core with the demo's dataset made first, then the one the owner just made, and a verifier."""
    owner, core = world["owner"], world["core"]
    dataset_version_create_from_rows(team=core, user=owner, name="two-digit addition", rows=SHORT)
    mine = dataset_version_create_from_rows(team=core, user=owner, name="my answers", rows=LONG)
    verifier = verifier_create(team=core, user=owner, name="exact", spec={"type": "exact_match"})
    return {"mine": mine, "vv": verifier.latest_version, "owner": owner, "core": core}


def fields(team, **params) -> dict:
    out = {"dataset_version": team["mine"].pk, f"use_{team['vv'].pk}": "on", "p_max_steps": 3}
    out.update({f"p_{name}": value for name, value in params.items()})
    return out


def test_the_essentials_come_first_and_everything_else_is_folded_under_advanced(team):
    page = page_client(team["owner"]).get(reverse("job-new")).content.decode()
    advanced = page.index('<details class="card advanced-settings" id="advanced"')
    for name in ("dataset_version", "name", f"use_{team['vv'].pk}", "p_model", "p_max_steps", "p_budget"):
        assert page.index(f'name="{name}"') < advanced, name
    for name in (
        "p_learning_rate",
        "p_beta",
        "p_lora_rank",
        "p_loss_type",
        "extra_dataset_versions",
        "p_devices",
    ):
        assert page.index(f'name="{name}"') > advanced, name
    # The newest version is chosen, not the first by name (the demo's).
    chosen = re.search(r'<option value="(\d+)" selected>', page)
    assert chosen and int(chosen.group(1)) == team["mine"].pk
    assert "Ctrl-click" in page  # the multi-select says how to choose several
    assert page.index('id="estimate"') > page.index('name="estimate"')  # the estimate right below its button


def test_help_is_in_plain_words_with_glossary_links_that_exist(team):
    form = LaunchForm(team=team["core"])
    for name, field in form.fields.items():
        assert not MODULE_PATH.search(str(field.help_text)), (name, field.help_text)
    for name in ("algorithm", "beta", "loss_type", "lora_rank"):
        help_text = form.fields[f"p_{name}"].help_text
        assert not re.search(r"\b(TRL|PEFT|AdamW)\b", help_text), (name, help_text)
        assert launch_layout.GLOSSARY[name] in ANCHORS
    page = page_client(team["owner"]).get(reverse("job-new")).content.decode()
    linked = set(re.findall(r'href="/help/glossary/#([a-z-]+)"', page))
    assert {"grpo", "kl", "lora", "loss-type", "verifier"} <= linked and linked <= ANCHORS
    assert not MODULE_PATH.search(re.sub(r"<script.*?</script>|<code.*?</code>", "", page, flags=re.S))
    # Every setting sits in a group under Advanced: one the layout names, or "Other settings" when new.
    titles = [title for title, _ in form.advanced_groups()]
    assert titles[0] == "How the model learns" and len(titles) == len(set(titles))
    assert launch_layout.group_of("a_setting_added_later") == launch_layout.OTHER_GROUP
    assert launch_layout.group_of("a_setting_added_later", "Lengths") == "Lengths"


def test_the_glossary_page_explains_each_term_and_the_nav_links_it(team):
    page = page_client(team["owner"]).get(reverse("glossary")).content.decode()
    for anchor, _term, _ in TERMS:
        assert f'id="{anchor}"' in page
    assert "Keeps the trained model close" not in page  # the glossary's own words, not the form's
    assert "A brake that keeps the trained model close" in page
    assert 'href="/help/glossary/" aria-current="page">Glossary</a>' in page


def test_the_page_warns_next_to_max_completion_length_when_an_answer_cannot_fit(team):
    client = page_client(team["owner"])
    page = client.get(reverse("job-new")).content.decode()
    message = "the longest reference answer (row 3) is 12 tokens for tiny; max completion length is 8"
    setting = page[page.index('id="field-p_max_completion_length"') :]
    assert message in setting[: setting.index("setting-key")]
    assert 'id="advanced" open' in page  # a warning inside Advanced opens it
    assert "Before you launch" in page and message.capitalize() in page

    # The estimate with a length that holds the answer: no warning; the launch is not stopped by one.
    fixed = client.post(reverse("job-new"), {**fields(team, max_completion_length=12), "estimate": "1"})
    assert message not in fixed.content.decode() and 'id="advanced" open' not in fixed.content.decode()
    launched = client.post(reverse("job-new"), fields(team))
    assert launched.status_code == 302 and Job.objects.get().spec["max_completion_length"] == 8

    # Another dataset without long answers: no warning.
    short = dataset_version_create_from_rows(team=team["core"], user=team["owner"], name="short", rows=SHORT)
    page = client.get(reverse("job-new"), {"dataset_version": short.pk}).content.decode()
    assert "Before you launch" not in page.replace("hidden>\n    <strong>Before you launch", "")
    assert message not in page


def test_the_api_returns_the_warning_from_estimate_and_launch_not_an_error(team):
    api = api_client(team["owner"])
    body = {
        "dataset_version": team["mine"].pk,
        "verifiers": [{"verifier_version": team["vv"].pk}],
        "params": {"max_steps": 2},
    }
    estimate = api.post("/api/v1/jobs/estimate", body, format="json")
    assert estimate.status_code == 200, estimate.content
    [warning] = estimate.json()["warnings"]
    assert warning["field"] == "params.max_completion_length"
    assert warning["message"].startswith("the longest reference answer (row 3) is 12 tokens for tiny;")
    launched = api.post("/api/v1/jobs", body, format="json")
    assert launched.status_code == 201 and launched.json()["warnings"] == [warning]
    body["params"]["max_completion_length"] = 12
    assert api.post("/api/v1/jobs/estimate", body, format="json").json()["warnings"] == []
    schema = api.get("/api/schema/?format=json").json()["components"]["schemas"]
    assert "warnings" in schema["EstimateOutput"]["properties"]
    assert "warnings" in schema["JobLaunchOutput"]["properties"]


def test_the_estimate_comes_back_in_place_and_says_what_it_was_timed_from(team, world):
    client = page_client(team["owner"])
    response = client.post(reverse("job-new-estimate"), fields(team, devices=2))
    body = response.json()
    assert response.status_code == 200 and body["errors"] == [] and not Job.objects.exists()
    assert "Estimated cost" in body["html"] and "2 × cpu" in body["html"]
    assert "No measured job yet: a default rate for tiny" in body["html"]
    assert body["field_warnings"]["p_max_completion_length"].startswith(
        "the longest reference answer (row 3)"
    )

    # Once a job on the same model and data has finished, the estimate names it.
    job = Job.objects.get(pk=client.post(reverse("job-new"), fields(team)).url.split("/")[-2])
    Job.objects.filter(pk=job.pk).update(state=JobState.SUCCEEDED, step=3, run_seconds=30)
    body = client.post(reverse("job-new-estimate"), fields(team)).json()
    assert (
        f"Timed from job #{job.pk} \u201cuntitled job\u201d on the same model (tiny, same dataset)"
        in body["html"]
    )

    # A mistake is named with its field, and nothing is launched.
    body = client.post(reverse("job-new-estimate"), fields(team, max_steps=0)).json()
    assert body["estimate"] is None and Job.objects.count() == 1
    assert {e["field"]: e["label"] for e in body["errors"]} == {"p_max_steps": "Training steps"}
    assert 'href="#field-p_max_steps"' in body["html"]


def test_only_writers_of_the_team_get_an_estimate(team, world):
    viewer = page_client(world["teammate"]).post(reverse("job-new-estimate"), fields(team))
    assert viewer.status_code == 403
    # The outsider's own team holds none of Core's versions: the choice is refused by name.
    outsider = page_client(world["outsider"]).post(reverse("job-new-estimate"), fields(team)).json()
    assert outsider["estimate"] is None and "dataset_version" in {e["field"] for e in outsider["errors"]}
    assert "my answers" not in outsider["html"] and "row 3" not in str(outsider)
