"""An agent job's held-out evaluation episodes reach the platform as rollouts marked held_out
(gpu_jobs.agent.training): one filter away in the API and on the rollouts page, marked where they are shown,
and still told apart once their texts are pruned. Named users: owner (team Core), outsider (team Rivals)."""

from datetime import timedelta

import pytest
from django.urls import reverse
from django.utils import timezone

from anneal.training.housekeeping import rollouts_prune
from anneal.training.models import JobEvent
from tests.unit.test_tampering_rollouts import one_slot, rollout, running_job  # noqa: F401 - one_slot: fixture
from workers.sink import DjangoEventSink

pytestmark = pytest.mark.django_db


@pytest.fixture
def job(client, world, launch):
    """A running job that reported a held-out evaluation at step 0, a training step, and another evaluation
    at step 1; the client logged in as its team's owner."""
    job, sink = running_job(launch)
    sink.emit_many(
        [rollout(0, "held-out clamp at 0", held_out=True), rollout(0, "held-out gcd at 0", held_out=True)]
    )
    sink.emit_many([rollout(1, "training fizzbuzz"), rollout(1, "training stack")])
    sink.emit_many([rollout(1, "held-out clamp at 1", held_out=True)])
    client.force_login(world["owner"])
    return job


def listed(client, job, **filters) -> list[str]:
    """The completions GET /api/v1/jobs/{id}/rollouts lists with ``filters``."""
    body = client.get(f"/api/v1/jobs/{job.pk}/rollouts", filters).json()
    return [r["payload"].get("completion", "(pruned)") for r in body["results"]]


def test_the_api_lists_the_held_out_episodes_or_only_the_training_ones(client, world, job):
    assert listed(client, job, held_out="1") == [
        "held-out clamp at 0",
        "held-out gcd at 0",
        "held-out clamp at 1",
    ]
    url = f"/api/v1/jobs/{job.pk}/rollouts"
    assert all(r["payload"]["held_out"] is True for r in client.get(url, {"held_out": "1"}).json()["results"])
    assert listed(client, job, held_out="false") == ["training fizzbuzz", "training stack"]
    assert listed(client, job, held_out="1", step=1) == ["held-out clamp at 1"]
    assert client.get(url).json()["count"] == 5

    bad = client.get(url, {"held_out": "perhaps"})
    assert bad.status_code == 400 and "held_out" in bad.content.decode()
    client.force_login(world["outsider"])
    assert client.get(url, {"held_out": "1"}).status_code == 404


def test_a_resumed_attempt_reports_each_evaluation_s_episodes_once(client, job):
    """Held-out episodes share their step with training rollouts: neither drops the other, and an attempt that
    runs an evaluation again (after a restart from a checkpoint) does not store its episodes twice."""
    again = DjangoEventSink(job_id=job.pk, attempt=1)  # reads what is stored, as a restarted process does
    again.emit_many([rollout(1, "held-out clamp at 1, again", held_out=True), rollout(1, "training again")])
    again.emit_many([rollout(2, "training fizzbuzz at 2")])
    again.emit_many([rollout(2, "held-out clamp at 2", held_out=True)])
    assert listed(client, job, held_out="1")[-2:] == ["held-out clamp at 1", "held-out clamp at 2"]
    assert listed(client, job, held_out="0")[-2:] == ["training stack", "training fizzbuzz at 2"]


def test_a_pruned_held_out_episode_is_still_told_apart(client, job):
    JobEvent.objects.filter(job=job).update(created_at=timezone.now() - timedelta(days=40))
    assert rollouts_prune(older_than_days=30) == 5
    assert listed(client, job, held_out="1") == ["(pruned)"] * 3
    assert listed(client, job, held_out="0") == ["(pruned)"] * 2


def test_the_rollouts_page_filters_to_the_held_out_episodes_and_marks_them(client, job):
    url = reverse("job-rollouts", args=[job.pk])
    page = client.get(url, {"held_out": "1"}).content.decode()
    assert "held-out clamp at 0" in page and "held-out clamp at 1" in page and "3 rollouts" in page
    assert "training fizzbuzz" not in page
    assert page.count('class="badge held-out"') == 3
    assert "only the held-out evaluation's episodes, on tasks the job never trains on" in page
    everything = client.get(url).content.decode()
    assert "training fizzbuzz" in everything and everything.count('class="badge held-out"') == 3
    empty = client.get(url, {"held_out": "1", "step": "7"}).content.decode()
    assert "No rollouts of the held-out evaluation at step 7" in empty
