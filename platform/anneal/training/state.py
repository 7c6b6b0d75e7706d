"""A job's state changes after launch: pause and resume, the budget and time limit, the end of each attempt
(restarts after a crash included), and the writes the worker and the training process make while an attempt
runs (child process, heartbeat, step, events, checkpoints). Launch, cancel, retry and the claim that starts an
attempt are in anneal.training.services; which job starts when is anneal.training.dispatch.

Each run of a job's process is an *attempt*, numbered on the job row. The worker, the training process and
its event sink write only while the row still carries their attempt, so a run that was given up for dead (its
heartbeats stopped and the job was requeued) can never add to or end the job that replaced it.

Pause, the budget cap, the time limit and alarms set to pause all move a running job to ``pausing`` or
``stopping`` with a reason. The training process sees it between two steps (gpu_jobs.control), saves a full
trainer checkpoint and exits; the worker then ends the attempt as ``paused`` or ``stopped``. Resume queues a
paused job again and its next attempt goes on from that checkpoint.

Events across attempts: the sequence stays one gap-free series (anneal.training.events). A resumed attempt
starts with a state event ``{"state": "running", "attempt": n, "resumed_from_step": s}``. Steps after the
checkpoint that a killed attempt had already reported are run again but not reported again: the first
report of a step's metrics, rollouts and evaluation stands (workers.sink.DjangoEventSink drops the rest).
"""

from django.conf import settings
from django.contrib.auth.models import User
from django.db import transaction
from django.db.models import F
from django.utils import timezone

from anneal.accounts.services import audit
from anneal.errors import InputError
from anneal.training.costs import job_spend, usd
from anneal.training.dispatch import dispatch_on_commit
from anneal.training.events import job_event_record, job_events_record
from anneal.training.limits import LIMIT_FIELDS, RunLimits
from anneal.training.models import Checkpoint, Job, JobState

# --- pause, resume, limits ----------------------------------------------------------------------------------


def job_request(*, job_id: int, action: str, reason: str) -> bool:
    """Ask a running job to checkpoint and "pause" or "stop"; False when it was not running."""
    state = {"pause": JobState.PAUSING, "stop": JobState.STOPPING}[action]
    with transaction.atomic():
        if not Job.objects.filter(pk=job_id, state=JobState.RUNNING).update(state=state, reason=reason):
            return False
        job_event_record(job_id=job_id, kind="state", payload={"state": state, "reason": reason})
    return True


def job_pause(*, job: Job, user: User | None, reason: str = "") -> Job:
    """A running job checkpoints and pauses; a waiting one pauses at once. Resume with ``job_resume``."""
    who = user.get_username() if user is not None and user.is_authenticated else "an operator"
    reason = reason or f"paused by {who}"
    with transaction.atomic():
        if Job.objects.filter(pk=job.pk, state=JobState.QUEUED).update(
            state=JobState.PAUSED, reason=reason, dispatched_at=None
        ):
            job_event_record(
                job_id=job.pk, kind="state", payload={"state": JobState.PAUSED, "reason": reason}
            )
            dispatch_on_commit()  # it may have held a slot
        elif not job_request(job_id=job.pk, action="pause", reason=reason):
            job.refresh_from_db()
            raise InputError(
                f"job #{job.pk} is {job.state}; only a queued or running job can pause", field="state"
            )
        audit(team=job.team, user=user, action="job.pause", obj=job)
    job.refresh_from_db()
    return job


