"""The form builder in a real browser (Debian's chromium through Playwright) against Django's live server:
choosing a type, the live spec, validation as you type, the preview panel, and saving the spec shown."""

import re
import shutil

import pytest

from anneal.datasets.services import dataset_version_create_from_rows
from anneal.verifiers.models import Verifier

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
ARGS = ["--disable-gpu", "--disable-background-networking", "--disable-component-update", "--no-first-run"]


@pytest.fixture
def owner(world):
    """The owner (password "owner-password", tests/world.py), with dataset sums in Core."""
    user, team = world["owner"], world["core"]
    rows = [
        {"prompt": f"{a}+{b}=", "answer": str(a + b)} for a, b in [(12, 45), (3, 4), (20, 22), (7, 8)] * 2
    ]
    dataset_version_create_from_rows(team=team, user=user, name="sums", rows=rows)
    return user


def test_build_validate_preview_and_save_a_verifier(live_server, owner):
    from playwright.sync_api import expect, sync_playwright

    with sync_playwright() as p:
        browser = p.chromium.launch(headless=True, executable_path=CHROMIUM, args=ARGS)
        page = browser.new_page()
        page.goto(f"{live_server.url}/login/")
        page.fill("input[name=username]", "owner")
        page.fill("input[name=password]", "owner-password")
        page.click("button[type=submit]")
        page.wait_for_url(f"{live_server.url}/")
        page.goto(f"{live_server.url}/verifiers/new/")

        # Choosing a type shows its fields only, and the spec it makes.
        page.select_option("select[name=type]", "numeric")
        expect(page.locator('fieldset[data-type="numeric"]')).to_be_visible()
        expect(page.locator('fieldset[data-type="exact_match"]')).to_be_hidden()
        expect(page.locator("#spec-preview")).to_contain_text('"type": "numeric"')

        # A wrong value is named next to its field as the user types, then cleared when fixed.
        page.fill("#id-numeric-rel_tol", "-1")
        rel_tol_error = page.locator('fieldset[data-type="numeric"] [data-field="rel_tol"] [data-live-error]')
        expect(rel_tol_error).to_contain_text("must be 0 or more", timeout=10_000)
        page.fill("#id-numeric-rel_tol", "0.01")
        expect(rel_tol_error).to_be_hidden(timeout=10_000)
        expect(page.locator("#spec-status")).to_contain_text("Valid", timeout=10_000)
        expect(page.locator("#spec-preview")).to_contain_text(
            '"abs_tol": 0'
        )  # defaults filled in by the server

        # Preview: sample rows from a dataset version fill the rows box (and the references as completions).
        page.select_option("#preview-dataset", label="sums v1 (8 rows)")
        page.locator("#preview-load").dispatch_event("click")  # the panel moves as the spec box grows
        # The box starts with an example row: wait for the five loaded rows, not for that example.
        expect(page.locator("#preview-rows")).to_have_value(
            re.compile(
                r'^\{"prompt":"12\+45=","answer":"57"\}\n\{"prompt":"3\+4=","answer":"7"\}\n(.+\n){2}.+$'
            )
        )
        expect(page.locator("#preview-completions")).to_have_value("57\n7\n42\n15\n57")
        page.locator("#preview-run").dispatch_event("click")
        expect(page.locator("#preview-results tbody tr")).to_have_count(5, timeout=15_000)

        # Preview: two pasted rows and completions, scored with the spec as it stands.
        page.fill("#preview-rows", '{"prompt": "12+45=", "answer": "57"}\n{"prompt": "3+4=", "answer": "7"}')
        page.fill("#preview-completions", "It is 57.\n---\nI think 9")
        page.locator("#preview-run").dispatch_event("click")
        rows = page.locator("#preview-results tbody tr")
        expect(rows).to_have_count(2, timeout=15_000)
        expect(rows.nth(0)).to_contain_text("1.000")
        expect(rows.nth(1)).to_contain_text("expected 7, got 9")

        page.fill("input[name=name]", "numbers")
        page.click("#verifier-form button[type=submit]")
        # The saved verifier's own page (/verifiers/<id>/), not the form's /verifiers/new/, which a glob
        # matched at once: the check then raced the save (its probes) and read the form's heading.
        page.wait_for_url(re.compile(rf"^{re.escape(live_server.url)}/verifiers/\d+/$"), timeout=60_000)
        expect(page.locator("h1")).to_contain_text("numbers")
        browser.close()

    spec = Verifier.objects.get(name="numbers").latest_version.spec
    assert spec["type"] == "numeric" and spec["rel_tol"] == 0.01
