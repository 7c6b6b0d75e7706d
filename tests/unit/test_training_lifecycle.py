"""The job lifecycle without training: limits in the spec, dispatch and the queue, pause and resume, budget and
time limit, attempts (fencing, restarts, the heartbeat reaper) and the event sink across attempts."""

from datetime import timedelta

import pytest
from django.utils import timezone

from anneal.errors import InputError
from anneal.training.costs import job_estimate, job_spend
from anneal.training.dispatch import jobs_dispatch
from anneal.training.housekeeping import jobs_reap_stale
from anneal.training.models import Job, JobState, TeamLimits
from anneal.training.selectors import queue_state
from anneal.training.services import job_claim
from anneal.training.state import attempt_end, job_limits_enforce, job_pause, job_resume
from gpu_jobs.control import JobAbandoned
from workers.sink import DjangoEventSink

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def run_limits(settings):
    settings.JOB_GPU_SLOTS = 1
    settings.JOB_TEAM_MAX_RUNNING = 2
    settings.JOB_TEAM_MAX_DEVICES = 8
    settings.JOB_MAX_RESTARTS = 1


@pytest.mark.parametrize(
    "params, field",
    [
        ({"budget": -0.5}, "params.budget"),
        ({"time_limit_minutes": -1}, "params.time_limit_minutes"),
        ({"devices": 0}, "params.devices"),
        ({"devices": 9}, "params.devices"),  # over the team's 8
        ({"device_type": "quantum"}, "params.device_type"),
        ({"priority": 101}, "params.priority"),
        ({"priority": 1.5}, "params.priority"),
        ({"pause_on_alarms": "no_signal, bogus"}, "params.pause_on_alarms"),
    ],
)
def test_bad_limits_are_refused_with_the_field_named(launch, params, field):
    with pytest.raises(InputError) as caught:
        launch(**params)
    assert [e["field"] for e in caught.value.errors] == [field]
    assert not Job.objects.exists()


def test_limits_are_frozen_in_the_spec_and_copied_to_the_job(launch):
    job = launch(budget=2.5, priority=7, devices=2, device_type="H100", pause_on_alarms="no_signal")
    assert job.spec["budget"] == 2.5 and job.spec["pause_on_alarms"] == "no_signal"
    assert (job.priority, job.devices, job.device_type) == (7, 2, "h100")
    assert job.queued_at is not None and job.dispatched_at is None


def test_dispatch_fills_free_slots_by_priority_then_order_within_team_limits(world, launch, settings):
    low = launch()
    high = launch(priority=5)
    later = launch(priority=5)
    other = launch(team=world["rivals"])
    assert jobs_dispatch() == [high.pk]  # one slot
    assert jobs_dispatch() == []  # the slot is taken by the dispatched job
    queue = queue_state()
    assert [(w["job"].pk, w["position"]) for w in queue["waiting"]] == [
        (later.pk, 1),
        (low.pk, 2),
        (other.pk, 3),
    ]
    starts = [w["estimated_start"] for w in queue["waiting"]]
    assert starts == sorted(starts) and starts[0] > timezone.now()

    # Two more slots, but team Core may run one job at a time: its next job is held, Other's goes.
    settings.JOB_GPU_SLOTS = 3
    TeamLimits.objects.create(team=world["core"], max_running_jobs=1)
    assert jobs_dispatch() == [other.pk]
    held = {w["job"].pk: w["held_by"] for w in queue_state()["waiting"]}
    assert "already runs 1 job" in held[later.pk]
    # Positions are global; a team sees only its own jobs.
    mine = queue_state(teams=[world["rivals"]])
    assert mine["waiting"] == [] and mine["waiting_total"] == 2


