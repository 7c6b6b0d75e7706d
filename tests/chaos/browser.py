"""A real browser (Debian's chromium through Playwright) watching a job page, with a record of what it shows:
the seq of every event the page applied (its own "anneal:job-event") and every seq frames said were sampled
out, so a drill can check the page holds each event exactly once."""

import json
import shutil
from contextlib import contextmanager

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
ARGS = ["--disable-gpu", "--disable-background-networking", "--disable-component-update", "--no-first-run"]
RECORD = """window.__applied = [];
document.addEventListener("anneal:job-event", (e) => window.__applied.push(e.detail.seq));"""


class Watcher:
    def __init__(self, page, base_url: str) -> None:
        self.page = page
        self.base_url = base_url
        self.sockets = 0
        self.skipped: list[int] = []
        page.on("websocket", self._opened)

    def _opened(self, ws) -> None:
        self.sockets += 1
        ws.on("framereceived", self._frame)

    def _frame(self, payload) -> None:
        try:
            self.skipped.extend(json.loads(payload).get("skipped", []))
        except (TypeError, ValueError):
            pass

    def open(self, job_id: int) -> None:
        from playwright.sync_api import expect

        self.page.goto(f"{self.base_url}/jobs/{job_id}/")
        expect(self.page.locator("#conn-text")).to_have_text("live", timeout=60_000)

    def applied(self) -> list[int]:
        return self.page.evaluate("window.__applied")


@contextmanager
def watching(cluster, username: str):
    """Start the browser and sign in as ``username`` (password: the name twice); yields a Watcher whose
    ``open(job_id)`` opens the job's page. Signed in first, so a job launched after it is still young when its
    page opens."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        browser = p.chromium.launch(headless=True, executable_path=CHROMIUM, args=ARGS)
        try:
            page = browser.new_page()
            page.goto(f"{cluster.base_url}/login/")
            page.fill("input[name=username]", username)
            page.fill("input[name=password]", username * 2)
            page.click("button[type=submit]")
            page.wait_for_url(f"{cluster.base_url}/")
            page.add_init_script(RECORD)
            yield Watcher(page, cluster.base_url)
        finally:
            browser.close()
