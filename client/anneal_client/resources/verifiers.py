"""Verifiers: create from a dict or a file, apply files (a new version only when the spec changed),
versions, validate, preview, test cases, export."""

from __future__ import annotations

import builtins
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from anneal_client import _plan
from anneal_client._errors import AnnealError
from anneal_client._plan import Plan, Request
from anneal_client.resources._base import AsyncResource, SyncResource
from anneal_client.specs import verifier_files
from anneal_client.types import ImportedVerifier, PreviewResult, Verifier, VerifierTestCase, VerifierVersion


@dataclass
class Applied:
    """What ``apply`` did: ``created`` a verifier, added a ``new_version``, or found it ``unchanged``."""

    action: str
    verifier: Verifier
    version: VerifierVersion

    def to_dict(self) -> dict[str, Any]:
        return {
            "action": self.action,
            "name": self.verifier.name,
            "id": self.verifier.id,
            "verifier_version": self.version.id,
            "number": self.version.number,
            "flagged": self.version.flagged,
        }


def _list() -> Plan[list[Verifier]]:
    return [Verifier.from_api(v) for v in (yield from _plan.list_all("/verifiers"))]


def _get(verifier_id: int) -> Plan[Verifier]:
    return Verifier.from_api((yield from _plan.get(f"/verifiers/{verifier_id}")))


def _create(name: str, spec: dict[str, Any]) -> Plan[Verifier]:
    return Verifier.from_api((yield from _plan.post("/verifiers", {"name": name, "spec": spec})))


def _version_create(verifier_id: int, spec: dict[str, Any]) -> Plan[VerifierVersion]:
    return VerifierVersion.from_api(
        (yield from _plan.post(f"/verifiers/{verifier_id}/versions", {"spec": spec}))
    )


def _versions(verifier_id: int) -> Plan[list[VerifierVersion]]:
    return [VerifierVersion.from_api(v) for v in (yield from _plan.get(f"/verifiers/{verifier_id}/versions"))]


def _apply(name: str, spec: dict[str, Any]) -> Plan[Applied]:
    existing = next((v for v in (yield from _list()) if v.name == name), None)
    if existing is None:
        created = yield from _create(name, spec)
        assert created.latest_version is not None
        return Applied("created", created, created.latest_version)
    latest = existing.latest_version
    # The server fills in defaults: compare its normal form of the file's spec with what it stored.
    checked = yield from _plan.post("/verifiers/validate", {"spec": spec})
    if latest is not None and checked.get("ok") and checked.get("spec") == latest.spec:
        return Applied("unchanged", existing, latest)
    version = yield from _version_create(existing.id, spec)
    return Applied("new_version", (yield from _get(existing.id)), version)


def _apply_file(path: str | Path) -> Plan[list[Applied]]:
    results = []
    for item in verifier_files(path):
        results.append((yield from _apply(item["name"], item["spec"])))
    return results


def _export(verifier_id: int, number: int | None) -> Plan[dict[str, Any]]:
    verifier = yield from _get(verifier_id)
    if number is None:
        version = verifier.latest_version
    else:
        version = next((v for v in verifier.versions if v.number == number), None)
    if version is None:
        raise AnnealError(f"verifier {verifier_id} has no version {number}")
    return {"name": verifier.name, "spec": version.spec}


def _preview(spec: dict[str, Any], samples: builtins.list[dict[str, Any]]) -> Plan[list[PreviewResult]]:
    body = yield from _plan.post("/verifiers/preview", {"spec": spec, "samples": samples})
    return [PreviewResult.from_api(r) for r in body["results"]]


def _test_cases(verifier_id: int) -> Plan[list[VerifierTestCase]]:
    return [
        VerifierTestCase.from_api(c) for c in (yield from _plan.get(f"/verifiers/{verifier_id}/test-cases"))
    ]


def _clone(verifier_id: int, name: str) -> Plan[Verifier]:
    return Verifier.from_api((yield from _plan.post(f"/verifiers/{verifier_id}/clone", {"name": name})))


def _import_openai(body: dict[str, Any]) -> Plan[ImportedVerifier]:
    return ImportedVerifier.from_api((yield from _plan.post("/verifiers/import", body)))


def _import_body(
    grader: dict[str, Any], name: str, judge_endpoint: str, judge_api_key_secret: str
) -> dict[str, Any]:
    return {
        "grader": grader,
        "name": name,
        "judge_endpoint": judge_endpoint,
        "judge_api_key_secret": judge_api_key_secret,
    }


def _delete(verifier_id: int) -> Plan[None]:
    yield Request("DELETE", f"/verifiers/{verifier_id}")


