"""The launch form in a real browser (Debian's chromium through Playwright) against Django's live server: the
estimate comes back beside its button without a reload, and the warning about max completion length follows
the value typed."""

import os
import shutil

import pytest

from anneal.datasets.services import dataset_version_create_from_rows
from anneal.training.models import Job
from anneal.verifiers.services import verifier_create

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
ARGS = ["--disable-gpu", "--disable-background-networking", "--disable-component-update", "--no-first-run"]
ROWS = [{"prompt": f"q{n}", "answer": a} for n, a in enumerate(["1", "22", "twelve chars", "4444"] * 2)]


@pytest.fixture
def owner(world):
    """The owner (password "owner-password", tests/world.py), with a dataset whose row 3 needs 12 tokens and a
    newer one of short answers."""
    user, team = world["owner"], world["core"]
    dataset_version_create_from_rows(team=team, user=user, name="answers", rows=ROWS)
    short = [{"prompt": f"{n}+1=", "answer": str(n + 1)} for n in range(8)]
    dataset_version_create_from_rows(team=team, user=user, name="sums", rows=short)
    verifier_create(team=team, user=user, name="exact", spec={"type": "exact_match"})
    return user


def test_estimate_in_place_and_the_length_warning_follows_the_value(live_server, owner, tmp_path):
    from playwright.sync_api import expect, sync_playwright

    with sync_playwright() as p:
        browser = p.chromium.launch(headless=True, executable_path=CHROMIUM, args=ARGS)
        page = browser.new_page(viewport={"width": 1280, "height": 900})
        page.goto(f"{live_server.url}/login/")
        page.fill("input[name=username]", "owner")
        page.fill("input[name=password]", "owner-password")
        page.click("button[type=submit]")
        page.wait_for_url(f"{live_server.url}/")
        page.goto(f"{live_server.url}/jobs/new/")

        # The essentials fit the first screen; the rest is folded away.
        for selector in (
            "select[name=dataset_version]",
            ".verifier-choice input[type=checkbox]",
            "[name=p_model]",
            "[name=p_budget]",
        ):
            box = page.locator(selector).bounding_box()
            assert box and box["y"] + box["height"] < 900, selector
        expect(page.locator("input[name=p_learning_rate]")).to_be_hidden()
        expect(page.locator("#launch-warnings")).to_be_hidden()

        # Choosing the dataset with a long answer warns at once, and "Change it" opens the setting.
        page.select_option("select[name=dataset_version]", label="answers v1 (8 rows)")
        summary = page.locator("#launch-warnings")
        expect(summary).to_contain_text("(row 3) is 12 tokens for tiny", timeout=15_000)
        summary.get_by_text("Change it").click()
        warning = page.locator('[data-warning-for="p_max_completion_length"]')
        expect(warning).to_be_visible()
        expect(warning).to_contain_text("max completion length is 8")

        page.check(".verifier-choice input[type=checkbox]")
        page.evaluate("window.notReloaded = true")
        page.click("button[data-estimate]")
        estimate = page.locator("#estimate")
        expect(estimate).to_contain_text("Estimated cost", timeout=15_000)
        expect(estimate).to_contain_text("No measured job yet: a default rate for tiny")
        assert (
            page.evaluate("window.notReloaded") is True
            and page.url.split("#")[0] == f"{live_server.url}/jobs/new/"
        )
        # The panel sits right by the button, not a page further down.
        button = page.locator("button[data-estimate]").bounding_box()
        assert estimate.bounding_box()["y"] - button["y"] < 200

        page.fill("input[name=p_max_completion_length]", "12")
        page.locator("input[name=p_max_completion_length]").dispatch_event("change")
        expect(warning).to_be_hidden(timeout=15_000)
        expect(summary).to_be_hidden()
        if os.environ.get("ANNEAL_SCREENSHOTS"):
            page.screenshot(path=os.path.join(os.environ["ANNEAL_SCREENSHOTS"], "launch.png"), full_page=True)
        browser.close()
    assert not Job.objects.exists()
