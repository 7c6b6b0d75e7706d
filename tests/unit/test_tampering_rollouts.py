"""The platform side of reward tampering: a job set to pause on reward_tampering pauses when the trainer raises
it, and the rollouts that tried to tamper are one click away on the job page and one filter away in the API.

Events are written through the real event sink, with the payloads the trainer writes (gpu_jobs.grpo).
Named users: owner (team Core), outsider (team Rivals).
"""

from datetime import timedelta

import pytest
from django.urls import reverse
from django.utils import timezone

from anneal.errors import InputError
from anneal.training.housekeeping import rollouts_prune
from anneal.training.models import EventKind, Job, JobEvent
from anneal.training.services import job_claim
from workers.sink import DjangoEventSink

pytestmark = pytest.mark.django_db

MEMORY = "reading process memory (/proc/self/mem)"
ALARM = {
    "name": "reward_tampering",
    "step": 2,
    "message": f"3 of 64 rollouts at step 2 tried to tamper with the verifier ({MEMORY})",
}


@pytest.fixture(autouse=True)
def one_slot(settings):
    settings.JOB_GPU_SLOTS = 1


def rollout(step: int, completion: str, *, reason: str = "", **extra) -> tuple[str, dict]:
    payload = {"step": step, "prompt": "write f", "completion": completion, "reward": 0.0, "reason": reason}
    payload["parts"] = extra.pop("parts", {"tests": 0.0})
    return "rollout", {**payload, **extra}


def running_job(launch, **params) -> tuple[Job, DjangoEventSink]:
    job = launch("tampering", **params)
    job_claim(job_id=job.pk, worker="w")
    return job, DjangoEventSink(job_id=job.pk, attempt=1)


def report_two_steps(sink: DjangoEventSink) -> None:
    """Step 1 honest; step 2 with the three ways a rollout says it tried to tamper, and an alarm."""
    sink.emit_many([rollout(1, "honest one", reason="tests: 2 of 2 passed")])
    sink.emit("metric", {"step": 1, "reward": 0.5, "tampering": 0.0, "tampering_count": 0.0})
    sink.emit_many(
        [
            rollout(2, "honest two", reason="tests: 1 of 2 passed"),
            rollout(2, "forges via memory", reason=f"tests: tampering: {MEMORY}", tampering=MEMORY),
            rollout(2, "an agent episode", reason="tampering: patched asserts", parts={"tampering": 1.0}),
            rollout(2, "another writer's", reason="tampering: rebinding builtins"),
            rollout(2, "says tampering: but is honest", reason="tests: 0 of 2", parts={"tampering": 0.0}),
        ]
    )
    sink.emit("metric", {"step": 2, "reward": 0.1, "tampering": 3 / 64, "tampering_count": 3.0})
    sink.emit("alarm", ALARM)


# --- pause_on_alarms ----------------------------------------------------------------------------------------


def test_a_job_set_to_pause_on_reward_tampering_pauses_with_the_alarm_as_reason(launch):
    job, sink = running_job(launch, pause_on_alarms="reward_tampering")
    assert job.spec["pause_on_alarms"] == "reward_tampering"
    report_two_steps(sink)
    job.refresh_from_db()
    assert job.state == "pausing"
    assert job.reason == f"alarm reward_tampering at step 2: {ALARM['message']}"


def test_all_pauses_on_it_and_another_alarm_s_setting_does_not(launch):
    job, sink = running_job(launch, pause_on_alarms="all")
    sink.emit("alarm", ALARM)
    job.refresh_from_db()
    assert job.state == "pausing"
    other, sink = running_job(launch, pause_on_alarms="no_signal")
    sink.emit("alarm", ALARM)
    other.refresh_from_db()
    assert other.state == "running" and other.events.filter(kind=EventKind.ALARM).count() == 1


def test_a_misspelt_alarm_is_refused_naming_the_known_ones(launch):
    with pytest.raises(InputError) as caught:
        launch("tampering", pause_on_alarms="reward_tamper")
    assert caught.value.errors[0]["field"] == "params.pause_on_alarms"
    assert "reward_tampering" in str(caught.value)


# --- the API filter -------------------------------------------------------------------------------------


