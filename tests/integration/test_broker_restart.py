"""Redis, the broker, restarted while a sandbox host (the project's worker, prefork as in production) runs a
batch: the host rides it out and takes the next batch. kombu 5.7 made such a host exit ("Unrecoverable
error: AttributeError ... 'hostname'") when its connection dropped with a task unacknowledged; anneal.broker
fixes that, and this test fails without it."""

import threading
import time
import uuid

import pytest

from sandboxes.client import SandboxClient
from sandboxes.types import RunRequest, Status
from tests.chaos.services import PrivateRedis
from tests.integration.sandbox_worker import Worker

pytestmark = pytest.mark.integration


def sleeping(count: int, seconds: float) -> list[RunRequest]:
    return [
        RunRequest(language="python", code=f"import time\ntime.sleep({seconds})\nprint({i})")
        for i in range(count)
    ]


def assert_serving(host: Worker) -> None:
    log = host.log.read_text(errors="replace")
    # kombu's failure leaves the process up but its consumer gone ("Unrecoverable error"): a host that takes
    # nothing more.
    assert host.proc.poll() is None and "Unrecoverable error" not in log, (
        f"the sandbox host gave up:\n{log[-3000:]}"
    )


def test_a_sandbox_host_rides_out_a_redis_restart_mid_batch_and_takes_the_next_batch(tmp_path):
    server = PrivateRedis(tmp_path)
    server.start()
    queue = f"sandbox-restart-{uuid.uuid4().hex[:8]}"
    host = Worker(
        name=f"host-{queue}", queue=queue, redis_url=server.url, log=tmp_path / "host.log", pool="prefork"
    )
    try:
        host.wait_ready()
        client = SandboxClient(
            mode="remote", broker_url=server.url, result_backend_url=server.url, queue=queue, timeout_s=45
        )
        outcome: dict = {}
        first = threading.Thread(target=lambda: outcome.update(results=client.run_many(sleeping(4, 1.5))))
        first.start()
        time.sleep(2.0)  # the batch is running, its message not yet acknowledged
        server.restart(down_s=2)
        while first.is_alive():
            assert_serving(host)
            first.join(timeout=0.2)
        assert [(r.status, r.stdout) for r in outcome["results"]] == [(Status.OK, f"{i}\n") for i in range(4)]
        after = client.run_many(sleeping(2, 0))
        assert [(r.status, r.stdout) for r in after] == [(Status.OK, "0\n"), (Status.OK, "1\n")]
        assert_serving(host)
    finally:
        host.stop()
        server.stop()
