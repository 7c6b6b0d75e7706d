"""A rollout flagged on a job page becomes a test case of the verifier, checked against its latest version."""

import pytest

from anneal.training.events import job_events_record
from anneal.verifiers.services import verifier_create, verifier_version_create
from tests.world import ROWS, page_client, token_client

pytestmark = pytest.mark.django_db


@pytest.fixture
def hedged(world, launch) -> dict:
    """A job of Core trained with a lax verifier, and the seq of a rollout that hedged its way to a reward."""
    # A lax verifier: it takes the last number anywhere in the text, so "5 or 6" passes for 6.
    verifier = verifier_create(
        team=world["core"],
        user=world["owner"],
        name="lax",
        spec={"type": "exact_match", "extract": "last_number"},
    )
    job = launch("j", verifier=verifier)  # on the launcher's rows, tests.world.ROWS
    rollout = {
        "step": 1,
        "prompt": "5+1=",
        "completion": "5 or 6",
        "reward": 1.0,
        "parts": {"lax": 1.0},
        "row_index": 5,
    }
    seq = job_events_record(job_id=job.pk, events=[("rollout", rollout)])[0].seq
    return {"job": job, "seq": seq, "verifier": verifier}


def test_a_flagged_hack_becomes_a_failing_case_until_the_verifier_is_fixed(world, hedged):
    owner = token_client(world["owner"])
    job, seq, verifier = hedged["job"], hedged["seq"], hedged["verifier"]
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

    detail = page_client(world["owner"]).get(f"/verifiers/{verifier.pk}/")
    assert b"hedging between two answers" in detail.content


def test_flagging_names_what_is_wrong_and_respects_roles(world, hedged):
    job, seq, verifier = hedged["job"], hedged["seq"], hedged["verifier"]
    owner, viewer, outsider = (token_client(world[name]) for name in ("owner", "teammate", "outsider"))
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
