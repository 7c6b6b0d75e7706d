"""Seed the demo team (user, dataset, verifiers) and launch the demo job. Safe to run again."""

from django.core.management.base import BaseCommand

from anneal.accounts.models import Role
from anneal.accounts.services import member_ensure
from anneal.datasets.models import Dataset
from anneal.datasets.services import dataset_version_create_from_rows
from anneal.training.models import ACTIVE_STATES, Job, JobState
from anneal.training.services import job_finish, job_launch
from anneal.verifiers.models import Verifier
from anneal.verifiers.services import verifier_create
from gpu_jobs.addition import DEMO_EVAL_ROWS, DEMO_PARAMS, DEMO_TRAIN_ROWS, DEMO_VERIFIERS, addition_rows

DEMO_USER, DEMO_PASSWORD = "demo", "anneal-demo"
DATASET = "two-digit addition"
EVAL_DATASET = "two-digit addition (held-out)"
VERIFIERS = DEMO_VERIFIERS


class Command(BaseCommand):
    help = __doc__

    def add_arguments(self, parser):
        parser.add_argument("--base-url", default="http://127.0.0.1:8000")
        parser.add_argument(
            "--steps", type=int, default=DEMO_PARAMS["max_steps"], help="GRPO steps of the demo job."
        )
        parser.add_argument("--no-job", action="store_true", help="Seed only; launch nothing.")

    def handle(self, *args, base_url: str, steps: int, no_job: bool, **opts):
        user, team = member_ensure(
            username=DEMO_USER,
            password=DEMO_PASSWORD,
            organisation="Demo organisation",
            team="Demo team",
            role=Role.OWNER,
            staff=True,
        )
        version = _latest_or_create(
            team=team, user=user, name=DATASET, rows=lambda: addition_rows(**DEMO_TRAIN_ROWS)
        )
        held_out = _latest_or_create(
            team=team, user=user, name=EVAL_DATASET, rows=lambda: addition_rows(**DEMO_EVAL_ROWS)
        )
        verifier_versions = []
        for name, (spec, weight) in VERIFIERS.items():
            verifier = Verifier.objects.filter(team=team, name=name).first()
            if verifier is None:
                verifier = verifier_create(team=team, user=user, name=name, spec=spec)
            verifier_versions.append({"verifier_version": verifier.latest_version.id, "weight": weight})
        self.stdout.write(f"Login: {base_url}/login/  user {DEMO_USER}  password {DEMO_PASSWORD}")
        if no_job:
            return
        # The embedded Redis keeps nothing across restarts: a job queued or running when the demo last
        # stopped has lost its message and its worker, so it is closed with that reason before a new launch.
        for stale in Job.objects.filter(team=team, state__in=[JobState.QUEUED, *ACTIVE_STATES]):
            job_finish(
                job_id=stale.id, state=JobState.FAILED, error="the demo was stopped while this job ran"
            )
        job = job_launch(
            team=team,
            user=user,
            name="demo: GRPO on two-digit addition",
            dataset_version_id=version.id,
            verifiers=verifier_versions,
            # gpu_jobs.addition holds the demo spec (bench/learning.py measures what it teaches).
            params={**DEMO_PARAMS, "max_steps": steps},
            eval_dataset_version_id=held_out.id,
        )
        self.stdout.write(f"Watch the job live: {base_url}/jobs/{job.id}/")
        self.stdout.write(
            f"Dashboards: {base_url}/dashboards/   Admin: {base_url}/admin/   API: {base_url}/api/docs/"
        )


def _latest_or_create(*, team, user, name: str, rows):
    dataset = Dataset.objects.filter(team=team, name=name).first()
    version = dataset.latest_version if dataset else None
    return version or dataset_version_create_from_rows(team=team, user=user, name=name, rows=rows())
