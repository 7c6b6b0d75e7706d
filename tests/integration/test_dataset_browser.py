"""A real browser uploads a CSV through the XHR form, maps its columns on the preview page, watches the
ingest finish, and accepts the upload with its bad row skipped."""

import shutil

import pytest

pytestmark = [pytest.mark.integration, pytest.mark.e2e]

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
ARGS = ["--disable-gpu", "--disable-background-networking", "--disable-component-update", "--no-first-run"]


def test_upload_map_review_and_accept_in_the_browser(stack):
    from playwright.sync_api import expect, sync_playwright

    stack.member("curator", team="Curators")
    rows = "".join(f"{i}+1=,{i + 1},{'odd' if i % 2 else 'even'}\n" for i in range(300))
    body = ("question,solution,topic\n" + rows + "ragged,row\n").encode()
    xhr_posts: list[str] = []
    with sync_playwright() as p:
        browser = p.chromium.launch(headless=True, executable_path=CHROMIUM, args=ARGS)
        page = browser.new_page()
        page.on(
            "request",
            lambda r: (
                xhr_posts.append(r.url)
                if r.method == "POST" and r.headers.get("x-requested-with") == "XMLHttpRequest"
                else None
            ),
        )
        page.goto(f"{stack.base_url}/login/")
        page.fill("input[name=username]", "curator")
        page.fill("input[name=password]", "curatorcurator")
        page.click("button[type=submit]")
        page.wait_for_url(f"{stack.base_url}/")

        page.goto(f"{stack.base_url}/datasets/upload/")
        page.fill("input[name=name]", "counting")
        page.set_input_files(
            "input[name=file]", {"name": "counting.csv", "mimeType": "text/csv", "buffer": body}
        )
        page.click("#upload-submit")
        expect(page.get_by_text("Choose the columns")).to_be_visible(timeout=30_000)
        assert xhr_posts and xhr_posts[0].endswith("/datasets/upload/")  # sent by the XHR with progress
        expect(page.locator("#mapping-preview")).to_contain_text("0+1=")
        expect(page.locator("select[name=prompt_field]")).to_have_value("question")
        page.select_option("select[name=domain_field]", "topic")
        page.screenshot(path=str(stack.workdir / "dataset-mapping.png"), full_page=True)
        page.click("text=Validate every row")

        # upload.js polls and reloads when the ingest is done: the review page with the bad row named.
        expect(page.locator("#upload-state")).to_have_text("review", timeout=60_000)
        expect(page.locator(".errors-table")).to_contain_text("has 2 fields, the header has 3")
        page.screenshot(path=str(stack.workdir / "dataset-review.png"), full_page=True)
        page.click("#accept")
        expect(page.locator("h1")).to_have_text("counting", timeout=30_000)
        expect(page.locator("#dataset-stats")).to_contain_text("even: 150")
        page.screenshot(path=str(stack.workdir / "dataset-page.png"), full_page=True)
        browser.close()
