"""Deployments' worker side: the regression gate before a deployment starts, and one serving replica
supervised per `serve` task, as workers/job_runner.py supervises a training child.

A replica is `python -m gpu_jobs.serving ...` in its own process group on a free port of
settings.DEPLOY_SERVE_BIND_HOST (127.0.0.1 unless the worker runs apart from web; then it records the address
web reaches it at, advertised_host()). It gets a
fresh credential in its environment (never argv: /proc/*/cmdline is world-readable) and answers only calls that
send it, which the platform derives from the replica's row (Replica.credential). The task
waits for its /health, marks it ready, heart-beats while it runs, stops it (the whole group) when the replica
is set to draining, and marks it failed with the reason (the log's tail) when it dies or never comes up.
"""

import ipaddress
import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import IO

import httpx
from celery.worker import state as worker_state
from django.conf import settings
from django.db import close_old_connections

from anneal.deployments.gate import gate_decide
from anneal.deployments.models import Deployment, DeploymentState, Replica, ReplicaState
from anneal.deployments.services import (
    deployment_claim_prepare,
    deployment_fail,
    deployment_prepare_heartbeat,
    gate_record,
    replica_claim,
    replica_credential_issue,
    replica_finish,
    replica_handover,
    replica_heartbeat,
    replica_ready,
    replica_started,
    replicas_spawn,
)
from gpu_jobs.serving.auth import CREDENTIAL_ENV

POLL_S = 0.5
HEARTBEAT_S = 5.0
STOP_GRACE_S = 10.0
GATE_TIMEOUT_S = 900
ROOT = Path(__file__).resolve().parents[1]


def bind_host() -> str:
    return settings.DEPLOY_SERVE_BIND_HOST


def advertised_host() -> str:
    """The address web's /v1 proxy calls this worker's replicas at: the one set, else the bind address, else
    (bound to every address) the one this host's name resolves to, its address on the cluster's network."""
    if settings.DEPLOY_SERVE_ADVERTISE_HOST:
        return settings.DEPLOY_SERVE_ADVERTISE_HOST
    if not ipaddress.ip_address(bind_host()).is_unspecified:
        return bind_host()
    return socket.gethostbyname(socket.gethostname())


def serving_dir() -> Path:
    path = settings.DATA_DIR / "serving"
    path.mkdir(parents=True, exist_ok=True)
    return path


def _child_env() -> dict:
    return {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT / "platform"), str(ROOT)])}


def serving_env(*, credential: str, backend: str) -> dict:
    """The replica's environment: the worker's, plus its credential where its server reads it."""
    return {**_child_env(), ("VLLM_API_KEY" if backend == "vllm" else CREDENTIAL_ENV): credential}


def free_port() -> int:
    family = socket.AF_INET6 if ":" in bind_host() else socket.AF_INET
    with socket.socket(family) as sock:
        sock.bind((bind_host(), 0))
        return sock.getsockname()[1]


# The replica runs in its own session (so a stop kills its whole group), which also shields it from signals
# sent to the worker's group: this prelude asks the kernel to kill it when the worker dies, however it dies,
# and exits if the worker (its first argument, a pid) already died. Not "its parent is pid 1": in a container
# the worker is pid 1.
_DIE_WITH_PARENT = (
    "import ctypes, os, signal, sys; ctypes.CDLL(None).prctl(1, signal.SIGKILL); "
    "os.getppid() != int(sys.argv[1]) and sys.exit('the serving worker is gone'); "
    "os.execvp(sys.argv[2], sys.argv[2:])"
)


def serving_argv(
    *, model_dir: str, tier: str, port: int, served_name: str, max_concurrency: int, backend: str = "cpu"
) -> list[str]:
    """The replica's command: the CPU server (gpu_jobs.serving) or, on GPU hosts, vLLM's OpenAI server."""
    if backend == "vllm":
        from gpu_jobs.serving.vllm import vllm_serve_argv

        command = vllm_serve_argv(
            model_dir,
            tier=tier,
            served_name=served_name,
            port=port,
            host=bind_host(),
            max_concurrency=max_concurrency,
        )
    else:
        command = [
            sys.executable,
            *("-m", "gpu_jobs.serving", "--model", model_dir, "--tier", tier, "--host", bind_host()),
            *("--port", str(port), "--served-name", served_name, "--max-concurrency", str(max_concurrency)),
            *("--prefix-cache-mb", str(settings.DEPLOY_PREFIX_CACHE_MB)),
        ]
    return dies_with_worker(command)


