"""Housekeeping keeps event sequences whole: old rollouts lose their texts, not their rows."""

from datetime import timedelta

import pytest
from django.utils import timezone

from anneal.training.events import job_events_record
from anneal.training.housekeeping import rollouts_prune
from anneal.training.models import JobEvent

pytestmark = pytest.mark.django_db


@pytest.fixture
def job(launch):
    return launch("j")


def test_old_rollouts_keep_step_reward_and_parts_and_their_seq(job):
    rollout = {
        "step": 3,
        "prompt": "1+1=",
        "completion": "2",
        "reward": 1.0,
        "parts": {"exact": 1.0},
        "reason": "ok",
    }
    job_events_record(
        job_id=job.pk, events=[("rollout", rollout), ("rollout", rollout), ("metric", {"step": 3})]
    )
    old = timezone.now() - timedelta(days=40)
    JobEvent.objects.filter(job=job, seq=2).update(created_at=old)
    JobEvent.objects.filter(job=job, seq=4).update(created_at=old)  # a metric: never pruned

    assert rollouts_prune(older_than_days=30) == 1
    assert rollouts_prune(older_than_days=30) == 0  # already pruned
    events = {e.seq: e.payload for e in JobEvent.objects.filter(job=job)}
    assert sorted(events) == [1, 2, 3, 4]
    assert events[2] == {"step": 3, "reward": 1.0, "parts": {"exact": 1.0}, "pruned": True}
    assert events[3] == rollout
    assert events[4] == {"step": 3}


def test_zero_days_keeps_everything(job):
    job_events_record(job_id=job.pk, events=[("rollout", {"step": 1, "prompt": "p"})])
    JobEvent.objects.filter(job=job).update(created_at=timezone.now() - timedelta(days=4000))
    assert rollouts_prune(older_than_days=0) == 0
