"""The reward_model verifier on a tiny reward model trained here (tests/reward_models.py): it prefers what the
model prefers, batched and in order, names the model in its reason, and refuses a spec naming no such model,
a generative one or one outside the store."""

import re

import pytest

from gpu_jobs.rewards import build_scorer, validate_spec
from gpu_jobs.rewards.base import SpecError
from tests.reward_models import POLITE, RUDE, build_tiny_reward_model


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    root = tmp_path_factory.mktemp("store")
    build_tiny_reward_model(root / "tiny-rm")
    return root


@pytest.fixture
def in_store(store, monkeypatch):
    monkeypatch.setenv("ANNEAL_MODEL_STORE", str(store))
    return store


def test_the_model_scores_what_it_was_trained_to_prefer_higher(in_store):
    scorer = build_scorer({"type": "reward_model", "model": "tiny-rm", "batch_size": 3})
    rows = [{"prompt": "where is the invoice"}] * (len(POLITE) + len(RUDE))
    results = scorer.score_batch(rows, POLITE + RUDE)
    polite, rude = results[: len(POLITE)], results[len(POLITE) :]
    assert min(r.score for r in polite) > 0.5 > max(r.score for r in rude), [r.score for r in results]
    assert all(0.0 < r.score < 1.0 for r in results)
    assert results[0].reason.startswith("reward model tiny-rm: logit ")
    alone = scorer.score({"prompt": "where is the invoice"}, RUDE[2])
    assert alone.parts["logit"] == pytest.approx(results[len(POLITE) + 2].parts["logit"], abs=1e-5)


def test_raw_logits_an_extracted_answer_and_rows_without_a_prompt(in_store):
    raw = build_scorer({"type": "reward_model", "model": "tiny-rm", "normalise": "none", "extract": "tag"})
    results = raw.score_batch(
        [{"prompt": "can you help me"}, {"prompt": "can you help me"}, {"question": "x"}],
        ["<answer>happy to help</answer>", "<answer></answer>", "happy to help"],
    )
    assert results[0].score == results[0].parts["logit"] and results[0].score > 0
    assert results[1].reason == "empty answer"
    assert results[2].reason == "row has no 'prompt' text for the model"


def test_a_spec_naming_no_reward_model_of_the_store_is_refused(in_store, tmp_path):
    with pytest.raises(SpecError) as error:
        validate_spec({"type": "reward_model", "model": "nope"})
    assert error.value.field == "model"
    assert (
        error.value.message == f"no model folder 'nope' in the model store {in_store}; its folders: tiny-rm"
    )
    with pytest.raises(SpecError, match="is outside the model store"):
        validate_spec({"type": "reward_model", "model": str(tmp_path)})
    generative = in_store / "gen"
    generative.mkdir(exist_ok=True)
    (generative / "config.json").write_text('{"architectures": ["LlamaForCausalLM"]}')
    with pytest.raises(
        SpecError, match=r"not a sequence-classification model \(architectures: LlamaForCausalLM\)"
    ):
        validate_spec({"type": "reward_model", "model": "gen"})
    two = in_store / "two-labels"
    two.mkdir(exist_ok=True)
    (two / "config.json").write_text(
        '{"architectures": ["BertForSequenceClassification"], "id2label": {"0": "a", "1": "b"}}'
    )
    with pytest.raises(SpecError, match="has 2 labels"):
        validate_spec({"type": "reward_model", "model": "two-labels"})
    with pytest.raises(SpecError) as error:
        validate_spec({"type": "reward_model", "model": "tiny-rm", "batch_size": 0})
    assert error.value.field == "batch_size"


def test_without_a_model_store_the_spec_says_so(monkeypatch):
    monkeypatch.delenv("ANNEAL_MODEL_STORE", raising=False)
    with pytest.raises(SpecError, match=r"no model store is configured here \(ANNEAL_MODEL_STORE\)"):
        validate_spec({"type": "reward_model", "model": "tiny-rm"})


@pytest.mark.django_db
def test_the_web_process_previews_and_probes_a_small_reward_model_and_refuses_a_large_one(
    world, in_store, settings
):
    from tests.world import api_client

    settings.MODEL_STORE = in_store
    api = api_client(world["owner"])
    spec = {"type": "reward_model", "model": "tiny-rm"}
    samples = [{"row": {"prompt": "can you help me"}, "completion": text} for text in (POLITE[1], RUDE[0])]
    preview = api.post("/api/v1/verifiers/preview", {"spec": spec, "samples": samples}, format="json")
    assert preview.status_code == 200, preview.content
    scores = [result["score"] for result in preview.json()["results"]]
    assert scores[0] > 0.5 > scores[1]
    created = api.post("/api/v1/verifiers", {"name": "politeness", "spec": spec}, format="json")
    assert created.status_code == 201, created.content
    probes = {p["name"]: p for p in created.json()["versions"][0]["probe_results"]}
    assert not probes["prompt_echo"]["skipped"] and "empty" in probes
    settings.PREVIEW_MODEL_MAX_MB = 0.01  # the tiny model is larger than this
    refused = api.post("/api/v1/verifiers/preview", {"spec": spec, "samples": samples}, format="json")
    assert refused.status_code == 400
    (error,) = refused.json()["errors"]
    assert error["field"] == "spec.model"
    assert re.fullmatch(
        r"reward model tiny-rm is 0\.\d MB; the web process loads reward models up to 0\.01 MB "
        r"\(ANNEAL_PREVIEW_MODEL_MAX_MB\): score with it in a job, on the gpu-worker",
        error["message"],
    ), error["message"]
    saved = api.post("/api/v1/verifiers", {"name": "politeness-2", "spec": spec}, format="json")
    assert saved.status_code == 201
    (skipped,) = saved.json()["versions"][0]["probe_results"]
    assert skipped["skipped"] == f"not probed here: {error['message']}"
