"""The browser pages through Django's test client: team scoping, roles, forms that show service errors inline.

Named users: owner (owner of team Core), teammate (viewer in Core), outsider (owner of team Rivals).
"""

import json
import re

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.urls import reverse

from anneal.accounts.models import ApiToken, Role, token_hash
from anneal.accounts.services import membership_set
from anneal.datasets.models import DatasetUpload, DatasetVersion
from anneal.datasets.services import dataset_upload_ingest, dataset_version_create_from_rows
from anneal.training.models import Job, JobState
from anneal.verifiers.models import Verifier
from anneal.verifiers.services import verifier_create

pytestmark = pytest.mark.django_db

ROWS = [{"prompt": f"{a}+{b}=", "answer": str(a + b)} for a, b in [(12, 45), (3, 4), (20, 22), (7, 8)] * 2]


@pytest.fixture
def job(launch):
    return launch("first run", max_steps=3)


def test_login_page_renders_and_pages_need_a_login(client, world):
    page = client.get(reverse("login"))
    assert page.status_code == 200
    assert b'name="username"' in page.content and b'name="password"' in page.content
    assert client.get(reverse("job-list")).url.startswith(reverse("login"))
    signed_in = client.post(reverse("login"), {"username": "owner", "password": "owner-password"})
    assert signed_in.status_code == 302 and signed_in.url == reverse("home")
    home = client.get(reverse("home"))
    assert b"Core" in home.content and b"Launch a job" in home.content


def test_owner_uploads_a_dataset_through_the_form(client, world, django_capture_on_commit_callbacks):
    client.force_login(world["owner"])
    body = "\n".join(json.dumps(row) for row in ROWS).encode()
    with django_capture_on_commit_callbacks(execute=False) as queued:
        response = client.post(
            reverse("dataset-upload"),
            {
                "name": "sums",
                "file": SimpleUploadedFile("sums.jsonl", body),
                "prompt_field": "prompt",
                "answer_field": "answer",
            },
        )
    upload = DatasetUpload.objects.get()
    assert response.status_code == 302 and response.url == reverse("upload-detail", args=[upload.pk])
    assert len(queued) == 1  # the ingest task is sent after commit; this test runs the ingest itself
    waiting = client.get(response.url)
    assert b"upload-status" in waiting.content and b"upload.js" in waiting.content

    dataset_upload_ingest(upload_id=upload.pk)
    ready = client.get(response.url).content.decode()
    version = DatasetVersion.objects.get(source_upload=upload)
    # ROWS holds every row twice: exact duplicates are removed and counted.
    assert "Ready." in ready and f"{len(ROWS) // 2} rows validated" in ready
    assert f"{len(ROWS) // 2} exact duplicates removed" in ready
    assert reverse("dataset-detail", args=[version.dataset.pk]) in ready
    assert "upload.js" not in ready  # a finished upload stops polling
    detail = client.get(reverse("dataset-detail", args=[version.dataset.pk])).content.decode()
    assert "12+45=" in detail and "v1" in detail


def test_a_failed_upload_lists_its_errors_by_row_and_field(client, world, django_capture_on_commit_callbacks):
    client.force_login(world["owner"])
    body = b'{"prompt": "1+1=", "answer": "2"}\nnot json\n{"answer": "5"}\n'
    with django_capture_on_commit_callbacks(execute=False):
        response = client.post(
            reverse("dataset-upload"),
            {"name": "broken", "file": SimpleUploadedFile("broken.jsonl", body), "prompt_field": "prompt"},
        )
    upload = DatasetUpload.objects.get()
    dataset_upload_ingest(upload_id=upload.pk)
    page = client.get(response.url).content.decode()
    assert "Not stored." in page
    rows = re.findall(r'<td class="num">(\d+)</td><td><code>([^<]*)</code></td>', page)
    assert ("2", "(line)") in rows and ("3", "prompt") in rows
    assert not DatasetVersion.objects.exists()


