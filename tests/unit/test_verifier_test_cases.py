"""A rollout flagged on a job page becomes a test case of the verifier, checked against its latest version."""

import pytest
from django.contrib.auth.models import User
from rest_framework.test import APIClient

from anneal.accounts.models import Organisation
from anneal.accounts.services import api_token_create, membership_set, team_create
from anneal.datasets.services import dataset_version_create_from_rows
from anneal.training.events import job_events_record
from anneal.training.services import job_launch
from anneal.verifiers.services import verifier_create, verifier_version_create

pytestmark = pytest.mark.django_db

ROWS = [{"prompt": f"{n}+1=", "answer": str(n + 1)} for n in range(8)]


@pytest.fixture
def world(settings, tmp_path):
    settings.DATASET_DIR = tmp_path
    org = Organisation.objects.create(name="Acme")
    owner, viewer, outsider = (User.objects.create_user(name) for name in ("owner", "viewer", "outsider"))
    team = team_create(organisation=org, name="Core", owner=owner)
    membership_set(team=team, user=viewer, role="viewer")
    team_create(organisation=org, name="Rivals", owner=outsider)
    version = dataset_version_create_from_rows(team=team, user=owner, name="sums", rows=ROWS)
    # A lax verifier: it takes the last number anywhere in the text, so "5 or 6" passes for 6.
    verifier = verifier_create(
        team=team, user=owner, name="lax", spec={"type": "exact_match", "extract": "last_number"}
    )
    job = job_launch(
        team=team,
        user=owner,
        name="j",
        dataset_version_id=version.id,
        verifiers=[{"verifier_version": verifier.latest_version.id}],
    )
    rollout = {
        "step": 1,
        "prompt": "5+1=",
        "completion": "5 or 6",
        "reward": 1.0,
        "parts": {"lax": 1.0},
        "row_index": 5,
    }
    seq = job_events_record(job_id=job.pk, events=[("rollout", rollout)])[0].seq

    def client(user):
        api = APIClient()
        _, raw = api_token_create(
            user=user, team=team if user != outsider else outsider.memberships.get().team, name="t"
        )
        api.credentials(HTTP_AUTHORIZATION=f"Bearer {raw}")
        return api

    return {
        "job": job,
        "seq": seq,
        "verifier": verifier,
        "client": client,
        "owner": owner,
        "viewer": viewer,
        "outsider": outsider,
    }


def test_a_flagged_hack_becomes_a_failing_case_until_the_verifier_is_fixed(world):
    owner = world["client"](world["owner"])
    job, seq, verifier = world["job"], world["seq"], world["verifier"]
    flagged = owner.post(
        f"/api/v1/jobs/{job.pk}/rollouts/{seq}/flag",
        {"verifier": verifier.pk, "expected_pass": False, "note": "hedging between two answers"},
        format="json",
    )
    assert flagged.status_code == 201, flagged.content
    cases = owner.get(f"/api/v1/verifiers/{verifier.pk}/test-cases").json()
    assert len(cases) == 1
    assert cases[0]["row"] == ROWS[5] and cases[0]["completion"] == "5 or 6"
    assert cases[0]["score"] == 1.0 and cases[0]["ok"] is False  # the lax version lets the hack through

    verifier_version_create(verifier=verifier, user=world["owner"], spec={"type": "exact_match"})
    fixed = owner.get(f"/api/v1/verifiers/{verifier.pk}/test-cases").json()
    assert fixed[0]["score"] == 0.0 and fixed[0]["ok"] is True

    page = APIClient()
    page.force_login(world["owner"])
    detail = page.get(f"/verifiers/{verifier.pk}/")
    assert b"hedging between two answers" in detail.content


def test_flagging_names_what_is_wrong_and_respects_roles(world):
    job, seq, verifier = world["job"], world["seq"], world["verifier"]
    owner, viewer, outsider = (world["client"](world[name]) for name in ("owner", "viewer", "outsider"))
    url = f"/api/v1/jobs/{job.pk}/rollouts/{{}}/flag"
    body = {"verifier": verifier.pk, "expected_pass": False}
    assert viewer.post(url.format(seq), body, format="json").status_code == 403
    assert outsider.post(url.format(seq), body, format="json").status_code == 404
    not_rollout = owner.post(url.format(1), body, format="json")  # seq 1 is the "queued" state event
    assert not_rollout.status_code == 400 and not_rollout.json()["errors"][0]["field"] == "seq"
    other = verifier_create(
        team=verifier.team, user=world["owner"], name="other", spec={"type": "exact_match"}
    )
    wrong = owner.post(url.format(seq), {**body, "verifier": other.pk}, format="json")
    assert wrong.status_code == 400 and wrong.json()["errors"][0]["field"] == "verifier"
