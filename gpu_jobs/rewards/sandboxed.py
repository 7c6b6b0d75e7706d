"""What the code-running verifiers share: their requests sent to a sandbox in one call, and an outage (a broker
or host down) turned into a SANDBOX_ERROR result per request, so training scores those samples 0 with the
reason instead of stopping."""

from __future__ import annotations

from sandboxes.client import SandboxClient
from sandboxes.types import RunRequest, RunResult, Status


def run_or_outage(client: SandboxClient, requests: list[RunRequest]) -> list[RunResult]:
    """``client.run_many(requests)``, or one SANDBOX_ERROR "sandbox unavailable: …" result per request."""
    if not requests:
        return []
    try:
        return client.run_many(requests)
    except Exception as exc:  # noqa: BLE001 - any outage: the samples score 0 and say why
        return [RunResult(Status.SANDBOX_ERROR, None, "", f"sandbox unavailable: {exc}", 0.0)] * len(requests)
