"""No page is wider than a 1,400 px viewport when every name on it is 200 characters without a space (a dataset,
a verifier, a job, a deployment): long names wrap or are cut with the full name on hover. A real browser
(Debian's chromium through Playwright) against Django's live server."""

import shutil

import pytest

from anneal.datasets.services import dataset_version_create_from_rows
from anneal.deployments import services as deployments
from anneal.verifiers.services import verifier_create
from tests.world import ROWS, checkpoint_create

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
ARGS = ["--disable-gpu", "--disable-background-networking", "--disable-component-update", "--no-first-run"]
VIEWPORT = 1400


def long(kind: str) -> str:
    return (kind + "-" + "x" * 200)[:200]


@pytest.fixture
def long_named(world, launch, tmp_path):
    team, owner = world["core"], world["owner"]
    version = dataset_version_create_from_rows(team=team, user=owner, name=long("dataset"), rows=ROWS)
    verifier = verifier_create(team=team, user=owner, name=long("verifier"), spec={"type": "exact_match"})
    job = launch(long("job"), version=version, verifier=verifier, max_steps=1)
    checkpoint = checkpoint_create(team=team, location=tmp_path / "ckpt")
    deployment = deployments.deployment_create(
        team=team, user=owner, checkpoint_id=checkpoint.pk, name=long("deployment")
    )
    return {
        "dataset": version.dataset_id,
        "verifier": verifier.pk,
        "job": job.pk,
        "deployment": deployment.pk,
    }


def test_no_page_is_wider_than_the_viewport_with_200_character_names(live_server, long_named):
    from playwright.sync_api import sync_playwright

    pages = [
        "/",
        "/datasets/",
        f"/datasets/{long_named['dataset']}/",
        "/verifiers/",
        f"/verifiers/{long_named['verifier']}/",
        "/verifiers/new/",
        "/jobs/",
        f"/jobs/{long_named['job']}/",
        "/jobs/new/",
        f"/jobs/{long_named['job']}/rollouts/",
        "/jobs/queue/",
        "/dashboards/",
        "/help/glossary/",
        "/sandboxes/",
        "/datasets/upload/",
        "/datasets/packs/new/",
        "/tokens/",
        "/team/settings/",
        "/deployments/",
        f"/deployments/{long_named['deployment']}/",
        f"/deployments/{long_named['deployment']}/playground/",
        "/deployments/new/",
    ]
    too_wide = {}
    with sync_playwright() as p:
        browser = p.chromium.launch(headless=True, executable_path=CHROMIUM, args=ARGS)
        page = browser.new_page(viewport={"width": VIEWPORT, "height": 900})
        page.goto(f"{live_server.url}/login/")
        page.fill("input[name=username]", "owner")
        page.fill("input[name=password]", "owner-password")
        page.click("button[type=submit]")
        page.wait_for_url(f"{live_server.url}/")
        for path in pages:
            response = page.goto(f"{live_server.url}{path}")
            assert response.status == 200, path
            width = page.evaluate("() => document.documentElement.scrollWidth")
            if width > VIEWPORT:
                too_wide[path] = width
        # The lists cut a long name and show it whole on hover.
        page.goto(f"{live_server.url}/datasets/")
        assert page.locator(f'a.truncate[title="{long("dataset")}"]').count() == 1
        browser.close()
    assert too_wide == {}, f"pages wider than {VIEWPORT} px: {too_wide}"