def job_resume(
    *, job: Job, user: User | None, budget: float | None = None, time_limit_minutes: float | None = None
) -> Job:
    """Queue a paused job again; it goes on from its latest checkpoint. ``budget``/``time_limit_minutes``
    raise the job's caps (a job paused by its budget needs a higher one)."""
    with transaction.atomic():
        job = Job.objects.select_for_update().get(pk=job.pk)
        if job.state != JobState.PAUSED:
            raise InputError(f"job #{job.pk} is {job.state}; only a paused job can resume", field="state")
        spec = dict(job.spec)
        changes = {
            k: v for k, v in (("budget", budget), ("time_limit_minutes", time_limit_minutes)) if v is not None
        }
        if changes:
            checked = RunLimits(**{k: spec[k] for k in LIMIT_FIELDS if k in spec} | changes)
            spec.update({k: getattr(checked, k) for k in changes})
        job.spec = spec
        spent = job_spend(job)["total"]
        cap = float(spec.get("budget") or 0)
        if cap and spent >= cap:
            raise InputError(
                f"job #{job.pk} has spent {usd(spent)} USD of its {usd(cap)} USD budget: raise the budget to resume",
                field="budget",
            )
        Job.objects.filter(pk=job.pk).update(
            spec=spec, state=JobState.QUEUED, reason="", queued_at=timezone.now(), dispatched_at=None
        )
        payload = {"state": JobState.QUEUED, "resumed": True, **changes}
        job_event_record(job_id=job.pk, kind="state", payload=payload)
        audit(team=job.team, user=user, action="job.resume", obj=job, **changes)
        dispatch_on_commit()
    job.refresh_from_db()
    return job


def job_limits_enforce(*, job_id: int) -> str | None:
    """Called by the worker while a job runs: past its budget it pauses, past its time limit it stops.
    Returns the action asked for, if any."""
    job = Job.objects.filter(pk=job_id, state=JobState.RUNNING).first()
    if job is None:
        return None
    spend = job_spend(job)
    budget = float(job.spec.get("budget") or 0)
    if budget and spend["total"] >= budget:
        reason = f"budget cap reached: spent {usd(spend['total'])} of {usd(budget)} USD; raise the budget to resume"
        return "pause" if job_request(job_id=job_id, action="pause", reason=reason) else None
    limit_min = float(job.spec.get("time_limit_minutes") or 0)
    if limit_min and spend["run_seconds"] >= limit_min * 60:
        reason = f"time limit reached: ran {spend['run_seconds']:.0f} s of the {limit_min:g} minutes allowed"
        return "stop" if job_request(job_id=job_id, action="stop", reason=reason) else None
    return None


# --- attempts -----------------------------------------------------------------------------------------------


def attempt_end(
    *, job_id: int, attempt: int, state: str, error: str = "", reason: str = "", until=None
) -> str:
    """End ``attempt`` of the job as ``state`` (succeeded, failed, cancelled, paused, stopped, or queued to
    restart after a crash). Does nothing when the job has moved on to another attempt. Returns the state the
    job ended in (a restart past settings.JOB_MAX_RESTARTS fails). ``until``: when the attempt stopped running
    (default now; the reaper passes the last heartbeat)."""
    with transaction.atomic():
        job = Job.objects.select_for_update().filter(pk=job_id, attempt=attempt).first()
        if job is None:
            return "superseded"
        now = timezone.now()
        ran = (
            max(0.0, ((until or now) - job.attempt_started_at).total_seconds())
            if job.attempt_started_at
            else 0
        )
        updates: dict = {"run_seconds": F("run_seconds") + ran, "child_pid": None, "attempt_started_at": None}
        payload: dict = {"state": state}
        if state == JobState.QUEUED:
            if job.restarts >= settings.JOB_MAX_RESTARTS:
                state = JobState.FAILED
                error = f"{reason}; gave up after {job.restarts} restart(s) (ANNEAL_JOB_MAX_RESTARTS)"
                payload = {"state": state}
            else:
                updates.update(restarts=F("restarts") + 1, dispatched_at=None, reason=reason)
                payload.update(requeued=True, reason=reason, restart=job.restarts + 1)
        if state in (JobState.PAUSED, JobState.STOPPED):
            updates["reason"] = reason or job.reason
            payload["reason"] = updates["reason"]
        if state in (JobState.SUCCEEDED, JobState.FAILED, JobState.CANCELLED, JobState.STOPPED):
            updates["finished_at"] = now
        if error:
            updates["error"] = error
            payload["error"] = error
        Job.objects.filter(pk=job_id).update(state=state, **updates)
        job_event_record(job_id=job_id, kind="state", payload=payload)
        dispatch_on_commit()
    return state


