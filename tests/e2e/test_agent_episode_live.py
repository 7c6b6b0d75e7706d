"""A real browser watches an agent job (the repo-fix pack, episodes in sandbox sessions) on its job page: each
sampled episode shows as a timeline of turns, each turn with its tool call and the sandbox's output, and the
held-out evaluation's episodes are marked as such and one filter away."""

import shutil

import pytest

from tests.e2e.test_job_page_live import ARGS, CHROMIUM

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap is not installed"),
]

# Sized for the tiny model (512 positions, a token per character), as in tests/unit/test_agent_training.py.
ENVIRONMENT = {
    "max_turns": 3,
    "turn_tokens": 24,
    "token_budget": 60,
    "context_tokens": 460,
    "observation_chars": 120,
    "system_prompt": 'Fix the bug. Call one tool a turn: <tool>{"name": "run_tests", "arguments": {}}</tool>',
}


def test_an_episode_shows_as_a_live_timeline_of_turns(stack):
    from playwright.sync_api import expect, sync_playwright

    api = stack.client(stack.member("agent", team="Agents"))
    made = api.post("/datasets/packs/agent", json={"name": "repo-fix", "limit": 4})
    assert made.status_code == 201, made.text
    held = api.post("/datasets/packs/agent", json={"name": "repo-fix held-out", "offset": 4, "limit": 2})
    assert held.status_code == 201, held.text
    job = api.post(
        "/jobs",
        json={
            "name": "agent",
            "dataset_version": made.json()["dataset_version"]["id"],
            "eval_dataset_version": held.json()["dataset_version"]["id"],
            "params": {
                "max_steps": 2,
                "num_generations": 2,
                "prompts_per_step": 2,
                "seed": 5,
                "environment": ENVIRONMENT,
            },
        },
    )
    assert job.status_code == 201, job.text
    with sync_playwright() as p:
        browser = p.chromium.launch(headless=True, executable_path=CHROMIUM, args=ARGS)
        page = browser.new_page()
        page.goto(f"{stack.base_url}/login/")
        page.fill("input[name=username]", "agent")
        page.fill("input[name=password]", "agentagent")
        page.click("button[type=submit]")
        page.wait_for_url(f"{stack.base_url}/")
        page.goto(f"{stack.base_url}/jobs/{job.json()['id']}/")
        episode = page.locator("#rollouts li.rollout").first
        expect(episode.locator("ol.turns > li").first).to_be_visible(timeout=240_000)
        expect(episode.locator(".episode-facts")).to_contain_text("ended:")
        turn = episode.locator("ol.turns > li").first
        expect(turn.locator(".turn-head")).to_contain_text("turn 1")
        expect(turn.locator(".io-label").nth(1)).to_have_text("Sandbox output")
        expect(page.locator("#job-state")).to_have_text("succeeded", timeout=240_000)
        # The held-out evaluation's episodes (before training and after it), marked, and filtered to.
        held_out = page.locator("#rollouts li.rollout:has(.badge.held-out)")
        expect(held_out.first).to_be_visible()
        page.select_option("select[name=outcome]", "held-out")
        shown = page.locator("#rollouts li.rollout:visible")
        expect(shown).to_have_count(held_out.count())
        assert held_out.count() == 4  # 2 tasks at step 0 and at step 2
        page.select_option("select[name=outcome]", "training")
        expect(page.locator("#rollouts li.rollout:visible .badge.held-out")).to_have_count(0)
        page.screenshot(path=str(stack.workdir / "agent-job-page.png"), full_page=True)
        browser.close()
