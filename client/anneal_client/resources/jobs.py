"""Jobs: estimate, launch (from a dict or a job file), get, list, wait, pause, resume, cancel, retry, the
frozen spec as a file, and the events as an iterator that follows the job across reconnects."""

from __future__ import annotations

import builtins
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import Any

from anneal_client import _plan
from anneal_client._errors import SpecFileError
from anneal_client._plan import Plan, Request, Sleep
from anneal_client.resources._base import AsyncResource, SyncResource, clean, poll
from anneal_client.resources.datasets import _find as dataset_find
from anneal_client.specs import job_file, job_spec
from anneal_client.types import JOB_STOP_STATES, Estimate, Job, JobEvent, Verifier

EventPage = tuple[list[JobEvent], int | None]


def _latest_version_of(name: str, *, field: str) -> Plan[int]:
    dataset = yield from dataset_find(name)
    version = dataset.latest_version if dataset is not None else None
    if version is None:
        raise SpecFileError(f"{field}: the team has no dataset named '{name}' with a version")
    return version.id


def _resolve(body: dict[str, Any]) -> Plan[dict[str, Any]]:
    """The launch body with datasets and verifiers given by name replaced by their version ids."""
    body = dict(body)
    if "dataset" in body:
        body["dataset_version"] = yield from _latest_version_of(body.pop("dataset"), field="dataset")
    if "datasets" in body:
        ids = []
        for index, name in enumerate(body.pop("datasets") or []):
            ids.append((yield from _latest_version_of(name, field=f"datasets[{index}]")))
        body["dataset_versions"] = ids
    if "eval_dataset" in body:
        body["eval_dataset_version"] = yield from _latest_version_of(
            body.pop("eval_dataset"), field="eval_dataset"
        )
    choices = body.get("verifiers") or []
    if any(isinstance(c, dict) and "verifier" in c and "verifier_version" not in c for c in choices):
        verifiers = {v["name"]: Verifier.from_api(v) for v in (yield from _plan.list_all("/verifiers"))}
        resolved = []
        for index, choice in enumerate(choices):
            if isinstance(choice, dict) and "verifier" in choice and "verifier_version" not in choice:
                found = verifiers.get(choice["verifier"])
                latest = found.latest_version if found else None
                if latest is None:
                    raise SpecFileError(
                        f"verifiers[{index}].verifier: the team has no verifier named '{choice['verifier']}'"
                    )
                choice = {
                    **{k: v for k, v in choice.items() if k != "verifier"},
                    "verifier_version": latest.id,
                }
            resolved.append(choice)
        body["verifiers"] = resolved
    return body


def _launch(body: dict[str, Any]) -> Plan[Job]:
    resolved = yield from _resolve(body)
    return Job.from_api((yield from _plan.post("/jobs", resolved)))


def _estimate(body: dict[str, Any]) -> Plan[Estimate]:
    resolved = yield from _resolve(body)
    return Estimate.from_api((yield from _plan.post("/jobs/estimate", resolved)))


def _get(job_id: int) -> Plan[Job]:
    return Job.from_api((yield from _plan.get(f"/jobs/{job_id}")))


def _list() -> Plan[list[Job]]:
    return [Job.from_api(j) for j in (yield from _plan.list_all("/jobs"))]


def _action(job_id: int, action: str, body: dict[str, Any] | None = None) -> Plan[Job]:
    return Job.from_api((yield from _plan.post(f"/jobs/{job_id}/{action}", body)))


def _wait(
    job_id: int, timeout: float | None, interval: float, on_update: Callable[[Job], None] | None
) -> Plan[Job]:
    return (
        yield from poll(
            lambda: _get(job_id),
            lambda j: j.state in JOB_STOP_STATES,
            what=f"job {job_id}",
            timeout=timeout,
            interval=interval,
            on_update=on_update,
        )
    )


def _param_names() -> Plan[set[str] | None]:
    """The params a launch takes (settings and run limits), as the API's OpenAPI schema lists them."""
    schema = yield Request("GET", "/api/schema/", params={"format": "json"}, root=True)
    try:
        params = schema["components"]["schemas"]["JobLaunchInput"]["properties"]["params"]
        return set(params["properties"])
    except (KeyError, TypeError):
        return None