def dies_with_worker(command: list[str]) -> list[str]:
    """`command` behind the prelude that has the kernel kill it when this worker dies (Linux only)."""
    if sys.platform != "linux":
        return command
    return [sys.executable, "-c", _DIE_WITH_PARENT, str(os.getpid()), *command]


# --- the regression gate --------------------------------------------------------------------------------


def deployment_prepare(*, deployment_id: int) -> str:
    """pending -> starting: run the regression gate (unless an owner overrode it), then start replicas."""
    if not deployment_claim_prepare(deployment_id=deployment_id):
        return "not claimed"
    deployment = Deployment.objects.select_related("checkpoint__job", "team").get(pk=deployment_id)
    if not deployment.gate_overridden:
        try:
            outcome = run_gate(deployment_id=deployment_id)
        except GateError as exc:
            deployment_fail(deployment_id=deployment_id, error=f"regression gate could not run: {exc}")
            return DeploymentState.FAILED
        close_old_connections()
        passed, scores = gate_decide(outcome["scores"], max_drop=settings.DEPLOY_GATE_MAX_DROP)
        gate_record(
            deployment=deployment,
            passed=passed,
            max_drop=settings.DEPLOY_GATE_MAX_DROP,
            scores=scores,
            note=outcome.get("note", ""),
        )
        if not passed:
            return DeploymentState.FAILED
    deployment.refresh_from_db()
    if deployment.state != DeploymentState.STARTING:  # stopped while the gate ran
        return deployment.state
    replicas_spawn(deployment=deployment, count=deployment.replicas, tier=deployment.tier)
    return DeploymentState.STARTING


class GateError(Exception):
    pass


def run_gate(*, deployment_id: int) -> dict:
    """Evaluate in a child process (it loads two models; the worker stays small) and return its JSON."""
    workdir = serving_dir() / f"gate-{deployment_id}"
    workdir.mkdir(parents=True, exist_ok=True)
    out, log_path = workdir / "gate.json", workdir / "gate.log"
    out.unlink(missing_ok=True)
    command = dies_with_worker([sys.executable, "-m", "workers.deploy_gate", str(deployment_id), str(out)])
    with log_path.open("wb") as log:
        child = subprocess.Popen(
            command, cwd=ROOT, env=_child_env(), stdout=log, stderr=subprocess.STDOUT, start_new_session=True
        )
        deadline = time.monotonic() + GATE_TIMEOUT_S
        try:
            # The heartbeat tells beat's reaper this preparation is alive (deployments_reap_stale_prepares).
            while child.poll() is None:
                if time.monotonic() > deadline:
                    raise GateError(f"the evaluation took longer than {GATE_TIMEOUT_S} s")
                deployment_prepare_heartbeat(deployment_id=deployment_id)
                try:
                    child.wait(timeout=HEARTBEAT_S)
                except subprocess.TimeoutExpired:
                    pass
        finally:
            _stop_group(child)
    if child.returncode != 0 or not out.exists():
        tail = log_path.read_text(errors="replace")[-1500:]
        raise GateError(f"the evaluation exited with status {child.returncode}: {tail}")
    return json.loads(out.read_text())


# --- one replica -----------------------------------------------------------------------------------------


def replica_run_supervised(*, replica_id: int) -> str:
    worker = f"{socket.gethostname()}:{os.getpid()}"
    if not replica_claim(replica_id=replica_id, worker=worker):
        return "not claimed"
    replica = Replica.objects.select_related("deployment__checkpoint").get(pk=replica_id)
    log_path = serving_dir() / f"replica-{replica_id}.log"
    port = free_port()
    try:
        with log_path.open("ab") as log:
            child, credential = replica_process_start(replica=replica, port=port, log=log)
    except OSError as exc:
        replica_finish(replica_id=replica_id, error=f"the serving process could not start: {exc}")
        return ReplicaState.FAILED
    replica.host, replica.port = advertised_host(), port
    replica_started(replica_id=replica_id, host=replica.host, port=port, pid=child.pid)
    # Its health is read at the address web calls it at, so a replica web cannot reach never turns ready.
    base_url = replica.base_url
    try:
        return _supervise(
            replica_id=replica_id, child=child, base_url=base_url, credential=credential, log_path=log_path
        )
    finally:
        _stop_group(child)


