"""The home page's getting-started guide: a team with nothing sees four steps, each ticked off as the team does
it, and one click adds an example dataset and verifier (idempotent, in the clicker's team only).

Named users: owner (owner of team Core), teammate (viewer in Core), outsider (owner of team Rivals)."""

import re

import pytest

from anneal.datasets.models import Dataset
from anneal.verifiers.models import Verifier
from tests.world import page_client

pytestmark = pytest.mark.django_db


def _steps(html: str) -> dict[str, bool]:
    return {key: "done" in cls for cls, key in re.findall(r'<li class="([^"]*)" data-step="(\w+)">', html)}


def test_a_new_team_sees_four_steps_none_done(world):
    html = page_client(world["owner"]).get("/").content.decode()
    assert _steps(html) == {"upload": False, "verifier": False, "job": False, "deploy": False}
    assert 'id="guide-example"' in html
    assert (
        'id="guide"' not in page_client(world["teammate"]).get("/").content.decode()
    )  # a viewer makes nothing


def test_the_example_is_one_click_idempotent_and_ticks_its_steps(world):
    owner = page_client(world["owner"])
    first = owner.post("/guide/example/", follow=True)
    assert first.redirect_chain[-1][0] == "/"
    assert any("example-sums" in str(m) for m in first.context["messages"])
    steps = _steps(first.content.decode())
    assert steps["upload"] and steps["verifier"] and not steps["job"] and not steps["deploy"]
    again = owner.post("/guide/example/", follow=True)
    assert any("already" in str(m) for m in again.context["messages"])
    assert Dataset.objects.filter(team=world["core"], name="example-sums").count() == 1
    assert Verifier.objects.filter(team=world["core"], name="example-exact-answer").count() == 1
    assert not Dataset.objects.filter(team=world["rivals"]).exists()
    version = Dataset.objects.get(team=world["core"]).versions.get()
    assert version.row_count == 64 and {"prompt", "answer"} <= set(version.columns)


def test_a_viewer_cannot_add_the_example(world):
    response = page_client(world["teammate"]).post("/guide/example/")
    assert response.status_code == 403
    assert not Dataset.objects.filter(team=world["core"]).exists()


def test_the_guide_goes_once_every_step_is_done(world, launch, tmp_path):
    from anneal.deployments.services import deployment_create
    from tests.world import checkpoint_create

    launch("first")
    checkpoint = checkpoint_create(team=world["core"], location=tmp_path / "ckpt")
    html = page_client(world["owner"]).get("/").content.decode()
    assert _steps(html)["job"] and not _steps(html)["deploy"]
    deployment_create(team=world["core"], user=world["owner"], checkpoint_id=checkpoint.pk, name="adder")
    assert 'id="guide"' not in page_client(world["owner"]).get("/").content.decode()
