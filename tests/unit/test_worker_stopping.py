"""The serve worker hands its replicas over when it is asked to stop: SIGTERM sets Celery's flag to 0."""

from celery.worker import state as worker_state

from workers.deploy import worker_stopping


def test_a_warm_shutdown_with_exit_status_zero_counts_as_stopping(monkeypatch):
    monkeypatch.setattr(worker_state, "should_stop", None)
    monkeypatch.setattr(worker_state, "should_terminate", None)
    assert not worker_stopping()
    monkeypatch.setattr(worker_state, "should_stop", 0)  # what a plain SIGTERM sets (EX_OK)
    assert worker_stopping()
    monkeypatch.setattr(worker_state, "should_stop", None)
    monkeypatch.setattr(worker_state, "should_terminate", 1)
    assert worker_stopping()