def _spec(job_id: int) -> Plan[dict[str, Any]]:
    job = yield from _get(job_id)
    return job_spec(job, (yield from _param_names()))


def _events_page(
    job_id: int,
    *,
    follow: bool,
    page_size: int,
    poll_interval: float,
) -> Callable[[int], Plan[EventPage]]:
    """Events after a seq. Following, an empty page while the job runs waits and asks again; the stream
    ends once the job has ended (or paused) and every event up to then was delivered."""

    def page(after: int) -> Plan[EventPage]:
        while True:
            body = yield from _plan.get(f"/jobs/{job_id}/events", after=after, limit=page_size)
            events = [JobEvent.from_api(e) for e in body["results"]]
            if events:
                last = events[-1].seq
                more = len(events) == page_size or (follow and body["state"] not in JOB_STOP_STATES)
                return events, (last if more else None)
            if not follow or body["state"] in JOB_STOP_STATES:
                return [], None
            yield Sleep(poll_interval)

    return page


def _rollouts_page(job_id: int, params: dict[str, Any]) -> Callable[[int], Plan[EventPage]]:
    def page(after: int) -> Plan[EventPage]:
        body = yield from _plan.get(f"/jobs/{job_id}/rollouts", **params, after=after)
        return [JobEvent.from_api(e) for e in body["results"]], body.get("next_after")

    return page


def _launch_body(spec: dict[str, Any] | str | Path | None, fields: dict[str, Any]) -> dict[str, Any]:
    body = job_file(spec) if isinstance(spec, str | Path) else dict(spec or {})
    return {**body, **clean(fields)}


class Jobs(SyncResource):
    def launch(self, spec: dict[str, Any] | str | Path | None = None, **fields: Any) -> Job:
        """Launch from a body or a job file (``spec``) and/or keyword fields (name, dataset_version,
        dataset_versions, eval_dataset_version, domain_weights, verifiers, params; or dataset, datasets,
        eval_dataset and ``{"verifier": name}`` entries by name)."""
        return self._run(_launch(_launch_body(spec, fields)))

    def estimate(self, spec: dict[str, Any] | str | Path | None = None, **fields: Any) -> Estimate:
        """What launching would cost, checked as a launch is; nothing is kept."""
        return self._run(_estimate(_launch_body(spec, fields)))

    def get(self, job_id: int) -> Job:
        return self._run(_get(job_id))

    def list(self) -> builtins.list[Job]:
        return self._run(_list())

    def wait(
        self,
        job_id: int,
        *,
        timeout: float | None = None,
        poll_interval: float = 2.0,
        on_update: Callable[[Job], None] | None = None,
    ) -> Job:
        """Return the job once it has ended (succeeded, failed, cancelled, stopped) or paused."""
        return self._run(_wait(job_id, timeout, poll_interval, on_update))

    def pause(self, job_id: int) -> Job:
        return self._run(_action(job_id, "pause"))

    def resume(
        self, job_id: int, *, budget: float | None = None, time_limit_minutes: float | None = None
    ) -> Job:
        return self._run(
            _action(job_id, "resume", clean({"budget": budget, "time_limit_minutes": time_limit_minutes}))
        )

    def cancel(self, job_id: int) -> Job:
        return self._run(_action(job_id, "cancel"))

    def retry(self, job_id: int) -> Job:
        return self._run(_action(job_id, "retry"))

    def spec(self, job_id: int) -> dict[str, Any]:
        """The job's frozen spec as a launch body: save it as YAML and ``launch`` runs it again."""
        return self._run(_spec(job_id))

    def settings(self) -> dict[str, Any]:
        """Every setting a job's params take (name, type, default, help) and the models on this host."""
        return self._run(_plan.get("/jobs/spec"))

    def queue(self) -> dict[str, Any]:
        return self._run(_plan.get("/jobs/queue"))

    def events(
        self,
        job_id: int,
        *,
        after: int = 0,
        follow: bool = False,
        page_size: int = 500,
        poll_interval: float = 1.0,
        reconnect_for: float = 300.0,
    ) -> Iterator[JobEvent]:
        """Every event with seq > ``after``, in order. With ``follow``, wait for new ones until the job
        ends or pauses; a lost connection or a restarting server is waited out (up to ``reconnect_for``
        seconds) and the stream goes on from the last seq it delivered."""
        page = _events_page(job_id, follow=follow, page_size=page_size, poll_interval=poll_interval)
        return self._iterate(page, after, reconnect_for=reconnect_for if follow else 0.0)

    def rollouts(
        self,
        job_id: int,
        *,
        tampering: bool | None = None,
        step: int | None = None,
        after: int = 0,
        page_size: int = 200,
    ) -> Iterator[JobEvent]:
        params = clean(
            {"tampering": None if tampering is None else int(tampering), "step": step, "limit": page_size}
        )
        return self._iterate(_rollouts_page(job_id, params), after)

    def flag_rollout(
        self, job_id: int, seq: int, *, verifier: int, expected_pass: bool, note: str = ""
    ) -> dict[str, Any]:
        """Make a rollout a test case of one of the job's verifiers."""
        body = {"verifier": verifier, "expected_pass": expected_pass, "note": note}
        return self._run(_plan.post(f"/jobs/{job_id}/rollouts/{seq}/flag", body))


