"""Remote sandbox batches on two real Celery sandbox workers; the one running a batch is SIGKILLed mid-batch.

Workers consume a queue of their own (so no other test's worker takes these batches) on the test Redis.
"""

import os
import signal
import threading
import time
import uuid

import pytest
import redis

from sandboxes.client import SandboxClient
from sandboxes.remote import running_host
from sandboxes.types import RunRequest, Status
from tests.integration.sandbox_worker import Worker

pytestmark = pytest.mark.integration


@pytest.fixture
def workers(tmp_path):
    redis_url = os.environ["REDIS_URL"]
    queue = f"sandbox-test-{uuid.uuid4().hex[:8]}"
    started = [
        Worker(name=f"{name}-{queue}", queue=queue, redis_url=redis_url, log=tmp_path / f"{name}.log")
        for name in ("host-a", "host-b")
    ]
    try:
        for worker in started:
            worker.wait_ready()
        yield queue, redis_url, started
    finally:
        for worker in started:
            worker.stop()


def test_a_batch_whose_host_dies_is_rerun_on_the_other_host_and_returned_once(workers):
    queue, redis_url, started = workers
    client = SandboxClient(
        mode="remote", broker_url=redis_url, result_backend_url=redis_url, queue=queue, timeout_s=90
    )
    requests = [
        RunRequest(language="python", code=f"import time\ntime.sleep(0.5)\nprint({i})") for i in range(8)
    ]
    batch_id = f"test-{uuid.uuid4().hex}"
    outcome = {}
    thread = threading.Thread(
        target=lambda: outcome.update(results=client.run_many(requests, batch_id=batch_id))
    )
    thread.start()

    store = redis.Redis.from_url(redis_url)
    first_host = None
    for _ in range(300):  # until a host has started the batch
        first_host = running_host(store, batch_id)
        if first_host:
            break
        time.sleep(0.05)
    assert first_host, "no host picked the batch up"
    victim = next(w for w in started if w.proc.pid == int(first_host.rsplit(":", 1)[1]))
    time.sleep(0.3)  # mid-batch: the first programs are running
    os.killpg(victim.proc.pid, signal.SIGKILL)
    victim.proc.wait()

    thread.join(timeout=90)
    assert not thread.is_alive()
    results = outcome["results"]
    assert [(r.status, r.stdout) for r in results] == [(Status.OK, f"{i}\n") for i in range(8)]
    survivor = next(w for w in started if w is not victim)
    assert client.last_hosts[0] == first_host
    assert client.last_hosts[-1].endswith(f":{survivor.proc.pid}")


def test_a_batch_already_finished_is_not_run_again(workers):
    queue, redis_url, started = workers
    client = SandboxClient(
        mode="remote", broker_url=redis_url, result_backend_url=redis_url, queue=queue, timeout_s=60
    )
    batch_id = f"test-{uuid.uuid4().hex}"
    first = client.run_many(
        [RunRequest(language="python", code="import random\nprint(random.random())")], batch_id=batch_id
    )
    # The same batch id delivered again (what a re-send after a lost heartbeat looks like): the stored result.
    again = client.run_many([RunRequest(language="python", code="print('ran twice')")], batch_id=batch_id)
    assert again[0].stdout == first[0].stdout
    for _ in range(200):  # until a worker has taken the second delivery too
        logs = "".join(w.log.read_text(errors="replace") for w in started)
        if logs.count(f"[{batch_id}] succeeded") >= 2:
            break
        time.sleep(0.05)
    assert logs.count(f"[{batch_id}] succeeded") == 2
    stored = client._celery.AsyncResult(batch_id).get(timeout=5)
    assert stored[0]["stdout"] == first[0].stdout  # the second delivery kept the first result


def test_a_batch_larger_than_the_team_quota_goes_out_in_parts_and_comes_back_whole(workers):
    # A training step checks more completions than a team may run at once (64 by default): the client
    # splits the batch so each part fits the quota the hosts enforce, and returns every result in order.
    queue, redis_url, started = workers
    client = SandboxClient(
        mode="remote", broker_url=redis_url, result_backend_url=redis_url, queue=queue, timeout_s=120,
        team=f"team-{uuid.uuid4().hex[:6]}", max_batch=64,
    )  # fmt: skip
    requests = [RunRequest(language="python", code=f"print({n} * 2)") for n in range(150)]
    results = client.run_many(requests)
    assert [r.status for r in results] == [Status.OK] * 150
    assert [r.stdout.strip() for r in results] == [str(n * 2) for n in range(150)]