# --- while an attempt runs: the worker's and the training process's writes ---------------------------------
# Each is fenced by the attempt: a worker or process that was given up for dead writes nothing.


def job_child_started(*, job_id: int, attempt: int, pid: int) -> bool:
    """Record the pid of ``attempt``'s training process; False when the job has moved to another attempt."""
    return bool(Job.objects.filter(pk=job_id, attempt=attempt).update(child_pid=pid))


def job_heartbeat(*, job_id: int, attempt: int) -> bool:
    """The worker running ``attempt`` is alive (beat's reaper requeues a job whose heartbeats stop, see
    anneal.training.housekeeping); False when the job has moved to another attempt."""
    return bool(Job.objects.filter(pk=job_id, attempt=attempt).update(heartbeat_at=timezone.now()))


def attempt_events_record(
    *, job_id: int, attempt: int, events: list[tuple[str, dict]], pause_on: set[str]
) -> bool:
    """Record events the training process of ``attempt`` reported, in one transaction: the job's step (the
    latest metric step) and sandbox time (``verify_time/*`` metrics, billed), the events, and a pause for each
    alarm named in ``pause_on`` ("all": any). False, with nothing written, when the job has moved past
    ``attempt`` (the row lock keeps a requeue from slipping in between the check and the writes)."""
    with transaction.atomic():
        if not Job.objects.select_for_update().filter(pk=job_id, attempt=attempt).exists():
            return False
        updates: dict = {}
        steps = [p["step"] for kind, p in events if kind == "metric" and isinstance(p.get("step"), int)]
        if steps:
            updates["step"] = max(steps)
        verify = sum(
            float(value)
            for kind, p in events
            if kind == "metric"
            for key, value in p.items()
            if key.startswith("verify_time/") and isinstance(value, int | float)
        )
        if verify:
            updates["sandbox_seconds"] = F("sandbox_seconds") + verify
        if updates:
            Job.objects.filter(pk=job_id).update(**updates)
        job_events_record(job_id=job_id, events=_with_checkpoint_ids(job_id=job_id, events=events))
        for kind, p in events:
            if kind == "alarm" and (p.get("name") in pause_on or "all" in pause_on):
                job_request(
                    job_id=job_id,
                    action="pause",
                    reason=f"alarm {p.get('name')} at step {p.get('step')}: {p.get('message', '')}",
                )
    return True


def _with_checkpoint_ids(*, job_id: int, events: list[tuple[str, dict]]) -> list[tuple[str, dict]]:
    """Checkpoint events with the id of the checkpoint row the store recorded before the engine reported it,
    so the job page can offer Deploy for a checkpoint that arrives live."""
    steps = [p["step"] for kind, p in events if kind == "checkpoint" and isinstance(p.get("step"), int)]
    if not steps:
        return events
    ids = dict(Checkpoint.objects.filter(job_id=job_id, step__in=steps).values_list("step", "pk"))
    return [
        (kind, {**p, "checkpoint": ids[p["step"]]})
        if kind == "checkpoint" and p.get("step") in ids
        else (kind, p)
        for kind, p in events
    ]


def checkpoint_record(*, job: Job, step: int, location: str, code_version: str) -> Checkpoint:
    """Record (or replace) ``job``'s model checkpoint at ``step``, stored at ``location``, with its lineage:
    base model, data, verifier versions, the frozen spec and the code version that trained it."""
    lineage = {
        "base_model": job.spec.get("model", "tiny"),
        "dataset_version": job.dataset_version_id,
        "verifier_versions": [v["verifier_version"] for v in job.spec.get("verifiers", [])],
        "spec": job.spec,
        "code_version": code_version,
    }
    checkpoint, _ = Checkpoint.objects.update_or_create(
        job=job, step=step, defaults={"location": location, "lineage": lineage}
    )
    return checkpoint
