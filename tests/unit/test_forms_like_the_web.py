"""Forms that behave like the web: post/redirect/get with a message after each save, the verifier builder's
column pickers from the chosen dataset and its dependent inputs, and an admin without Dash internals.

Named users: owner (owner of team Core), outsider (team Rivals)."""

import re

import pytest
from django.contrib import admin
from django.core.files.uploadedfile import SimpleUploadedFile

from anneal.datasets.services import dataset_version_create_from_rows
from tests.world import page_client

pytestmark = pytest.mark.django_db


def _messages(response) -> list[str]:
    return [str(m) for m in response.context["messages"]] if response.context else []


def test_the_builder_offers_the_newest_datasets_columns_and_hides_extract_options(world):
    dataset_version_create_from_rows(
        team=world["core"], user=world["owner"], name="old", rows=[{"prompt": "a", "answer": "b"}]
    )
    dataset_version_create_from_rows(
        team=world["core"],
        user=world["owner"],
        name="new",
        rows=[{"prompt": "1+1=", "answer": "2", "solution": "two"}],
    )
    dataset_version_create_from_rows(
        team=world["rivals"], user=world["outsider"], name="theirs", rows=[{"prompt": "x", "secret_col": "y"}]
    )
    html = page_client(world["owner"]).get("/verifiers/new/").content.decode()
    columns = re.search(r'<datalist id="dataset-columns">(.*?)</datalist>', html).group(1)
    assert 'value="solution"' in columns  # the newest dataset's columns are the ones offered
    assert "secret_col" not in html  # another team's dataset is not even named
    reference = re.search(r'<input type="text" name="exact_match.reference_field"[^>]*>', html).group(0)
    assert 'list="dataset-columns"' in reference
    assert 'data-column="solution"' in html
    # Extraction is off by default: its tag and JSON-field inputs are hidden until it is on.
    tag = re.search(r'<div class="field"\s+id="field-extract_tag"[^>]*>', html).group(0)
    assert 'data-show-when="extract=tag"' in tag and " hidden" in tag


def test_a_saved_extract_tag_shows_its_tag_input(world):
    owner = page_client(world["owner"])
    response = owner.post(
        "/verifiers/new/",
        {
            "name": "tagged",
            "type": "exact_match",
            "exact_match.extract": "tag",
            "exact_match.extract_tag": "b",
        },
        follow=True,
    )
    assert response.redirect_chain[-1][0].startswith("/verifiers/")
    assert any("Created verifier 'tagged'" in m for m in _messages(response))
    verifier_id = response.redirect_chain[-1][0].strip("/").split("/")[-1]
    html = owner.get(f"/verifiers/{verifier_id}/edit/").content.decode()
    tag = re.search(r'<div class="field"\s+id="field-extract_tag"[^>]*>', html).group(0)
    assert " hidden" not in tag


def test_an_upload_redirects_to_its_page_with_a_message(world, data_dirs):
    owner = page_client(world["owner"])
    body = b"prompt,answer\n1+1=,2\n2+2=,4\n"
    response = owner.post(
        "/datasets/upload/",
        {"name": "sums", "map_later": "on", "file": SimpleUploadedFile("sums.csv", body)},
        follow=True,
    )
    (url, status), *_ = response.redirect_chain
    assert status == 302 and re.fullmatch(r"/datasets/uploads/\d+/", url)
    assert any("sums.csv" in m for m in _messages(response))
    assert owner.get(url).status_code == 200  # a reload shows the upload, not an empty form


def test_a_deploy_says_so_after_the_redirect(world, tmp_path):
    from tests.world import checkpoint_create

    checkpoint = checkpoint_create(team=world["core"], location=tmp_path / "ckpt")
    response = page_client(world["owner"]).post(
        "/deployments/new/",
        {
            "checkpoint": checkpoint.pk,
            "name": "adder",
            "tier": "standard",
            "replicas": 1,
            "max_concurrency": 2,
        },
        follow=True,
    )
    assert re.fullmatch(r"/deployments/\d+/", response.redirect_chain[-1][0])
    assert any("adder" in m for m in _messages(response))


def test_the_admin_lists_no_dash_internals():
    labels = {model._meta.app_label for model in admin.site._registry}
    assert "django_plotly_dash" not in labels
    assert {"datasets", "training", "deployments"} <= labels
