"""Drill: the serve worker restarted while a deployment serves a steady stream of /v1 completions, first as a
supervisor restarts it (SIGTERM, then started again), then as it crashes (SIGKILL, then started again).

Either way a replica comes back on the restarted worker and the deployment serves again. Meanwhile a caller
sees only answers or a clean 503 it may retry (never a 500), and every answer is metered exactly once: the
usage the deployment reports is the sum of the usage its answers carried."""

import signal
import threading
import time

import httpx
import pytest

from tests.chaos.drill import deployed, team_setup, wait_ready

pytestmark = pytest.mark.chaos

CALL_GAP_S = 0.2  # well under the standard tier's rate limit
MAX_CALLS = 2000  # the caller's bound, whatever happens


class Caller:
    """Sends one completion after another to the deployment from a thread, keeping every outcome."""

    def __init__(self, cluster, key: str, model: str) -> None:
        self.url = f"{cluster.base_url}/v1/completions"
        self.headers = {"Authorization": f"Bearer {key}"}
        self.body = {"model": model, "prompt": "33+21=", "max_tokens": 3, "temperature": 0}
        self.outcomes: list[tuple[int, dict]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> "Caller":
        self._thread.start()
        return self

    def __exit__(self, *exc_info) -> None:
        self._stop.set()
        self._thread.join(timeout=120)

    def _run(self) -> None:
        with httpx.Client(timeout=60) as http:
            while not self._stop.is_set() and len(self.outcomes) < MAX_CALLS:
                try:
                    response = http.post(self.url, json=self.body, headers=self.headers)
                    self.outcomes.append((response.status_code, response.json()))
                except (httpx.HTTPError, ValueError) as exc:
                    self.outcomes.append((0, {"error": {"message": f"{type(exc).__name__}: {exc}"}}))
                self._stop.wait(CALL_GAP_S)

    def answered(self) -> int:
        return sum(1 for status, _ in self.outcomes if status == 200)

    def wait_answers(self, more: int, timeout_s: float = 180) -> None:
        target = self.answered() + more
        deadline = time.monotonic() + timeout_s
        while self.answered() < target:
            if time.monotonic() > deadline:
                raise AssertionError(f"no {more} answers in {timeout_s} s: {self.outcomes[-3:]}")
            time.sleep(0.1)


def ready_ids(detail: dict) -> set[int]:
    return {r["id"] for r in detail["replica_set"] if r["state"] == "ready"}


def test_the_serve_worker_restarted_or_crashed_the_deployment_serves_again_and_meters_once(cluster):
    api, body = team_setup(cluster, "serve-drill")
    deployment, key = deployed(cluster, api, body)
    with Caller(cluster, key, "adder") as caller:
        caller.wait_answers(3)
        for sig in (signal.SIGTERM, signal.SIGKILL):
            before = ready_ids(api.get(f"/deployments/{deployment['id']}").json())
            cluster.kill("serve", sig)
            cluster.respawn("serve")
            back = wait_ready(cluster, api, deployment["id"], besides=before)
            assert back["state"] == "ready" and ready_ids(back) - before, back["replica_set"]
            caller.wait_answers(3)
    refused = [(status, out) for status, out in caller.outcomes if status != 200]
    assert all(status == 503 and out["error"]["message"] for status, out in refused), refused[:5]
    answers = [out["usage"] for status, out in caller.outcomes if status == 200]
    usage = api.get(f"/deployments/{deployment['id']}/usage").json()["totals"]
    assert usage["requests"] == len(answers), "an answer was metered twice, or not at all"
    assert usage["prompt_tokens"] == sum(u["prompt_tokens"] for u in answers)
    assert usage["completion_tokens"] == sum(u["completion_tokens"] for u in answers)
    lost = [
        r for r in api.get(f"/deployments/{deployment['id']}").json()["replica_set"] if r["state"] == "failed"
    ]
    assert any("no heartbeat" in r["error"] and r["error"].endswith("replaced") for r in lost), lost