def test_upload_form_rejects_a_file_that_is_not_jsonl_inline(
    client, world, django_capture_on_commit_callbacks
):
    client.force_login(world["owner"])
    with django_capture_on_commit_callbacks(execute=False):
        response = client.post(
            reverse("dataset-upload"),
            {
                "name": "sheet",
                "file": SimpleUploadedFile("sheet.xlsx", b"PK\x03\x04"),
                "prompt_field": "prompt",
            },
        )
    assert response.status_code == 200
    page = response.content.decode()
    field = page[page.index('id="field-file"') :]
    assert "has an unknown type" in field[: field.index("</div>")]
    assert 'value="sheet"' in page  # what the user typed is kept
    assert not DatasetUpload.objects.exists()


def test_a_bad_verifier_spec_shows_the_field_error_inline_and_creates_nothing(client, world):
    client.force_login(world["owner"])
    response = client.post(
        reverse("verifier-new"),
        {
            "name": "unit tests",
            "type": "python_tests",
            "tests_source": "fixed",
            "tests": "assert result == 57",
            "scoring": "all_or_nothing",
            "timeout_s": "0",
        },
    )
    assert response.status_code == 200
    page = response.content.decode()
    field = page[page.index('id="field-timeout_s"') :]
    field = field[: field.index("</div>")]
    assert 'class="field-error"' in field and "more than 0" in field
    assert not Verifier.objects.exists()
    assert 'value="unit tests"' in page


def test_a_verifier_made_by_the_form_shows_its_spec(client, world):
    client.force_login(world["owner"])
    response = client.post(
        reverse("verifier-new"),
        {
            "name": "answer",
            "type": "exact_match",
            "reference_field": "answer",
            "extract": "last_number",
            "strip_whitespace": "on",
            # The other type's inputs are submitted too (hidden); they must not matter.
            "tests_source": "field",
            "timeout_s": "not a number",
        },
    )
    verifier = Verifier.objects.get()
    assert response.status_code == 302 and response.url == reverse("verifier-detail", args=[verifier.pk])
    # The engine fills in defaults for its other options (normalisation, tag names): check what the form set.
    spec = verifier.latest_version.spec
    assert {
        key: spec[key] for key in ("type", "reference_field", "case_sensitive", "strip_whitespace", "extract")
    } == {
        "type": "exact_match",
        "reference_field": "answer",
        "case_sensitive": False,
        "strip_whitespace": True,
        "extract": "last_number",
    }
    assert "last_number" in client.get(response.url).content.decode()


def test_owner_launches_a_job_through_the_form(client, world, django_capture_on_commit_callbacks):
    client.force_login(world["owner"])
    version = dataset_version_create_from_rows(
        team=world["core"], user=world["owner"], name="sums", rows=ROWS
    )
    verifier = verifier_create(
        team=world["core"], user=world["owner"], name="exact", spec={"type": "exact_match"}
    )
    vv = verifier.latest_version
    form = client.get(reverse("job-new")).content.decode()
    assert f'name="use_{vv.pk}"' in form and 'name="p_max_steps"' in form

    fields = {
        "name": "from the page",
        "dataset_version": version.pk,
        f"use_{vv.pk}": "on",
        f"weight_{vv.pk}": "2",
    }
    fields.update({f"p_{k}": v for k, v in {"max_steps": 4, "num_generations": 0}.items()})
    bad = client.post(reverse("job-new"), fields)
    assert bad.status_code == 200 and not Job.objects.exists()
    page = bad.content.decode()
    setting = page[page.index('id="field-p_num_generations"') :]
    assert "must be &gt;= 2" in setting[: setting.index("</div>")]

    fields["p_num_generations"] = 2
    with django_capture_on_commit_callbacks(execute=False):
        response = client.post(reverse("job-new"), fields)
    job = Job.objects.get()
    assert response.status_code == 302 and response.url == reverse("job-detail", args=[job.pk])
    assert job.spec["max_steps"] == 4 and job.spec["verifiers"][0]["weight"] == 2.0
    page = client.get(response.url).content.decode()
    assert "from the page" in page and "Cancel job" in page and "plotly.min.js" in page


