"""Background work, sent by task name: the platform's only way to start a Celery task.

The tasks themselves live in `workers` (workers/tasks.py), which imports the platform's services; the
platform never imports `workers`, so it names the task here and Celery routes it by CELERY_TASK_ROUTES
(datasets.*, deployments.*, housekeeping.* -> default, training.* -> gpu, serve.* -> serve). Every send
waits for the current transaction to commit, so a worker never looks for a row that is not saved yet (or
that a rollback removed).
"""

from __future__ import annotations

from celery import Celery
from django.db import transaction

from anneal import broker  # noqa: F401  (installs the Redis transport every connection of the app uses)

DATASET_INGEST = "datasets.ingest"
DATASET_PREVIEW = "datasets.preview"
JOB_RUN = "training.run_job"
DEPLOYMENT_PREPARE = "deployments.prepare"
BATCH_RUN = "deployments.run_batch"
REPLICA_SERVE = "serve.replica"
# The names the platform sends (the workers register each one: tests/unit/test_task_names.py).
SENT = (DATASET_INGEST, DATASET_PREVIEW, JOB_RUN, DEPLOYMENT_PREPARE, BATCH_RUN, REPLICA_SERVE)

# The one Celery app of the project: configured from Django's CELERY_* settings when first used. The worker
# processes take this same app (workers/celery_app.py) and register the tasks on it.
app = Celery("anneal")
app.config_from_object("django.conf:settings", namespace="CELERY")


def enqueue(task_name: str, *args: object) -> None:
    """Send `task_name` with `args` (ids and other JSON values) once the current transaction commits; at
    once outside a transaction."""
    transaction.on_commit(lambda: app.send_task(task_name, args=list(args)))