def replica_process_start(*, replica: Replica, port: int, log: IO[bytes]) -> tuple[subprocess.Popen, str]:
    """Start the serving process of ``replica`` on ``port`` with a fresh credential; return it and the
    credential. Raises OSError when the process cannot start."""
    deployment = replica.deployment
    backend = settings.DEPLOY_SERVING_BACKEND
    credential = replica_credential_issue(replica_id=replica.pk)
    argv = serving_argv(
        model_dir=deployment.checkpoint.location,
        tier=replica.tier,
        port=port,
        served_name=deployment.name,
        max_concurrency=deployment.max_concurrency,
        backend=backend,
    )
    child = subprocess.Popen(
        argv,
        cwd=ROOT,
        env=serving_env(credential=credential, backend=backend),
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    return child, credential


def _supervise(
    *, replica_id: int, child: subprocess.Popen, base_url: str, credential: str, log_path: Path
) -> str:
    started = time.monotonic()
    ready = False
    last_beat = time.monotonic()
    with httpx.Client(timeout=2.0) as http:
        while True:
            returncode = child.poll()
            if returncode is not None:
                replica_finish(replica_id=replica_id, error=_exit_reason(returncode, log_path, ready=ready))
                return _state(replica_id)
            close_old_connections()
            if worker_stopping():
                _stop_group(child)
                replica_handover(replica_id=replica_id)
                return _state(replica_id)
            state = Replica.objects.filter(pk=replica_id).values_list("state", flat=True).first()
            if state in (ReplicaState.DRAINING, None):
                _stop_group(child)
                replica_finish(replica_id=replica_id)
                return _state(replica_id)
            if state in (ReplicaState.FAILED, ReplicaState.STOPPED):  # reaped while this worker was cut off
                _stop_group(child)
                return state
            if not ready:
                health = replica_health(http, base_url=base_url, credential=credential)
                if health.get("status") == "failed":  # the model would not load: no point waiting
                    _stop_group(child)
                    replica_finish(
                        replica_id=replica_id, error=f"the model did not load: {health.get('error', '')}"
                    )
                    return _state(replica_id)
                if health.get("status") == "ok":
                    ready = replica_ready(replica_id=replica_id)
                    if not ready:  # drained while it was starting: the next turn stops it
                        continue
                elif time.monotonic() - started > settings.DEPLOY_REPLICA_START_TIMEOUT_S:
                    _stop_group(child)
                    tail = log_path.read_text(errors="replace")[-1500:]
                    replica_finish(
                        replica_id=replica_id,
                        error=f"not healthy after {settings.DEPLOY_REPLICA_START_TIMEOUT_S} s "
                        f"(ANNEAL_REPLICA_START_TIMEOUT_S); its log ends:\n{tail}",
                    )
                    return _state(replica_id)
            if time.monotonic() - last_beat >= HEARTBEAT_S:
                replica_heartbeat(replica_id=replica_id)
                last_beat = time.monotonic()
            time.sleep(POLL_S)


def worker_stopping() -> bool:
    """Whether this Celery worker was asked to shut down (warm or cold). Celery sets the flag to the exit
    status, 0 on a plain SIGTERM, so a truth test (or `in (None, False)`, as 0 == False) misses the most
    common one."""
    return any(
        flag is not None and flag is not False
        for flag in (worker_state.should_stop, worker_state.should_terminate)
    )


def replica_health(http: httpx.Client, *, base_url: str, credential: str) -> dict:
    """The replica's /health body: status "ok" once it serves, "loading" before, "failed" if it cannot."""
    try:
        response = http.get(f"{base_url}/health", headers={"Authorization": f"Bearer {credential}"})
    except httpx.HTTPError:
        return {"status": "down"}
    if response.status_code == 200:  # vLLM answers 200 with an empty body
        return {"status": "ok"}
    try:
        body = response.json()
    except ValueError:
        return {"status": "loading"}
    return body if isinstance(body, dict) and body.get("status") == "failed" else {"status": "loading"}


def _state(replica_id: int) -> str:
    return Replica.objects.filter(pk=replica_id).values_list("state", flat=True).first() or "gone"


def _exit_reason(returncode: int, log_path: Path, *, ready: bool) -> str:
    tail = log_path.read_text(errors="replace")[-1500:] if log_path.exists() else ""
    when = "while serving" if ready else "before it was healthy"
    if returncode < 0:
        return f"the serving process was killed by signal {signal.Signals(-returncode).name} {when}\n{tail}"
    return f"the serving process exited with status {returncode} {when}\n{tail}".strip()


def _stop_group(child: subprocess.Popen) -> None:
    """SIGTERM the replica's process group, SIGKILL what is left after the grace period."""
    try:
        os.killpg(child.pid, signal.SIGTERM)
    except ProcessLookupError:
        return
    try:
        child.wait(timeout=STOP_GRACE_S)
    except subprocess.TimeoutExpired:
        pass
    try:
        os.killpg(child.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    child.wait()
