"""Riding out a database outage (a restart, a failover) in the processes that run a job.

The training process and the worker watching it hold no state in the database between writes, so when the
server goes away they wait for it instead of failing the attempt: each database call is retried, on a fresh
connection, with backoff, for up to settings.DB_OUTAGE_S. A call that raised never committed half: every
write goes in one transaction. Only a commit whose acknowledgement was lost can have landed; a caller for
which that matters passes ``before_retry`` to re-read what is already stored.
"""

import logging
import time
from collections.abc import Callable
from typing import TypeVar

from django.conf import settings
from django.db import InterfaceError, OperationalError, connections

log = logging.getLogger(__name__)
T = TypeVar("T")
FIRST_WAIT_S = 0.5
MAX_WAIT_S = 5.0


def through_outage(call: Callable[[], T], *, what: str, before_retry: Callable[[], None] | None = None) -> T:
    """``call()``; while the database cannot be reached, again every 0.5 s … 5 s until settings.DB_OUTAGE_S
    have passed, then the last error is raised. ``what`` names the call in the log."""
    deadline = time.monotonic() + settings.DB_OUTAGE_S
    wait, failed = FIRST_WAIT_S, False
    while True:
        try:
            if failed and before_retry is not None:
                before_retry()
            return call()
        except (OperationalError, InterfaceError) as exc:
            if time.monotonic() + wait > deadline:
                raise
            log.warning("database unreachable while %s (%s); retrying in %.1f s", what, exc, wait)
            connections.close_all()  # the broken connection goes; the next query opens a new one
            time.sleep(wait)
            wait, failed = min(wait * 2, MAX_WAIT_S), True