class Verifiers(SyncResource):
    def list(self) -> builtins.list[Verifier]:
        return self._run(_list())

    def get(self, verifier_id: int) -> Verifier:
        return self._run(_get(verifier_id))

    def create(self, *, name: str, spec: dict[str, Any]) -> Verifier:
        """A new verifier; ``spec`` (``{"type": ..., fields}``) becomes its version 1."""
        return self._run(_create(name, spec))

    def create_from_file(self, path: str | Path) -> builtins.list[Verifier]:
        """Create each verifier a YAML/JSON file describes (``{name, spec}``, or a list of them)."""
        return [self._run(_create(item["name"], item["spec"])) for item in verifier_files(path)]

    def apply(self, *, name: str, spec: dict[str, Any]) -> Applied:
        """Create the verifier, or add a version only when ``spec`` differs from its latest one."""
        return self._run(_apply(name, spec))

    def apply_file(self, path: str | Path) -> builtins.list[Applied]:
        return self._run(_apply_file(path))

    def delete(self, verifier_id: int) -> None:
        self._run(_delete(verifier_id))

    def clone(self, verifier_id: int, *, name: str) -> Verifier:
        return self._run(_clone(verifier_id, name))

    def versions(self, verifier_id: int) -> builtins.list[VerifierVersion]:
        """Newest first, each with a diff to the one before."""
        return self._run(_versions(verifier_id))

    def create_version(self, verifier_id: int, *, spec: dict[str, Any]) -> VerifierVersion:
        return self._run(_version_create(verifier_id, spec))

    def validate(self, spec: dict[str, Any]) -> dict[str, Any]:
        """``{ok, spec (normalised), errors}``; never raises for a bad spec."""
        return self._run(_plan.post("/verifiers/validate", {"spec": spec}))

    def preview(
        self, *, spec: dict[str, Any], samples: builtins.list[dict[str, Any]]
    ) -> builtins.list[PreviewResult]:
        """Score ``[{"row": {...}, "completion": "..."}]`` with a spec, saving nothing."""
        return self._run(_preview(spec, samples))

    def test_cases(self, verifier_id: int) -> builtins.list[VerifierTestCase]:
        return self._run(_test_cases(verifier_id))

    def types(self) -> builtins.list[dict[str, Any]]:
        return self._run(_plan.get("/verifiers/types"))

    def import_openai(
        self,
        grader: dict[str, Any],
        *,
        name: str = "",
        judge_endpoint: str = "",
        judge_api_key_secret: str = "",
    ) -> ImportedVerifier:
        """A verifier from an OpenAI reinforcement fine-tuning grader (string_check, text_similarity,
        score_model, python, multi); what cannot be carried over is refused naming ``grader.<path>``."""
        return self._run(_import_openai(_import_body(grader, name, judge_endpoint, judge_api_key_secret)))

    def export(self, verifier_id: int, *, version: int | None = None) -> dict[str, Any]:
        """``{name, spec}`` of the latest version (or version number ``version``): what ``apply`` takes."""
        return self._run(_export(verifier_id, version))


class AsyncVerifiers(AsyncResource):
    async def list(self) -> builtins.list[Verifier]:
        return await self._run(_list())

    async def get(self, verifier_id: int) -> Verifier:
        return await self._run(_get(verifier_id))

    async def create(self, *, name: str, spec: dict[str, Any]) -> Verifier:
        return await self._run(_create(name, spec))

    async def create_from_file(self, path: str | Path) -> builtins.list[Verifier]:
        return [await self._run(_create(item["name"], item["spec"])) for item in verifier_files(path)]

    async def apply(self, *, name: str, spec: dict[str, Any]) -> Applied:
        return await self._run(_apply(name, spec))

    async def apply_file(self, path: str | Path) -> builtins.list[Applied]:
        return await self._run(_apply_file(path))

    async def delete(self, verifier_id: int) -> None:
        await self._run(_delete(verifier_id))

    async def clone(self, verifier_id: int, *, name: str) -> Verifier:
        return await self._run(_clone(verifier_id, name))

    async def versions(self, verifier_id: int) -> builtins.list[VerifierVersion]:
        return await self._run(_versions(verifier_id))

    async def create_version(self, verifier_id: int, *, spec: dict[str, Any]) -> VerifierVersion:
        return await self._run(_version_create(verifier_id, spec))

    async def validate(self, spec: dict[str, Any]) -> dict[str, Any]:
        return await self._run(_plan.post("/verifiers/validate", {"spec": spec}))

    async def preview(
        self, *, spec: dict[str, Any], samples: builtins.list[dict[str, Any]]
    ) -> builtins.list[PreviewResult]:
        return await self._run(_preview(spec, samples))

    async def test_cases(self, verifier_id: int) -> builtins.list[VerifierTestCase]:
        return await self._run(_test_cases(verifier_id))

    async def types(self) -> builtins.list[dict[str, Any]]:
        return await self._run(_plan.get("/verifiers/types"))

    async def import_openai(
        self,
        grader: dict[str, Any],
        *,
        name: str = "",
        judge_endpoint: str = "",
        judge_api_key_secret: str = "",
    ) -> ImportedVerifier:
        return await self._run(
            _import_openai(_import_body(grader, name, judge_endpoint, judge_api_key_secret))
        )

    async def export(self, verifier_id: int, *, version: int | None = None) -> dict[str, Any]:
        return await self._run(_export(verifier_id, version))
