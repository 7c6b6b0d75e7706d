"""A real browser (Debian's chromium through Playwright) signs in and watches a running job's page update
over the websocket: the progress, the reward chart and the rollout list, then the final state. The page
tells the truth live: the step counter and the metrics advance without a reload, a checkpoint that arrives
gets its Deploy link, metrics read in curated groups (the raw keys folded away), logs read as lines, and no
server path shows."""

import json
import re
import shutil
import time

import pytest

pytestmark = pytest.mark.e2e

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
ARGS = [
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
# Answers of six characters, which four completion tokens can never match: every group's rewards are all 0,
# so the trainer's no_signal alarm is certain, whatever the seeded run's numbers on this machine's CPU.
ROWS = [{"prompt": f"{a}+{b}=", "answer": f"sum={a + b}"} for a in range(10, 18) for b in range(20, 24)]


@pytest.fixture()
def launched_job(stack):
    api = stack.client(stack.member("watcher", team="Observers"))
    body = "".join(json.dumps(r) + "\n" for r in ROWS).encode()
    upload = api.post("/datasets/uploads", data={"name": "sums"}, files={"file": ("sums.jsonl", body)}).json()
    for _ in range(120):
        upload = api.get(f"/datasets/uploads/{upload['id']}").json()
        if upload["state"] not in ("pending", "processing"):
            break
        time.sleep(0.5)
    assert upload["state"] == "ready", upload
    verifier = api.post("/verifiers", json={"name": "exact", "spec": {"type": "exact_match"}}).json()
    job = api.post(
        "/jobs",
        json={
            "name": "watched",
            "dataset_version": upload["dataset_version"],
            "verifiers": [{"verifier_version": verifier["versions"][0]["id"], "weight": 1.0}],
            "params": {
                "max_steps": 25,
                "num_generations": 4,
                "prompts_per_step": 4,
                "max_completion_length": 4,
                "save_steps": 10,  # checkpoints at steps 10, 20 and 25 arrive while the page watches
            },
        },
    ).json()
    return job


def test_job_page_receives_live_updates(stack, launched_job):
    from playwright.sync_api import expect, sync_playwright

    frames: list[str] = []
    with sync_playwright() as p:
        browser = p.chromium.launch(headless=True, executable_path=CHROMIUM, args=ARGS)
        page = browser.new_page()
        page.on("websocket", lambda ws: ws.on("framereceived", lambda payload: frames.append(str(payload))))
        page.goto(f"{stack.base_url}/login/")
        page.fill("input[name=username]", "watcher")
        page.fill("input[name=password]", "watcherwatcher")
        page.click("button[type=submit]")
        page.wait_for_url(f"{stack.base_url}/")

        first_paint = page.goto(f"{stack.base_url}/jobs/{launched_job['id']}/").text()
        painted_checkpoints = set(re.findall(r'<li data-step="(\d+)"', first_paint))
        expect(page.locator("#conn-text")).to_have_text("live", timeout=30_000)
        painted_step = int(re.search(r'id="progress-text">step (\d+) / 25<', first_paint)[1])
        assert painted_step < 25, "the job ended before the page could watch it"
        expect(page.locator("#rollouts li").first).to_be_visible(timeout=180_000)
        # The counter moves with the stream, never behind the rollouts on the page beside it.
        page.wait_for_function(
            """(painted) => {
              const step = Number(/step (\\d+)/.exec(document.getElementById("progress-text").textContent)[1]);
              const metrics = /at step (\\d+)/.exec(document.getElementById("metrics-step").textContent);
              const rollouts = [...document.querySelectorAll("#rollouts .rollout-step")]
                .map((node) => Number(node.textContent.replace("step ", "")));
              return step > painted && metrics && rollouts.every((r) => r <= step);
            }""",
            arg=painted_step,
            timeout=180_000,
        )
        expect(page.locator("#metrics-empty")).to_be_hidden()
        expect(page.locator("#reward-chart .main-svg").first).to_be_attached(timeout=30_000)
        expect(page.locator("#job-state")).to_have_text("succeeded", timeout=180_000)
        expect(page.locator("#progress-text")).to_have_text("step 25 / 25")
        expect(page.locator("#metrics-step")).to_have_text("at step 25")

        # A checkpoint that arrived while the page watched has its Deploy link, with the checkpoint chosen.
        expect(page.locator("#checkpoints li")).to_have_count(3)
        live_step = next(s for s in ("25", "20", "10") if s not in painted_checkpoints)
        deploy = page.locator(f'#checkpoints li[data-step="{live_step}"] a', has_text="Deploy")
        expect(deploy).to_have_attribute("href", re.compile(r"/deployments/new/\?checkpoint=\d+$"))
        card = page.locator(f'#checkpoints li[data-step="{live_step}"] a', has_text="Model card")
        expect(card).to_have_attribute("href", re.compile(r"^/checkpoints/\d+/card/$"))
        expect(page.locator("#checkpoints")).not_to_contain_text("job-")

        # Metrics in curated groups, in words; the trainer's raw keys only behind "Show all metrics".
        metrics_card = page.locator("#metrics-card")
        expect(metrics_card).to_contain_text("mean reward")
        expect(metrics_card).to_contain_text("Pass rate")
        assert "/" not in page.locator("#metric-groups").inner_text()
        expect(page.locator("#metrics")).to_be_hidden()
        page.locator("#metrics-all summary").click()
        expect(page.locator("#metrics")).to_contain_text("rewards/exact")

        # Logs read as lines (time, level, message), with no Python dict reprs; no server path anywhere.
        log = page.locator("#log").inner_text()
        assert "training finished: 25 steps" in log and "{'" not in log, log
        expect(page.locator("#log li").first).to_contain_text(
            re.compile(r"^\d\d:\d\d:\d\d\s*(info|warning|error)")
        )
        assert str(stack.workdir) not in page.content()
        # Its groups give no learning signal (see ROWS): the page shows the alarm the trainer raised.
        expect(page.locator("#job-alarms")).to_be_visible()
        expect(page.locator("#alarm-list")).to_contain_text("no_signal")
        page.screenshot(path=str(stack.workdir / "job-page.png"), full_page=True)

        # The rollout feed filters in place, and two steps show side by side.
        page.fill("#rollout-filters input[name=min]", "2")
        expect(page.locator("#rollouts li:visible")).to_have_count(0)
        page.fill("#rollout-filters input[name=min]", "")
        expect(page.locator("#rollouts li:visible")).to_have_count(100)
        page.fill("#compare-form input[name=a]", "1")
        page.fill("#compare-form input[name=b]", "25")
        expect(page.locator("#compare-a li")).to_have_count(4)
        expect(page.locator("#compare-b li")).to_have_count(4)

        # An expert flags a rollout: it becomes a test case of the verifier.
        first = page.locator("#rollouts li").first
        first.locator("details.flag summary").click()
        first.locator("details.flag button[type=submit]").click()
        expect(first.locator("details.flag")).to_contain_text("saved as test case #")

        # The Dash dashboards render inside the page (assets served locally) with this user's job in them.
        page.goto(f"{stack.base_url}/dashboards/")
        compare = page.frame_locator("iframe").first
        expect(compare.locator(".js-plotly-plot .main-svg").first).to_be_attached(timeout=60_000)
        expect(compare.locator("#jobs")).to_contain_text("watched", timeout=60_000)
        expect(compare.locator(".js-plotly-plot .scatterlayer .trace").first).to_be_attached()
        page.screenshot(path=str(stack.workdir / "dashboards.png"), full_page=True)
        browser.close()

    assert not [f for f in frames if str(stack.workdir) in f], "a server path went out on the websocket"
    events = [json.loads(f) for f in frames if f.startswith("{")]
    live = [event for frame in events if frame.get("type") == "events" for event in frame["events"]]
    seqs = [e["seq"] for e in live]
    assert seqs == sorted(set(seqs)), "the page received an event twice or out of order"
    assert {"metric", "rollout", "state"} <= {e["kind"] for e in live}
