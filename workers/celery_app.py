"""The Celery app for every queue (default, gpu, sandbox). Start: celery -A workers.celery_app worker -Q …"""

import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
for entry in (str(ROOT), str(ROOT / "platform")):
    if entry not in sys.path:
        sys.path.insert(0, entry)
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "anneal.settings")

import django  # noqa: E402

django.setup()

# The platform's app (it sends tasks by name through it); the workers register the tasks on it.
from anneal.tasks import app  # noqa: E402

app.conf.include = ["workers.tasks"]
