"""A REST write sent again with its Idempotency-Key (a client retrying after a timeout) gets the first answer
back and acts once; keys are the caller's own; a key still being answered gets 409 with Retry-After."""

import hashlib

from django.core.cache import cache
from django.utils import timezone

from anneal.idempotency import slot_of
from anneal.verifiers.models import Verifier
from tests.world import token_client

SPEC = {"name": "exact", "spec": {"type": "exact_match"}}


def _post(client, key, body=SPEC):
    return client.post("/api/v1/verifiers", body, format="json", HTTP_IDEMPOTENCY_KEY=key)


def test_a_retried_create_is_answered_from_the_first_and_creates_one_verifier(world):
    client = token_client(world["owner"])
    first = _post(client, "retry-1")
    again = _post(client, "retry-1")
    assert first.status_code == 201, first.content
    assert again.status_code == 201 and again.json() == first.json()
    assert again["Idempotent-Replayed"] == "true" and not first.has_header("Idempotent-Replayed")
    assert Verifier.objects.filter(team=world["core"], name="exact").count() == 1


def test_a_new_key_acts_again_and_a_refusal_is_kept_too(world):
    client = token_client(world["owner"])
    assert _post(client, "a").status_code == 201
    duplicate = _post(client, "b")  # a second create with the same name: the service refuses it
    assert duplicate.status_code == 400, duplicate.content
    assert _post(client, "b").json() == duplicate.json()


def test_one_callers_key_is_not_anothers(world):
    mine, theirs = token_client(world["owner"]), token_client(world["outsider"])
    assert _post(mine, "shared").status_code == 201
    other = _post(theirs, "shared")
    assert other.status_code == 201 and not other.has_header("Idempotent-Replayed")
    assert Verifier.objects.filter(team=world["rivals"], name="exact").count() == 1


def test_a_key_still_being_answered_gets_409_with_retry_after_and_nothing_is_created(world):
    client = token_client(world["owner"])
    caller = client.post("/api/v1/verifiers/validate", {"spec": {"type": "format"}}, format="json")
    assert caller.status_code == 200
    # The first request of this key is still running (another worker process holds its slot).
    credential = client._credentials["HTTP_AUTHORIZATION"]
    slot = slot_of(
        caller=hashlib.sha256(credential.encode()).hexdigest(),
        method="POST",
        path="/api/v1/verifiers",
        key="k",
    )
    cache.add(slot, "pending", timeout=30)
    try:
        busy = _post(client, "k")
    finally:
        cache.delete(slot)
    assert busy.status_code == 409 and busy["Retry-After"] == "1"
    assert busy.json()["field"] == "Idempotency-Key"
    assert not Verifier.objects.filter(team=world["core"]).exists()


def test_an_unusable_key_is_a_400_naming_the_header(world):
    response = _post(token_client(world["owner"]), "x" * 300)
    assert response.status_code == 400 and "Idempotency-Key" in response.json()["detail"]


def test_a_secret_shown_once_is_never_kept_for_a_replay(world):
    client = token_client(world["owner"])
    path = "/api/v1/deployments/keys"
    first = client.post(path, {"name": "app"}, format="json", HTTP_IDEMPOTENCY_KEY="key-1")
    assert first.status_code == 201 and first["Cache-Control"] == "no-store", first.content
    raw = first.json()["key"]
    credential = client._credentials["HTTP_AUTHORIZATION"]
    slot = slot_of(
        caller=hashlib.sha256(credential.encode()).hexdigest(), method="POST", path=path, key="key-1"
    )
    assert cache.get(slot) is None  # neither the key nor a "pending" mark stays in Redis
    again = client.post(path, {"name": "app2"}, format="json", HTTP_IDEMPOTENCY_KEY="key-1")
    assert again.status_code == 201 and again.json()["key"] != raw


def test_a_revoked_token_gets_no_replay(world):
    from anneal.accounts.models import ApiToken

    client = token_client(world["owner"])
    assert _post(client, "before-revoke").status_code == 201
    ApiToken.objects.update(revoked_at=timezone.now())
    again = _post(client, "before-revoke")
    assert again.status_code == 401 and not again.has_header("Idempotent-Replayed")
