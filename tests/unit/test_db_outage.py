"""workers.db_outage: a database call is retried through an outage, with what is stored read again first,
and the error is raised once the outage outlasts settings.DB_OUTAGE_S."""

import pytest
from django.db import OperationalError

from workers import db_outage


@pytest.fixture(autouse=True)
def no_waiting(monkeypatch):
    monkeypatch.setattr(db_outage, "FIRST_WAIT_S", 0.01)
    monkeypatch.setattr(db_outage, "MAX_WAIT_S", 0.01)


def test_a_call_that_fails_while_the_database_is_down_is_retried_after_reading_again(settings):
    settings.DB_OUTAGE_S = 5
    calls, reloads = [], []

    def call():
        calls.append(1)
        if len(calls) < 3:
            raise OperationalError("connection refused")
        return "written"

    assert db_outage.through_outage(call, what="a write", before_retry=lambda: reloads.append(1)) == "written"
    assert len(calls) == 3 and len(reloads) == 2


def test_an_outage_longer_than_the_limit_raises_the_error(settings):
    settings.DB_OUTAGE_S = 0

    def call():
        raise OperationalError("connection refused")

    with pytest.raises(OperationalError, match="refused"):
        db_outage.through_outage(call, what="a write")


def test_other_errors_are_not_retried(settings):
    settings.DB_OUTAGE_S = 5
    calls = []

    def call():
        calls.append(1)
        raise ValueError("a bug, not an outage")

    with pytest.raises(ValueError):
        db_outage.through_outage(call, what="a write")
    assert len(calls) == 1
