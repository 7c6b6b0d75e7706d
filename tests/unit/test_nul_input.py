"""A NUL character in what a user sends (PostgreSQL stores it in neither text nor jsonb) is refused with a 400
or an inline error naming where it is, and nothing is saved: never a server error."""

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.urls import reverse

from anneal.datasets.services import dataset_upload_ingest
from anneal.errors import NUL_MESSAGE, InputError
from anneal.training.models import Job
from anneal.training.services import job_launch
from anneal.verifiers.models import Verifier
from anneal.verifiers.services import verifier_spec_check
from tests.world import api_client

pytestmark = pytest.mark.django_db
NUL = "a\x00b"


@pytest.fixture
def owner(world):
    return {"user": world["owner"], "team": world["core"]}


@pytest.fixture
def api(world):
    return api_client(world["owner"])


def refused_at(response, field: str) -> None:
    assert response.status_code == 400, response.content
    assert response.json()["errors"] == [{"field": field, "message": NUL_MESSAGE}]


def test_the_api_names_the_nested_field_and_saves_nothing(api):
    spec = {"type": "regex", "pattern": NUL}
    refused_at(api.post("/api/v1/verifiers", {"name": "r", "spec": spec}, format="json"), "spec.pattern")
    keywords = {"type": "keywords", "required": ["ok", NUL]}
    refused_at(api.post("/api/v1/verifiers/validate", {"spec": keywords}, format="json"), "spec.required[1]")
    sample = {"row": {"prompt": "1+1=", "answer": NUL}, "completion": "2"}
    body = {"spec": {"type": "exact_match"}, "samples": [sample]}
    refused_at(api.post("/api/v1/verifiers/preview", body, format="json"), "samples[0].row.answer")
    launch = {"name": "j", "dataset_version": 1, "params": {"environment": {"system_prompt": NUL}}}
    refused_at(api.post("/api/v1/jobs", launch, format="json"), "params.environment.system_prompt")
    assert not Verifier.objects.exists() and not Job.objects.exists()


def test_the_services_refuse_it_whatever_called_them(owner):
    with pytest.raises(InputError) as error:
        verifier_spec_check({"type": "keywords", "required": ["ok", NUL]})
    assert error.value.errors == [{"field": "spec.required[1]", "message": NUL_MESSAGE}]
    with pytest.raises(InputError) as error:
        job_launch(
            team=owner["team"],
            user=owner["user"],
            name="j",
            verifiers=[],
            params={"lora_target_modules": NUL},
        )
    assert error.value.errors == [{"field": "params.lora_target_modules", "message": NUL_MESSAGE}]


def test_the_builder_page_shows_it_next_to_the_input(client, owner):
    client.force_login(owner["user"])
    response = client.post(
        reverse("verifier-new"),
        {"name": "re", "type": "regex", "regex.pattern": NUL, "regex.match": "search"},
    )
    assert response.status_code == 200
    page = response.content.decode()
    field = page[page.index('id="field-pattern"') :]
    assert NUL_MESSAGE in field[: field.index("</div>")]
    assert not Verifier.objects.exists()


def test_a_dataset_row_holding_it_goes_to_review_naming_row_and_column(api, settings, tmp_path):
    settings.UPLOAD_DIR = tmp_path / "uploads"
    settings.DATASET_DIR = tmp_path / "datasets"
    # JSON escapes it as \u0000: a valid JSON line whose value holds NUL.
    lines = ['{"q": "1+1=", "a": "2", "topic": "add"}', '{"q": "2+2=", "a": "4", "topic": "a\\u0000dd"}']
    response = api.post(
        "/api/v1/datasets/uploads",
        {
            "name": "sums",
            "file": SimpleUploadedFile("rows.jsonl", "\n".join(lines).encode()),
            "prompt_field": "q",
            "answer_field": "a",
            "domain_field": "topic",
        },
        format="multipart",
    )
    assert response.status_code == 202, response.content
    dataset_upload_ingest(upload_id=response.json()["id"])
    upload = api.get(f"/api/v1/datasets/uploads/{response.json()['id']}").json()
    assert upload["state"] == "review" and upload["rows_valid"] == 1
    assert upload["errors"] == [{"row": 2, "field": "topic", "message": NUL_MESSAGE}]