def test_claim_numbers_attempts_and_old_attempts_cannot_end_the_job(launch):
    job = launch()
    assert job_claim(job_id=job.pk, worker="w1") == 1
    assert job_claim(job_id=job.pk, worker="w2") is None  # already running
    assert (
        attempt_end(job_id=job.pk, attempt=1, state=JobState.QUEUED, reason="killed by SIGKILL") == "queued"
    )
    job.refresh_from_db()
    assert (job.state, job.restarts, job.dispatched_at) == ("queued", 1, None)
    assert job_claim(job_id=job.pk, worker="w2", resume_step=4) == 2
    # The first attempt, presumed dead, comes back: it can no longer end the job.
    assert attempt_end(job_id=job.pk, attempt=1, state=JobState.FAILED, error="late") == "superseded"
    job.refresh_from_db()
    assert job.state == "running" and job.error == ""
    running = job.events.filter(kind="state", payload__state="running").order_by("seq").last()
    assert running.payload == {"state": "running", "worker": "w2", "attempt": 2, "resumed_from_step": 4}
    # A second crash is past JOB_MAX_RESTARTS=1: the job fails and says why.
    assert (
        attempt_end(job_id=job.pk, attempt=2, state=JobState.QUEUED, reason="killed by SIGKILL") == "failed"
    )
    job.refresh_from_db()
    assert job.state == "failed" and "gave up after 1 restart" in job.error


def test_reaper_requeues_a_job_whose_worker_vanished_and_ends_the_others(launch):
    running, cancelling = launch(), launch()
    for job in (running, cancelling):
        job_claim(job_id=job.pk, worker="gone")
    Job.objects.filter(pk=cancelling.pk).update(state=JobState.CANCELLING)
    fresh = launch()
    job_claim(job_id=fresh.pk, worker="alive")
    Job.objects.exclude(pk=fresh.pk).update(heartbeat_at=timezone.now() - timedelta(minutes=10))
    assert jobs_reap_stale(timeout_s=120) == 2
    states = dict(Job.objects.values_list("pk", "state"))
    assert states == {running.pk: "queued", cancelling.pk: "cancelled", fresh.pk: "running"}
    event = running.events.order_by("seq").last().payload
    assert event["requeued"] and "no heartbeat for 120 s" in event["reason"]


def test_pause_resume_and_the_budget(world, launch):
    job = launch(budget=0.01)
    paused = job_pause(job=job, user=world["owner"])  # still waiting: pauses at once
    assert paused.state == "paused" and paused.reason == "paused by owner"
    with pytest.raises(InputError) as caught:
        job_pause(job=paused, user=world["owner"])
    assert caught.value.errors[0]["field"] == "state"
    resumed = job_resume(job=paused, user=world["owner"])
    assert resumed.state == "queued" and resumed.reason == ""

    job_claim(job_id=job.pk, worker="w")
    # Two device-hours of a cpu at 0.10 USD: over the 0.01 budget.
    Job.objects.filter(pk=job.pk).update(run_seconds=7200)
    assert job_limits_enforce(job_id=job.pk) == "pause"
    job.refresh_from_db()
    assert job.state == "pausing" and "budget cap reached" in job.reason
    assert attempt_end(job_id=job.pk, attempt=job.attempt, state=JobState.PAUSED) == "paused"
    job.refresh_from_db()
    assert job.reason.startswith("budget cap reached") and job_spend(job)["total"] >= 0.2
    with pytest.raises(InputError) as caught:
        job_resume(job=job, user=world["owner"])
    assert caught.value.errors[0]["field"] == "budget" and "raise the budget" in str(caught.value)
    with pytest.raises(InputError) as caught:
        job_resume(job=job, user=world["owner"], budget=-3)
    assert caught.value.errors[0]["field"] == "params.budget"
    job = job_resume(job=job, user=world["owner"], budget=1.0)
    assert job.state == "queued" and job.spec["budget"] == 1.0


