"""Pages of the job lifecycle: the launch form's cost estimate, the queue page, pause and resume on the job page.

Named users: owner (owner of team Core), teammate (viewer in Core)."""

import pytest
from django.urls import reverse

from anneal.training.dispatch import jobs_dispatch
from anneal.training.models import Job

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def one_slot(settings):
    settings.JOB_GPU_SLOTS = 1


def test_launch_form_estimates_the_cost_without_launching(client, world, launch):
    client.force_login(world["owner"])
    vv = launch.verifier().latest_version
    form = client.get(reverse("job-new")).content.decode()
    for name in ("p_budget", "p_time_limit_minutes", "p_priority", "p_devices", "p_device_type"):
        assert f'name="{name}"' in form
    fields = {"dataset_version": launch.version().pk, f"use_{vv.pk}": "on", "p_max_steps": 40}
    page = client.post(reverse("job-new"), {**fields, "p_devices": 2, "estimate": "1"}).content.decode()
    assert 'id="estimate"' in page and "2 × cpu at 0.1/h" in page and "Nothing was launched" in page
    assert not Job.objects.exists()
    bad = client.post(reverse("job-new"), {**fields, "p_budget": -1, "estimate": "1"}).content.decode()
    setting = bad[bad.index('id="field-p_budget"') :]
    assert "must be &gt;= 0" in setting[: setting.index("</div>")] and not Job.objects.exists()


def test_queue_page_shows_position_and_estimated_start(client, world, launch):
    client.force_login(world["owner"])
    first, second, urgent = launch("first"), launch("second"), launch("urgent", priority=9)
    assert jobs_dispatch() == [urgent.pk]
    page = client.get(reverse("job-queue")).content.decode()
    waiting = page[page.index('id="queue-waiting"') :]
    assert waiting.index(f"#{first.pk} first") < waiting.index(f"#{second.pk} second")
    assert "<td>1</td>" in waiting and "<td>2</td>" in waiting and "Estimated start" in waiting
    assert "Queue" in client.get(reverse("job-list")).content.decode()


def test_pause_and_resume_from_the_job_page(client, world, launch):
    client.force_login(world["owner"])
    job = launch("to pause", budget=1.5)
    page = client.get(reverse("job-detail", args=[job.pk])).content.decode()
    assert 'id="pause-form"' in page and 'id="job-spend"' in page and "1.5000" in page
    client.post(reverse("job-pause", args=[job.pk]))
    job.refresh_from_db()
    assert job.state == "paused"
    page = client.get(reverse("job-detail", args=[job.pk])).content.decode()
    assert "paused by owner" in page
    response = client.post(reverse("job-resume", args=[job.pk]), {"budget": "abc"})
    job.refresh_from_db()
    assert response.status_code == 302 and job.state == "paused"
    client.post(reverse("job-resume", args=[job.pk]), {"budget": "3"})
    job.refresh_from_db()
    assert job.state == "queued" and job.spec["budget"] == 3.0
    client.force_login(world["teammate"])  # a viewer cannot pause
    assert client.post(reverse("job-pause", args=[job.pk])).status_code == 403
