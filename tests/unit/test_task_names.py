"""The platform sends tasks by name (anneal.tasks) without importing `workers`: the names must still be the
workers' tasks, routed to the queues their workers consume, and sent only once the transaction commits."""

import base64
import json

import pytest
import redis
from django.conf import settings
from django.db import transaction

from anneal import tasks

EXPECTED_QUEUES = {
    "datasets.ingest": "default",
    "datasets.preview": "default",
    "training.run_job": "gpu",
    "deployments.prepare": "default",
    "deployments.run_batch": "default",
    "serve.replica": "serve",
}


def test_every_name_the_platform_sends_is_a_worker_task_on_its_queue():
    import workers.tasks  # noqa: F401  (registers the tasks on the shared app)
    from workers.celery_app import app

    assert app is tasks.app
    assert set(tasks.SENT) == set(EXPECTED_QUEUES)
    for name in tasks.SENT:
        assert name in app.tasks, name
        route = app.amqp.router.route({}, name, args=(), kwargs={})
        assert route["queue"].name == EXPECTED_QUEUES[name], name


@pytest.mark.django_db(transaction=True)
def test_a_task_is_sent_when_the_transaction_commits_and_never_after_a_rollback():
    broker = redis.Redis.from_url(settings.CELERY_BROKER_URL)
    broker.delete("gpu")  # this test's Redis database: nothing else consumes it during the test

    class Rollback(Exception):
        pass

    with pytest.raises(Rollback), transaction.atomic():
        tasks.enqueue(tasks.JOB_RUN, 41)
        raise Rollback
    assert broker.llen("gpu") == 0
    with transaction.atomic():
        tasks.enqueue(tasks.JOB_RUN, 42)
        assert broker.llen("gpu") == 0  # not before the commit
    message = json.loads(broker.rpop("gpu"))
    assert message["headers"]["task"] == "training.run_job"
    args, kwargs, _ = json.loads(base64.b64decode(message["body"]))
    assert (args, kwargs) == ([42], {})
    assert broker.llen("gpu") == 0
