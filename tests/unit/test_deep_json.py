"""JSON nested past anneal.jsontext.MAX_DEPTH (json.loads raises RecursionError, not ValueError, near the
interpreter's limit) is refused like any bad JSON wherever a user sends it: never a server error. Dataset
lines nested too deep are in test_dataset_ingest."""

import json

import pytest
from django.test import RequestFactory
from django.urls import reverse

from anneal import jsontext
from anneal.deployments.batches import parse_lines
from anneal.deployments.openai_shape import OpenAIError, parse_body
from anneal.verifiers.models import Verifier
from tests.world import api_client

pytestmark = pytest.mark.django_db
BRACKETS = "[" * 5000 + "]" * 5000  # past json.loads's own limit: RecursionError
DEEP_SPEC = '{"type": "exact_match", "x": ' + "[" * 150 + "]" * 150 + "}"  # parses, but too deep


def nested(levels: int) -> str:
    return "[" * levels + "]" * levels


def test_the_limit_is_exact_and_answers_as_bad_json():
    assert jsontext.loads(nested(jsontext.MAX_DEPTH)) is not None
    assert jsontext.loads(json.dumps({"a": [[1, {"b": 2}]]})) == {"a": [[1, {"b": 2}]]}
    for text in (nested(jsontext.MAX_DEPTH + 1), BRACKETS, BRACKETS.encode()):
        with pytest.raises(json.JSONDecodeError, match="nested more than 100 levels deep"):
            jsontext.loads(text)


@pytest.fixture
def owner(world):
    return world["owner"]


@pytest.mark.parametrize("body", [BRACKETS, '{"name": "v", "spec": ' + DEEP_SPEC + "}"])
def test_the_api_refuses_it_with_a_400(owner, body):
    client = api_client(owner)
    for url in ("/api/v1/verifiers", "/api/v1/jobs/estimate", "/api/v1/verifiers/preview"):
        response = client.post(url, data=body, content_type="application/json")
        assert response.status_code == 400, (url, response.content)
        assert "nested more than 100 levels deep" in response.json()["detail"]


def test_v1_bodies_and_batch_lines_refuse_it_in_openais_shape(settings):
    request = RequestFactory().post("/v1/chat/completions", data=BRACKETS, content_type="application/json")
    with pytest.raises(OpenAIError) as error:
        parse_body(request)
    assert error.value.status == 400 and error.value.code == "invalid_json"
    line = json.dumps({"custom_id": "a", "method": "POST", "url": "/v1/chat/completions", "body": {}})
    _, errors = parse_lines(f'{line[:-1]}, "deep": {BRACKETS}}}\n'.encode())
    assert errors == ["line 1: not valid JSON (nested more than 100 levels deep (the limit))"]


def test_the_builder_shows_it_inline(client, owner):
    client.force_login(owner)
    response = client.post(
        reverse("verifier-new"), {"name": "v", "type": "exact_match", "spec_json": BRACKETS}
    )
    assert response.status_code == 200
    assert "nested more than 100 levels deep" in response.content.decode()
    assert not Verifier.objects.exists()
