"""The verifier pages: the form builder generated from the engine's fields, versions with diffs, probes and
flags, clone, delete, and the launch form's warning. Named users: owner, teammate (viewer), outsider."""

import json

import pytest
from django.urls import reverse

from anneal.verifiers.models import Verifier
from anneal.verifiers.services import verifier_create
from gpu_jobs.rewards import VERIFIER_TYPES

pytestmark = pytest.mark.django_db


@pytest.fixture
def owner(client, world):
    client.force_login(world["owner"])
    return client


def test_the_builder_offers_every_type_with_its_fields_and_help(owner):
    page = owner.get(reverse("verifier-new")).content.decode()
    for name, cls in VERIFIER_TYPES.items():
        assert f'data-type="{name}"' in page
        for field in cls.fields:
            assert f'name="{name}.{field.name}"' in page, (name, field.name)
    assert "Accept |answer - reference| &lt;= this." in page  # numeric abs_tol's help, from its SpecField
    assert 'id="verifier-catalogue"' in page and 'id="preview-panel"' in page


def test_the_builder_inputs_make_a_spec_without_javascript(owner):
    response = owner.post(
        reverse("verifier-new"),
        {
            "name": "keywords",
            "type": "keywords",
            "keywords.required": "photosynthesis\nlight\n",
            "keywords.forbidden": "as an AI",
            "keywords.whole_words": "on",
            "keywords.scoring": "fraction",
            # Another type's inputs are posted too when the page has no script; they must not matter.
            "numeric.abs_tol": "oops",
        },
    )
    assert response.status_code == 302, response.content.decode()[:2000]
    spec = Verifier.objects.get().latest_version.spec
    assert spec["required"] == ["photosynthesis", "light"] and spec["forbidden"] == ["as an AI"]
    assert spec["scoring"] == "fraction" and spec["case_sensitive"] is False


def test_the_scripts_spec_json_is_what_gets_saved(owner):
    spec = {"type": "regex", "pattern": r"answer is (\d+)", "group": 1, "reference_field": "answer"}
    response = owner.post(
        reverse("verifier-new"), {"name": "re", "type": "regex", "spec_json": json.dumps(spec)}
    )
    assert response.status_code == 302
    assert Verifier.objects.get().latest_version.spec["group"] == 1


def test_a_bad_spec_shows_inline_next_to_its_field_and_keeps_the_input(owner):
    response = owner.post(
        reverse("verifier-new"),
        {"name": "re", "type": "regex", "regex.pattern": "(unclosed", "regex.match": "search"},
    )
    assert response.status_code == 200
    page = response.content.decode()
    field = page[page.index('id="field-pattern"') :]
    field = field[: field.index("</div>")]
    assert "not a valid regular expression" in field
    assert "(unclosed" in field
    assert not Verifier.objects.exists()


def test_bad_json_in_a_json_field_names_it(owner):
    response = owner.post(reverse("verifier-new"), {"name": "j", "type": "json", "json.schema": "{not json"})
    page = response.content.decode()
    field = page[page.index('id="field-schema"') :]
    assert "is not valid JSON" in field[: field.index("</div>")]


def test_edit_saves_a_new_version_and_the_page_shows_the_diff(owner, world):
    verifier = verifier_create(team=world["core"], user=world["owner"], name="n", spec={"type": "numeric"})
    page = owner.get(reverse("verifier-edit", args=[verifier.pk])).content.decode()
    assert 'name="numeric.rel_tol"' in page
    response = owner.post(
        reverse("verifier-edit", args=[verifier.pk]),
        {"type": "numeric", "spec_json": json.dumps({"type": "numeric", "rel_tol": 0.05})},
    )
    assert response.status_code == 302
    assert verifier.versions.count() == 2
    detail = owner.get(reverse("verifier-detail", args=[verifier.pk])).content.decode()
    assert "Version 2" in detail and "Changes from the previous version" in detail
    assert "+  &quot;rel_tol&quot;: 0.05" in detail
    assert "Hack probes" in detail


def test_a_flagged_verifier_is_marked_on_its_page_and_the_launch_form_warns(owner, world, launch):
    verifier_create(
        team=world["core"], user=world["owner"], name="careful", spec={"type": "numeric", "extract": "tag"}
    )
    flagged = verifier_create(
        team=world["core"],
        user=world["owner"],
        name="lax",
        spec={"type": "keywords", "required_field": "answer"},
    )
    detail = owner.get(reverse("verifier-detail", args=[flagged.pk])).content.decode()
    assert 'id="verifier-flagged"' in detail and "listing many guesses" in detail
    listing = owner.get(reverse("verifier-list")).content.decode()
    assert listing.count(">flagged<") == 1
    launch.version()  # a dataset to launch on, as when a user opens the form for real
    form = owner.get(reverse("job-new")).content.decode()
    assert form.count('class="small verifier-flag"') == 1
    assert "Scores a hack probe high" in form


def test_clone_and_delete_from_the_page(owner, world):
    verifier = verifier_create(
        team=world["core"], user=world["owner"], name="orig", spec={"type": "exact_match"}
    )
    response = owner.post(reverse("verifier-clone", args=[verifier.pk]), {"name": "copy"})
    clone = Verifier.objects.get(name="copy")
    assert response.url == reverse("verifier-detail", args=[clone.pk])
    assert clone.latest_version.spec == verifier.latest_version.spec
    response = owner.post(reverse("verifier-delete", args=[clone.pk]))
    assert response.url == reverse("verifier-list") and not Verifier.objects.filter(name="copy").exists()


def test_a_verifier_a_job_used_cannot_be_deleted_and_the_page_says_why(owner, world, launch):
    verifier = verifier_create(
        team=world["core"], user=world["owner"], name="used", spec={"type": "exact_match"}
    )
    launch(verifier=verifier, max_steps=1)
    response = owner.post(reverse("verifier-delete", args=[verifier.pk]), follow=True)
    assert "cannot be deleted" in response.content.decode()
    assert Verifier.objects.filter(pk=verifier.pk).exists()


def test_viewers_cannot_edit_clone_or_delete(client, world):
    verifier = verifier_create(
        team=world["core"], user=world["owner"], name="v", spec={"type": "exact_match"}
    )
    client.force_login(world["teammate"])
    assert client.get(reverse("verifier-edit", args=[verifier.pk])).status_code == 403
    assert client.post(reverse("verifier-delete", args=[verifier.pk])).status_code == 403
    assert client.post(reverse("verifier-clone", args=[verifier.pk]), {"name": "x"}).status_code == 403
    client.force_login(world["outsider"])
    assert client.get(reverse("verifier-detail", args=[verifier.pk])).status_code == 404
