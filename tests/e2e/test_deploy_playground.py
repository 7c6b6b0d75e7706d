"""A real browser deploys a checkpoint from its job's page, waits for it to turn ready, chats with it in the
playground (the answer streams in), creates an API key shown once, and sees the playground's usage metered."""

import json
import re
import shutil

import pytest

from tests.stack import wait_for

pytestmark = pytest.mark.e2e

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
ARGS = ["--disable-gpu", "--disable-background-networking", "--disable-component-update", "--disable-sync"]
ROWS = [{"prompt": f"{a}+{b}=", "answer": str(a + b)} for a, b in [(12, 45), (33, 21), (70, 19), (41, 8)]]


@pytest.fixture()
def finished_job(stack):
    api = stack.client(stack.member("player", team="Players"))
    body = "".join(json.dumps(r) + "\n" for r in ROWS).encode()
    upload = api.post("/datasets/uploads", data={"name": "sums"}, files={"file": ("sums.jsonl", body)}).json()
    upload = wait_for(
        lambda: api.get(f"/datasets/uploads/{upload['id']}").json(),
        lambda u: u["state"] not in ("pending", "processing"),
        timeout_s=60,
    )
    assert upload["state"] == "ready", upload
    verifier = api.post("/verifiers", json={"name": "exact", "spec": {"type": "exact_match"}}).json()
    job = api.post(
        "/jobs",
        json={
            "name": "to deploy",
            "dataset_version": upload["dataset_version"],
            "verifiers": [{"verifier_version": verifier["versions"][0]["id"], "weight": 1.0}],
            "params": {"max_steps": 2, "num_generations": 2, "prompts_per_step": 2, "learning_rate": 1e-9},
        },
    ).json()
    job = wait_for(
        lambda: api.get(f"/jobs/{job['id']}").json(),
        lambda j: j["state"] != "queued" and j["state"] != "running",
        timeout_s=300,
    )
    assert job["state"] == "succeeded", job["error"]
    yield job
    for deployment in api.get("/deployments").json():  # free the replica for the tests that follow
        api.post(f"/deployments/{deployment['id']}/stop")


def test_deploy_chat_and_key_in_the_browser(stack, finished_job):
    from playwright.sync_api import expect, sync_playwright

    with sync_playwright() as p:
        browser = p.chromium.launch(headless=True, executable_path=CHROMIUM, args=ARGS)
        page = browser.new_page()
        page.goto(f"{stack.base_url}/login/")
        page.fill("input[name=username]", "player")
        page.fill("input[name=password]", "playerplayer")
        page.click("button[type=submit]")
        page.wait_for_url(f"{stack.base_url}/")

        page.goto(f"{stack.base_url}/jobs/{finished_job['id']}/")
        page.locator("#checkpoints a", has_text="Deploy").first.click()
        page.wait_for_url(re.compile(r".*/deployments/new/\?checkpoint=\d+"))
        page.fill("input[name=name]", "adder-web")
        page.get_by_role("button", name="Deploy", exact=True).click()
        page.wait_for_url(re.compile(r".*/deployments/\d+/$"))
        # The page reloads itself while the gate runs and the replica starts.
        expect(page.locator("#deployment-state")).to_have_text("ready", timeout=300_000)
        expect(page.locator("#gate")).to_contain_text("passed")
        expect(page.locator(".tier-card[data-tier=standard]")).to_contain_text("$0.20")

        page.click("text=Playground")
        page.check("#chat-raw")
        page.fill("#chat-input", "12+45=")
        page.click("#chat-send")
        expect(page.locator("#chat-status")).to_contain_text("tokens in", timeout=60_000)
        assert re.fullmatch(r"\d+", page.locator(".chat-msg.assistant").first.inner_text().strip())
        page.screenshot(path=str(stack.workdir / "playground.png"), full_page=True)

        page.click("text=adder-web")
        page.fill("#key-name", "web")
        page.click("text=Create key")
        expect(page.locator("#raw-key")).to_have_text(re.compile(r"^sk-anneal-"))
        page.click("text=Done, I have copied it")
        expect(page.locator(".key-list")).to_contain_text("web")
        expect(page.locator("table").first).to_contain_text("playground")
        browser.close()
