"""The getting-started guide on the home page: the four steps from nothing to a deployed model (upload, verifier,
job, deploy), each ticked off once the team has done it, and an example dataset and verifier one click away."""

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.db import transaction
from django.shortcuts import redirect
from django.urls import reverse
from django.views.decorators.http import require_POST

from anneal.accounts.models import Team
from anneal.datasets.models import Dataset, DatasetVersion
from anneal.datasets.services import dataset_version_create_from_rows
from anneal.deployments.models import Deployment
from anneal.pages import writable_team
from anneal.training.models import Checkpoint, Job
from anneal.verifiers.models import Verifier
from anneal.verifiers.services import verifier_create
from gpu_jobs.addition import addition_rows

EXAMPLE_DATASET = "example-sums"
EXAMPLE_VERIFIER = "example-exact-answer"
EXAMPLE_ROWS = 64


def guide_steps(team: Team) -> list[dict]:
    """The guide's steps in order, each with whether the team has done it and where to do it."""
    has_checkpoint = Checkpoint.objects.filter(job__team=team).exists()
    return [
        {
            "key": "upload",
            "title": "Upload a dataset",
            "detail": "a CSV or JSONL of prompts and reference answers; bad rows are listed before you accept",
            "url": reverse("dataset-upload"),
            "done": Dataset.objects.filter(team=team).exists(),
        },
        {
            "key": "verifier",
            "title": "Create a verifier",
            "detail": "how an answer is checked, e.g. exact match against the answer column",
            "url": reverse("verifier-new"),
            "done": Verifier.objects.filter(team=team).exists(),
        },
        {
            "key": "job",
            "title": "Launch a job",
            "detail": "train on the dataset with the verifier as reward, and watch it live",
            "url": reverse("job-new"),
            "done": Job.objects.filter(team=team).exists(),
        },
        {
            "key": "deploy",
            "title": "Deploy a checkpoint",
            "detail": "a finished job's checkpoint behind an OpenAI-compatible API, with a playground and keys"
            if has_checkpoint
            else "once a job has saved a checkpoint, its page has a Deploy button",
            "url": reverse("deployment-new") if has_checkpoint else reverse("job-list"),
            "done": Deployment.objects.filter(team=team).exists(),
        },
    ]


@transaction.atomic
def example_create(*, team: Team, user) -> tuple[DatasetVersion, Verifier, bool]:
    """The example dataset (sums with their answers) and an exact-match verifier for it, in ``team``.
    Idempotent: what already exists under the example names is returned as is; ``created`` says whether
    anything was made."""
    created = False
    version = (
        DatasetVersion.objects.filter(dataset__team=team, dataset__name=EXAMPLE_DATASET)
        .order_by("-number")
        .first()
    )
    if version is None:
        rows = [
            {"prompt": row["prompt"], "answer": row["answer"]}
            for row in addition_rows(n=EXAMPLE_ROWS, seed=7, split="train")
        ]
        version = dataset_version_create_from_rows(team=team, user=user, name=EXAMPLE_DATASET, rows=rows)
        created = True
    verifier = Verifier.objects.filter(team=team, name=EXAMPLE_VERIFIER).first()
    if verifier is None:
        verifier = verifier_create(
            team=team,
            user=user,
            name=EXAMPLE_VERIFIER,
            spec={"type": "exact_match", "reference_field": "answer"},
        )
        created = True
    return version, verifier, created


@require_POST
@login_required
def example_create_view(request):
    team = writable_team(request)
    version, verifier, created = example_create(team=team, user=request.user)
    if created:
        messages.success(
            request,
            f"Added dataset '{EXAMPLE_DATASET}' ({version.row_count} sums) and verifier '{EXAMPLE_VERIFIER}' "
            "(exact match on the answer column): launch a job with them next.",
        )
    else:
        messages.info(request, f"The example dataset and verifier are already in team {team.name}.")
    return redirect("home")
