"""Drill: Redis restarted (the Celery broker, the channel layer and the cache at once) while a job trains, its
rewards run on the sandbox hosts, and a browser watches its page. The job finishes in its first attempt with
nothing lost, and the page, which reconnects, ends up holding every event exactly once."""

import pytest
from playwright.sync_api import expect

from tests.chaos.browser import watching
from tests.chaos.drill import assert_nothing_lost, launch, team_setup, wait_finished, wait_step

pytestmark = [pytest.mark.chaos, pytest.mark.e2e]


def test_redis_restart_mid_job_the_job_finishes_and_the_page_shows_every_event_once(cluster, servers):
    api, body = team_setup(cluster, "redis-drill")
    with watching(cluster, "redis-drill-owner") as watcher:
        job = launch(api, body, "redis restarted", max_steps=20)
        watcher.open(job["id"])
        wait_step(cluster, job["id"], 3)
        servers["redis"].restart(down_s=3)
        done = wait_finished(cluster, api, job["id"])
        expect(watcher.page.locator("#conn-text")).to_have_text(
            "finished · all events received", timeout=60_000
        )
        applied = watcher.applied()
        skipped = watcher.skipped
    assert done["attempt"] == 1, "the job was restarted instead of riding out the Redis restart"
    assert_nothing_lost(api, done)
    cluster.wait_healthy(timeout_s=60)  # every process of the cluster rode it out (a later drill needs them)
    assert len(applied) == len(set(applied)), "the page applied an event twice"
    assert sorted(applied + skipped) == list(range(1, done["last_seq"] + 1))
    assert watcher.sockets >= 2, "the page never lost its websocket: the drill did not reach it"
