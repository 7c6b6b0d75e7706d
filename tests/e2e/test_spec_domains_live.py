"""A multi-domain job launched through the REST API trains on the real stack, and its page charts each
domain's share of the prompts as the adaptive sampler moves it."""

import json
import shutil
import time

import pytest

pytestmark = pytest.mark.e2e

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
ARGS = ["--disable-gpu", "--disable-background-networking", "--disable-component-update", "--no-first-run"]
ROWS = [
    {"prompt": f"{a}+{b}=", "answer": str(a + b), "domain": "sums"}
    for a in range(10, 18)
    for b in range(20, 24)
]
ROWS += [
    {"prompt": f"{a}-{b}=", "answer": str(a - b), "domain": "diffs"}
    for a in range(50, 58)
    for b in range(20, 24)
]


def test_a_mixed_job_charts_its_domain_weights(stack):
    from playwright.sync_api import expect, sync_playwright

    api = stack.client(stack.member("mixer", team="Mixers"))
    body = "".join(json.dumps(r) + "\n" for r in ROWS).encode()
    upload = api.post(
        "/datasets/uploads",
        data={"name": "arith", "domain_field": "domain"},
        files={"file": ("a.jsonl", body)},
    ).json()
    for _ in range(120):
        upload = api.get(f"/datasets/uploads/{upload['id']}").json()
        if upload["state"] not in ("pending", "processing"):
            break
        time.sleep(0.5)
    assert upload["state"] == "ready", upload
    verifier = api.post("/verifiers", json={"name": "exact", "spec": {"type": "exact_match"}}).json()
    version = verifier["versions"][0]["id"]
    refused = api.post(
        "/jobs",
        json={
            "dataset_versions": [upload["dataset_version"]],
            "domain_weights": {"sums": 0.5, "diffs": 0.6},
            "verifiers": [{"verifier_version": version, "weight": 1.0}],
        },
    )
    assert refused.status_code == 400 and refused.json()["errors"][0]["field"] == "domain_weights"
    job = api.post(
        "/jobs",
        json={
            "name": "mixed",
            "dataset_versions": [upload["dataset_version"]],
            "domain_weights": {"sums": 0.5, "diffs": 0.5},
            "verifiers": [{"verifier_version": version, "weight": 1.0}],
            "params": {
                "max_steps": 6,
                "num_generations": 4,
                "prompts_per_step": 4,
                "max_completion_length": 4,
                "adaptive_sampling": True,
                "domain_floor": 0.2,
            },
        },
    ).json()

    with sync_playwright() as p:
        browser = p.chromium.launch(headless=True, executable_path=CHROMIUM, args=ARGS)
        page = browser.new_page()
        page.goto(f"{stack.base_url}/login/")
        page.fill("input[name=username]", "mixer")
        page.fill("input[name=password]", "mixermixer")
        page.click("button[type=submit]")
        page.wait_for_url(f"{stack.base_url}/")
        page.goto(f"{stack.base_url}/jobs/{job['id']}/")
        expect(page.locator("#job-state")).to_have_text("succeeded", timeout=240_000)
        expect(page.locator("#domain-chart .main-svg").first).to_be_attached(timeout=30_000)
        expect(page.locator("#domain-chart .scatterlayer .trace")).to_have_count(2)
        page.screenshot(path=str(stack.workdir / "domain-weights.png"), full_page=True)
        browser.close()

    events = api.get(f"/jobs/{job['id']}/events", params={"after": 0, "limit": 1000}).json()["results"]
    weights = [e["payload"] for e in events if e["kind"] == "metric" and "domain_weight/sums" in e["payload"]]
    assert len(weights) == 6
    for metric in weights:
        assert metric["domain_weight/sums"] + metric["domain_weight/diffs"] == pytest.approx(1.0)
        assert min(metric["domain_weight/sums"], metric["domain_weight/diffs"]) >= 0.2 - 1e-9