class AsyncJobs(AsyncResource):
    async def launch(self, spec: dict[str, Any] | str | Path | None = None, **fields: Any) -> Job:
        return await self._run(_launch(_launch_body(spec, fields)))

    async def estimate(self, spec: dict[str, Any] | str | Path | None = None, **fields: Any) -> Estimate:
        return await self._run(_estimate(_launch_body(spec, fields)))

    async def get(self, job_id: int) -> Job:
        return await self._run(_get(job_id))

    async def list(self) -> builtins.list[Job]:
        return await self._run(_list())

    async def wait(
        self,
        job_id: int,
        *,
        timeout: float | None = None,
        poll_interval: float = 2.0,
        on_update: Callable[[Job], None] | None = None,
    ) -> Job:
        return await self._run(_wait(job_id, timeout, poll_interval, on_update))

    async def pause(self, job_id: int) -> Job:
        return await self._run(_action(job_id, "pause"))

    async def resume(
        self, job_id: int, *, budget: float | None = None, time_limit_minutes: float | None = None
    ) -> Job:
        body = clean({"budget": budget, "time_limit_minutes": time_limit_minutes})
        return await self._run(_action(job_id, "resume", body))

    async def cancel(self, job_id: int) -> Job:
        return await self._run(_action(job_id, "cancel"))

    async def retry(self, job_id: int) -> Job:
        return await self._run(_action(job_id, "retry"))

    async def spec(self, job_id: int) -> dict[str, Any]:
        return await self._run(_spec(job_id))

    async def settings(self) -> dict[str, Any]:
        return await self._run(_plan.get("/jobs/spec"))

    async def queue(self) -> dict[str, Any]:
        return await self._run(_plan.get("/jobs/queue"))

    def events(
        self,
        job_id: int,
        *,
        after: int = 0,
        follow: bool = False,
        page_size: int = 500,
        poll_interval: float = 1.0,
        reconnect_for: float = 300.0,
    ) -> AsyncIterator[JobEvent]:
        page = _events_page(job_id, follow=follow, page_size=page_size, poll_interval=poll_interval)
        return self._iterate(page, after, reconnect_for=reconnect_for if follow else 0.0)

    def rollouts(
        self,
        job_id: int,
        *,
        tampering: bool | None = None,
        step: int | None = None,
        after: int = 0,
        page_size: int = 200,
    ) -> AsyncIterator[JobEvent]:
        params = clean(
            {"tampering": None if tampering is None else int(tampering), "step": step, "limit": page_size}
        )
        return self._iterate(_rollouts_page(job_id, params), after)

    async def flag_rollout(
        self, job_id: int, seq: int, *, verifier: int, expected_pass: bool, note: str = ""
    ) -> dict[str, Any]:
        body = {"verifier": verifier, "expected_pass": expected_pass, "note": note}
        return await self._run(_plan.post(f"/jobs/{job_id}/rollouts/{seq}/flag", body))
