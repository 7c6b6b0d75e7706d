"""`manage.py demo_seed` (run by `make demo`) seeds once, reuses what exists, and launches the demo job."""

import io

import pytest
from django.core.management import call_command

from anneal.datasets.models import DatasetVersion
from anneal.training.models import Job, JobState
from anneal.verifiers.models import Verifier

pytestmark = pytest.mark.django_db


def seed(*args: str) -> str:
    out = io.StringIO()
    call_command("demo_seed", *args, stdout=out)
    return out.getvalue()


def test_seeding_twice_reuses_what_exists(settings, tmp_path):
    settings.DATASET_DIR = tmp_path
    first = seed("--no-job")
    seed("--no-job")
    assert "user demo  password anneal-demo" in first
    assert DatasetVersion.objects.count() == 2  # training rows and the held-out rows, once each
    assert Verifier.objects.count() == 2


def test_a_new_run_launches_a_job_and_closes_one_a_restart_orphaned(settings, tmp_path):
    settings.DATASET_DIR = tmp_path
    out = seed("--steps", "5")
    job = Job.objects.get()
    assert f"/jobs/{job.pk}/" in out
    assert job.spec["eval_dataset_version"] and job.max_steps == 5
    seed("--steps", "5")
    old, new = Job.objects.order_by("pk")
    old.refresh_from_db()
    assert old.state == JobState.FAILED and "demo was stopped" in old.error
    assert new.state == JobState.QUEUED
