"""In a real browser (Debian's chromium through Playwright, Django's live server): a job page whose held-out
evaluation is bucketed by prompt length draws that chart (not its "no evaluation yet" note beside a full
table), and a checkpoint's model card shows its tables and curve, exports Markdown and fits a 1,400 px
viewport."""

import shutil

import pytest

from anneal.training.events import job_events_record
from anneal.training.state import checkpoint_record
from tests.unit.test_model_card import _eval

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
ARGS = ["--disable-gpu", "--disable-background-networking", "--disable-component-update", "--no-first-run"]


@pytest.fixture
def evaluated(world, launch, tmp_path):
    from anneal.datasets.services import dataset_version_create_from_rows
    from tests.world import ROWS

    held_out = dataset_version_create_from_rows(
        team=world["core"], user=world["owner"], name="held", rows=ROWS
    )
    job = launch("adder", eval_version=held_out, max_steps=10)
    events = [_eval(0, 0.25, 0.5, {8: 0.3, 16: 0.1})]
    events += [("metric", {"step": s, "reward": s / 10}) for s in range(1, 6)]
    events += [_eval(5, 0.75, 0.5, {8: 0.8, 16: 0.4})]
    job_events_record(job_id=job.pk, events=events)
    checkpoint = checkpoint_record(job=job, step=5, location=str(tmp_path / "ckpt"), code_version="abc")
    return job, checkpoint


def test_the_length_chart_draws_and_the_model_card_reads(live_server, evaluated):
    from playwright.sync_api import expect, sync_playwright

    job, checkpoint = evaluated
    with sync_playwright() as p:
        browser = p.chromium.launch(headless=True, executable_path=CHROMIUM, args=ARGS)
        page = browser.new_page(viewport={"width": 1400, "height": 900})
        page.goto(f"{live_server.url}/login/")
        page.fill("input[name=username]", "owner")
        page.fill("input[name=password]", "owner-password")
        page.click("button[type=submit]")
        page.wait_for_url(f"{live_server.url}/")

        page.goto(f"{live_server.url}/jobs/{job.pk}/")
        chart = page.locator("#length-eval-chart")
        expect(chart.locator(".main-svg").first).to_be_attached(timeout=30_000)
        expect(chart.locator(".chart-empty")).to_have_count(0)
        expect(page.locator("#length-eval-table")).to_contain_text("≤ 16")

        page.click('#checkpoints li[data-step="5"] a:has-text("Model card")')
        page.wait_for_url(f"{live_server.url}/checkpoints/{checkpoint.pk}/card/")
        expect(page.locator("h1")).to_contain_text("Model card: adder, step 5")
        expect(page.locator("#card-held-out")).to_contain_text("+50.0 points")
        expect(page.locator("#card-by-length")).to_contain_text("16")
        expect(page.locator("#card-curve polyline")).to_be_attached()
        assert page.evaluate("() => document.documentElement.scrollWidth") <= 1400
        with page.expect_download() as download:
            page.click("#card-markdown")
        text = open(download.value.path(), encoding="utf-8").read()
        assert (
            text.startswith("# Model card: adder, step 5")
            and "| add | 0.250 | 0.750 | +50.0 points |" in text
        )
        browser.close()