def test_the_api_lists_only_the_rollouts_that_tried_to_tamper(client, world, launch):
    job, sink = running_job(launch)
    report_two_steps(sink)
    client.force_login(world["owner"])
    url = f"/api/v1/jobs/{job.pk}/rollouts"
    body = client.get(url, {"tampering": "1"}).json()
    assert [r["payload"]["completion"] for r in body["results"]] == [
        "forges via memory",
        "an agent episode",
        "another writer's",
    ]
    assert body["count"] == 3 and body["next_after"] is None
    assert body["results"][0]["payload"]["tampering"] == MEMORY
    others = client.get(url, {"tampering": "false"}).json()
    assert [r["payload"]["completion"] for r in others["results"]] == [
        "honest one",
        "honest two",
        "says tampering: but is honest",
    ]
    assert client.get(url).json()["count"] == 6
    assert client.get(url, {"tampering": "1", "step": 1}).json()["count"] == 0
    first = client.get(url, {"tampering": "1", "limit": 2}).json()
    rest = client.get(url, {"tampering": "1", "after": first["next_after"]}).json()
    assert len(first["results"]) == 2 and [r["payload"]["completion"] for r in rest["results"]] == [
        "another writer's"
    ]


def test_the_api_refuses_bad_filters_by_name_and_hides_other_teams_jobs(client, world, launch):
    job, sink = running_job(launch)
    report_two_steps(sink)
    client.force_login(world["owner"])
    bad = client.get(f"/api/v1/jobs/{job.pk}/rollouts", {"tampering": "perhaps"})
    assert bad.status_code == 400 and "tampering" in bad.content.decode()
    assert client.get(f"/api/v1/jobs/{job.pk}/rollouts", {"step": "-1"}).status_code == 400
    client.force_login(world["outsider"])
    assert client.get(f"/api/v1/jobs/{job.pk}/rollouts", {"tampering": "1"}).status_code == 404


def test_a_pruned_tampering_rollout_keeps_what_it_tried(client, world, launch):
    job, sink = running_job(launch)
    report_two_steps(sink)
    JobEvent.objects.filter(job=job).update(created_at=timezone.now() - timedelta(days=40))
    assert rollouts_prune(older_than_days=30) == 6
    client.force_login(world["owner"])
    body = client.get(f"/api/v1/jobs/{job.pk}/rollouts", {"tampering": "1"}).json()
    assert body["count"] == 2  # the texts (and the reason) are gone; the tampering key and parts stay
    assert body["results"][0]["payload"] == {
        "step": 2,
        "reward": 0.0,
        "parts": {"tests": 0.0},
        "tampering": MEMORY,
        "pruned": True,
    }


# --- the pages ------------------------------------------------------------------------------------------


def test_the_job_page_shows_the_alarm_with_the_offending_rollouts_one_click_away(client, world, launch):
    job, sink = running_job(launch)
    client.force_login(world["owner"])
    page = client.get(reverse("job-detail", args=[job.pk])).content.decode()
    assert 'id="job-tampering"' not in page
    assert f'href="/jobs/{job.pk}/rollouts/?tampering=1"' in page  # the filter is always offered
    report_two_steps(sink)
    page = client.get(reverse("job-detail", args=[job.pk])).content.decode()
    box = page[page.index('id="job-tampering"') :]
    box = box[: box.index("</div>")]
    assert "3 rollouts tried to tamper" in box and "reward_tampering</code> at step 2" in box
    assert f'href="/jobs/{job.pk}/rollouts/?tampering=1"' in box


def test_the_rollouts_page_filters_to_the_tampering_ones(client, world, launch):
    job, sink = running_job(launch)
    report_two_steps(sink)
    client.force_login(world["owner"])
    url = reverse("job-rollouts", args=[job.pk])
    page = client.get(url, {"tampering": "1"}).content.decode()
    for text in ("forges via memory", "an agent episode", "another writer&#x27;s", f"tampering: {MEMORY}"):
        assert text in page
    assert "honest one" not in page and "honest two" not in page and "3 rollouts" in page
    everything = client.get(url).content.decode()
    assert "honest one" in everything and "6 rollouts" in everything
    assert (
        "No rollouts tried to tamper with a verifier at step 1"
        in client.get(url, {"tampering": "1", "step": "1"}).content.decode()
    )
    bad = client.get(url, {"step": "two"})
    assert bad.status_code == 400 and "step must be a whole number" in bad.content.decode()
    client.force_login(world["outsider"])
    assert client.get(url, {"tampering": "1"}).status_code == 404