def test_time_limit_asks_the_job_to_stop(launch):
    job = launch(time_limit_minutes=1)
    job_claim(job_id=job.pk, worker="w")
    assert job_limits_enforce(job_id=job.pk) is None
    Job.objects.filter(pk=job.pk).update(attempt_started_at=timezone.now() - timedelta(seconds=61))
    assert job_limits_enforce(job_id=job.pk) == "stop"
    job.refresh_from_db()
    assert job.state == "stopping" and "time limit reached" in job.reason
    assert attempt_end(job_id=job.pk, attempt=1, state=JobState.STOPPED) == "stopped"
    job.refresh_from_db()
    assert job.is_finished and job.finished_at and job.run_seconds >= 61


def test_estimate_prices_devices_and_sandboxes_and_learns_from_finished_jobs(world, launch, settings):
    job = launch(devices=2, device_type="h100", budget=0.001)
    estimate = job_estimate(spec=job.spec, team=world["core"])
    assert (
        estimate["basis"].startswith("no measured job yet: a default rate")
        and estimate["price_per_device_hour"] == 3.5
    )
    assert estimate["device_cost"] == pytest.approx(estimate["device_hours"] * 3.5, rel=1e-3)
    assert estimate["total"] > estimate["device_cost"] and estimate["over_budget"]
    Job.objects.filter(pk=job.pk).update(
        state=JobState.SUCCEEDED, step=20, run_seconds=100, sandbox_seconds=10
    )
    timed = job_estimate(spec=job.spec, team=world["core"])
    assert timed["basis"].startswith(
        f"timed from job #{job.pk} \u201c{job.name}\u201d on the same model (tiny"
    )
    assert "20 steps in 100 s, 5 s a step" in timed["basis"]
    assert timed["seconds"] == pytest.approx(100.0)  # 20 steps at the measured 5 s a step


def test_sink_drops_reports_of_rerun_steps_and_refuses_an_old_attempt(launch):
    job = launch(pause_on_alarms="length_drift")
    job_claim(job_id=job.pk, worker="w")
    first = DjangoEventSink(job_id=job.pk, attempt=1)
    first.emit("metric", {"step": 0, "profile/kept": 3.0})  # before the first step: kept
    for step in (1, 2, 3):
        first.emit_many([("rollout", {"step": step, "prompt": "p"})])
        first.emit("metric", {"step": step, "reward": 0.5, "verify_time/exact": 0.25})
    first.emit("checkpoint", {"step": 2, "location": "/x"})
    attempt_end(job_id=job.pk, attempt=1, state=JobState.QUEUED, reason="killed by SIGKILL")
    job_claim(job_id=job.pk, worker="w", resume_step=2)
    with pytest.raises(JobAbandoned):
        first.emit("metric", {"step": 4})

    second = DjangoEventSink(job_id=job.pk, attempt=2)
    second.emit("metric", {"step": 0, "profile/kept": 3.0})  # the resumed run profiles again: dropped
    second.emit_many([("rollout", {"step": 3, "prompt": "again"})])  # re-run step: dropped
    second.emit("metric", {"step": 3, "reward": 0.9, "verify_time/exact": 0.25})  # dropped
    second.emit("checkpoint", {"step": 2, "location": "/x"})  # dropped
    second.emit_many([("rollout", {"step": 4, "prompt": "p"})])
    second.emit("metric", {"step": 4, "reward": 0.7, "verify_time/exact": 0.25})
    second.emit("alarm", {"name": "length_drift", "step": 4, "message": "longer"})

    job.refresh_from_db()
    events = list(job.events.order_by("seq").values_list("seq", "kind", "payload"))
    assert [seq for seq, _, _ in events] == list(range(1, job.last_seq + 1))
    assert [p["step"] for _, kind, p in events if kind == "metric"] == [0, 1, 2, 3, 4]
    assert [p["step"] for _, kind, p in events if kind == "rollout"] == [1, 2, 3, 4]
    assert [p["step"] for _, kind, p in events if kind == "checkpoint"] == [2]
    assert job.step == 4 and job.sandbox_seconds == pytest.approx(1.0)
    # The alarm was set to pause the job: it is asked to, with the alarm as the reason.
    assert job.state == "pausing" and job.reason.startswith("alarm length_drift at step 4")
