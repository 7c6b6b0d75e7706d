"""The deploy path without a dead end: a cap reached is said (with a link to the form that changes it) before
any request; a model without a chat template is said on its pages, its playground starts in raw completion,
and a chat of one user message reaches it as the bare prompt it was trained on; every key comes with a curl and
a Python call; the key page survives a reload.

Named users: owner (owner of team Core), expert, outsider (team Rivals)."""

import json
from decimal import Decimal

import jinja2
import pytest

from anneal.deployments import services
from gpu_jobs.serving.chat_template import PLAIN_JINJA, folder_has_chat_template, render_plain
from gpu_jobs.serving.vllm import vllm_serve_argv
from tests.world import checkpoint_create, page_client

pytestmark = pytest.mark.django_db


def _deployment(world, tmp_path, *, template: str | None):
    folder = tmp_path / "ckpt"
    folder.mkdir()
    config = {"tokenizer_class": "PreTrainedTokenizerFast"}
    if template:
        config["chat_template"] = template
    (folder / "tokenizer_config.json").write_text(json.dumps(config))
    checkpoint = checkpoint_create(team=world["core"], location=folder)
    return services.deployment_create(
        team=world["core"], user=world["owner"], checkpoint_id=checkpoint.pk, name="adder"
    )


def test_a_cap_of_zero_is_said_before_any_request_with_a_link_to_the_budget_form(world, tmp_path):
    deployment = _deployment(world, tmp_path, template=None)
    owner = page_client(world["owner"])
    assert 'id="cap-reached"' not in owner.get(f"/deployments/{deployment.pk}/").content.decode()
    services.team_budget_set(team=world["core"], user=world["owner"], monthly_cap_usd=Decimal(0))
    for url in (f"/deployments/{deployment.pk}/", f"/deployments/{deployment.pk}/playground/"):
        html = owner.get(url).content.decode()
        assert 'id="cap-reached"' in html and 'href="/deployments/#budget"' in html, url
    assert 'id="budget"' in owner.get("/deployments/").content.decode()


def test_the_cap_refusal_names_where_the_cap_is_changed(world, tmp_path):
    from tests.unit.test_deploy_api import make_ready

    deployment = _deployment(world, tmp_path, template=None)
    make_ready(deployment)
    services.team_budget_set(team=world["core"], user=world["owner"], monthly_cap_usd=Decimal(0))
    response = page_client(world["owner"]).post(
        f"/deployments/{deployment.pk}/playground/chat",
        {"messages": [{"role": "user", "content": "1+1="}], "max_tokens": 2},
        content_type="application/json",
    )
    assert response.status_code == 429
    assert "/deployments/#budget" in response.json()["error"]["message"]


def test_a_model_without_a_chat_template_starts_the_playground_in_raw_completion(world, tmp_path):
    deployment = _deployment(world, tmp_path, template=None)
    owner = page_client(world["owner"])
    detail = owner.get(f"/deployments/{deployment.pk}/").content.decode()
    assert 'id="chat-template-note"' in detail and "/v1/completions" in detail
    playground = owner.get(f"/deployments/{deployment.pk}/playground/").content.decode()
    assert 'id="raw-note"' in playground
    assert '<input id="chat-raw" type="checkbox" checked>' in playground


def test_a_checkpoint_on_another_host_answers_by_its_base_model(world, tmp_path):
    from anneal.deployments.selectors import deployment_has_chat_template

    deployment = _deployment(world, tmp_path, template="{{ messages }}")
    checkpoint = deployment.checkpoint
    checkpoint.location = str(tmp_path / "on-the-gpu-host")  # not on this machine
    checkpoint.save()
    assert deployment_has_chat_template(deployment) is False  # the tiny family has no chat template
    owner = page_client(world["owner"])
    assert 'id="chat-template-note"' in owner.get(f"/deployments/{deployment.pk}/").content.decode()
    checkpoint.job.spec = {"model": "some-local-model"}
    checkpoint.job.save()
    assert deployment_has_chat_template(deployment) is None  # neither folder here: the page says nothing


def test_a_model_with_a_chat_template_starts_the_playground_in_chat(world, tmp_path):
    deployment = _deployment(world, tmp_path, template="{{ messages[0]['content'] }}")
    owner = page_client(world["owner"])
    assert 'id="chat-template-note"' not in owner.get(f"/deployments/{deployment.pk}/").content.decode()
    playground = owner.get(f"/deployments/{deployment.pk}/playground/").content.decode()
    assert 'id="raw-note"' not in playground and '<input id="chat-raw" type="checkbox">' in playground


def test_one_user_message_is_the_bare_prompt_and_vllm_gets_the_same_rule(tmp_path):
    one = [{"role": "user", "content": "12+45="}]
    two = [{"role": "system", "content": "You add."}, {"role": "user", "content": "1+2="}]
    assert render_plain(one) == "12+45="
    assert render_plain(two) == "system: You add.\nuser: 1+2=\nassistant:"
    template = jinja2.Environment().from_string(PLAIN_JINJA)
    for messages in (one, two):
        assert template.render(messages=messages) == render_plain(messages)
    (tmp_path / "tokenizer_config.json").write_text("{}")
    assert folder_has_chat_template(tmp_path) is False
    argv = vllm_serve_argv(tmp_path, tier="standard", served_name="m", port=8001)
    assert argv[argv.index("--chat-template") + 1] == PLAIN_JINJA
    (tmp_path / "chat_template.jinja").write_text("{{ messages }}")
    assert "--chat-template" not in vllm_serve_argv(tmp_path, tier="standard", served_name="m", port=8001)
    assert folder_has_chat_template(tmp_path / "gone") is None


def test_the_new_key_is_shown_once_after_a_redirect_with_curl_and_python(world, tmp_path):
    deployment = _deployment(world, tmp_path, template=None)
    owner = page_client(world["owner"])
    url = f"/deployments/{deployment.pk}/keys/"
    created = owner.post(url, {"name": "backend"})
    assert created.status_code == 302 and created["Location"] == url
    page = owner.get(url)
    html = page.content.decode()
    assert page.status_code == 200 and page["Cache-Control"] == "no-store"
    raw = html.split('id="raw-key">')[1].split("<")[0]
    assert raw.startswith("sk-anneal-")
    assert "curl http://" in html and f"Bearer {raw}" in html and f'api_key="{raw}"' in html
    assert 'data-copy="new-key-curl"' in html and 'data-copy="new-key-python"' in html
    again = owner.get(url, follow=True)  # a reload: the secret is gone, said so on the deployment's page
    assert again.redirect_chain[-1][0] == f"/deployments/{deployment.pk}/"
    assert raw not in again.content.decode() and "shown only once" in again.content.decode()
    listing = owner.get(f"/deployments/{deployment.pk}/").content.decode()
    assert 'data-copy="keys-curl"' in listing and 'os.environ["ANNEAL_API_KEY"]' in listing
    assert "$ANNEAL_API_KEY" in listing


def test_another_teams_key_page_is_not_found(world, tmp_path):
    deployment = _deployment(world, tmp_path, template=None)
    owner = page_client(world["owner"])
    owner.post(f"/deployments/{deployment.pk}/keys/", {"name": "backend"})
    outsider = page_client(world["outsider"])
    assert outsider.get(f"/deployments/{deployment.pk}/keys/").status_code == 404