def test_outsider_gets_404_for_another_teams_pages(client, world, job):
    client.force_login(world["outsider"])
    upload = DatasetUpload.objects.create(
        team=world["core"], dataset_name="x", file_name="x.jsonl", file_path="/none"
    )
    verifier = Verifier.objects.get(team=world["core"])
    assert client.get(reverse("job-detail", args=[job.pk])).status_code == 404
    assert client.get(reverse("dataset-detail", args=[job.dataset_version.dataset.pk])).status_code == 404
    assert client.get(reverse("upload-detail", args=[upload.pk])).status_code == 404
    assert client.get(reverse("verifier-detail", args=[verifier.pk])).status_code == 404
    assert client.post(reverse("job-cancel", args=[job.pk])).status_code == 404
    assert b"first run" not in client.get(reverse("job-list")).content
    job.refresh_from_db()
    assert job.state == JobState.QUEUED


def test_viewer_sees_no_buttons_and_gets_403_on_writes(client, world, job):
    client.force_login(world["teammate"])
    page = client.get(reverse("job-detail", args=[job.pk])).content.decode()
    assert "first run" in page
    assert "Cancel job" not in page and "Retry" not in page
    assert "Launch a job" not in client.get(reverse("job-list")).content.decode()
    assert client.post(reverse("job-cancel", args=[job.pk])).status_code == 403
    assert client.get(reverse("job-new")).status_code == 403
    fields = {"dataset_version": job.dataset_version_id, f"use_{job.verifier_versions.get().pk}": "on"}
    assert client.post(reverse("job-new"), fields).status_code == 403
    assert client.post(reverse("verifier-new"), {"name": "v", "type": "exact_match"}).status_code == 403
    assert client.post(reverse("token-list"), {"name": "mine"}).status_code == 403
    job.refresh_from_db()
    assert job.state == JobState.QUEUED and Job.objects.count() == 1

    client.force_login(world["owner"])
    assert "Cancel job" in client.get(reverse("job-detail", args=[job.pk])).content.decode()
    cancelled = client.post(reverse("job-cancel", args=[job.pk]), follow=True)
    job.refresh_from_db()
    assert job.state == JobState.CANCELLED and "Retry" in cancelled.content.decode()


def test_api_token_is_shown_once(client, world):
    client.force_login(world["owner"])
    created = client.post(reverse("token-list"), {"name": "ci"})
    assert created.status_code == 200 and created["Cache-Control"] == "no-store"
    raw = re.search(r'<code id="raw-token">([^<]+)</code>', created.content.decode()).group(1)
    token = ApiToken.objects.get()
    assert token.key_hash == token_hash(raw) and token.team == world["core"]
    listing = client.get(reverse("token-list")).content.decode()
    assert raw not in listing and token.key_hint in listing
    assert client.get(reverse("api:me"), headers={"Authorization": f"Bearer {raw}"}).status_code == 200

    client.post(reverse("token-revoke", args=[token.pk]))
    token.refresh_from_db()
    assert not token.is_active
    client.force_login(world["outsider"])
    assert client.post(reverse("token-revoke", args=[token.pk])).status_code == 404


def test_team_switcher_changes_the_team_pages_act_in(client, world, job):
    membership_set(team=world["rivals"], user=world["owner"], role=Role.EXPERT)
    client.force_login(world["owner"])
    assert 'id="team-select"' in client.get(reverse("home")).content.decode()
    assert "first run" in client.get(reverse("job-list")).content.decode()
    client.post(reverse("team-switch"), {"team": world["rivals"].pk, "next": reverse("job-list")})
    assert "first run" not in client.get(reverse("job-list")).content.decode()
    client.force_login(world["teammate"])
    assert client.post(reverse("team-switch"), {"team": world["rivals"].pk}).status_code == 404
