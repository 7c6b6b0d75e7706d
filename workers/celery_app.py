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
from celery import Celery  # noqa: E402

django.setup()

app = Celery("anneal")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.conf.include = ["workers.tasks"]
