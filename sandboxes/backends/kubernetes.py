"""The kubernetes backend: one pod per run, with resource limits and a deny-all NetworkPolicy.

Each run is a pod (restartPolicy Never) whose single container runs pod_runner.py on the request: read-only
root filesystem, a uid of its own (random, see POD_UID_MIN) and gid 65534, no privilege escalation, every
capability dropped, a seccomp profile (the runtime's default, or Anneal's own from seccomp.py installed on the
nodes), no service-account token, no service links, CPU/memory/ephemeral-storage limits (the memory one holds
all of the run's processes together), /tmp an in-memory emptyDir capped at the request's tmpfs size,
activeDeadlineSeconds past the wall clock. A NetworkPolicy selecting every sandbox pod allows no ingress and no
egress (a CNI that enforces NetworkPolicy is required).

Processes: a pod spec has no pids field. The runner caps the program's processes with RLIMIT_NPROC, which the
kernel counts per uid across the node, hence a uid no other pod has; the kubelet's podPidsLimit (cluster-side,
its `--pod-max-pids` flag) is the bound that covers the pod as a whole and should be set on sandbox nodes.

Configuration: ANNEAL_K8S_NAMESPACE (default anneal-sandbox), ANNEAL_SANDBOX_IMAGE (an image with python3
that the cluster can pull; a toolchain profile's runs use `<image>-<profile>`, see sandboxes/profiles.py), ANNEAL_K8S_SECCOMP_PROFILE (a Localhost profile path relative to the kubelet's
seccomp directory, holding `python -m sandboxes.backends.seccomp`'s output; unset: RuntimeDefault),
ANNEAL_K8S_RUNTIME_CLASS (a RuntimeClass such as gVisor's or Kata's: a kernel of the pod's own), and the
cluster itself from the pod's service account (in-cluster) or KUBECONFIG. No cluster runs here: the tests
assert the objects this backend would submit, and run pod_runner.py locally.
"""

from __future__ import annotations

import json
import math
import random
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from sandboxes.backends.base import SandboxBackend
from sandboxes.backends.outcome import Outcome, run_result
from sandboxes.profiles import image_for
from sandboxes.types import RunRequest, RunResult, Status

POD_RUNNER_SOURCE = (Path(__file__).parent / "pod_runner.py").read_text()
RESULT_PREFIX = "ANNEAL_POD_RESULT "
LABELS = {"app.kubernetes.io/name": "anneal-sandbox", "anneal.sandbox": "1"}
POLICY_NAME = "anneal-sandbox-deny-all"
MEMORY_OVERHEAD_MB = 64  # the runner's own interpreter, on top of the program's address-space limit
DEADLINE_GRACE_S = 30  # scheduling and image start-up, on top of the wall clock
# Each pod runs as a uid drawn from [POD_UID_MIN, POD_UID_MAX]: far above any host account, and two pods on a
# node share one with odds of about one in two billion, so RLIMIT_NPROC (counted per uid) is the pod's own.
# pod_runner.py sets it only for a uid in this range.
POD_UID_MIN = 1 << 20
POD_UID_MAX = (1 << 31) - 2


def pod_for(
    request: RunRequest,
    *,
    name: str,
    namespace: str,
    image: str,
    uid: int | None = None,
    seccomp_profile: str = "",
    runtime_class: str = "",
):
    """The V1Pod that runs `request` (precondition: `name` is a valid, unused pod name in `namespace`).

    `uid`: the pod's own (random in the POD_UID range when None). `seccomp_profile`: a Localhost profile
    path on the nodes ("" for the runtime's default). `runtime_class`: a RuntimeClass name ("" for none).
    """
    from kubernetes import client

    limits = request.limits
    uid = uid if uid is not None else random.SystemRandom().randint(POD_UID_MIN, POD_UID_MAX)
    if seccomp_profile:
        seccomp = client.V1SeccompProfile(type="Localhost", localhost_profile=seccomp_profile)
    else:
        seccomp = client.V1SeccompProfile(type="RuntimeDefault")
    memory = f"{limits.memory_mb + MEMORY_OVERHEAD_MB}Mi"
    container = client.V1Container(
        name="sandbox",
        image=image,
        command=["/usr/bin/python3", "-E", "-s", "-S", "-B", "-c", POD_RUNNER_SOURCE],
        env=[client.V1EnvVar(name="ANNEAL_REQUEST", value=json.dumps(request.to_dict()))],
        working_dir="/tmp",
        resources=client.V1ResourceRequirements(
            limits={"cpu": "1", "memory": memory, "ephemeral-storage": f"{limits.tmpfs_mb}Mi"},
            requests={"cpu": "100m", "memory": memory},
        ),
        security_context=client.V1SecurityContext(
            run_as_user=uid,
            run_as_group=65534,
            run_as_non_root=True,
            read_only_root_filesystem=True,
            allow_privilege_escalation=False,
            privileged=False,
            capabilities=client.V1Capabilities(drop=["ALL"]),
            seccomp_profile=seccomp,
        ),
        volume_mounts=[client.V1VolumeMount(name="tmp", mount_path="/tmp")],
    )
    spec = client.V1PodSpec(
        containers=[container],
        restart_policy="Never",
        active_deadline_seconds=math.ceil(limits.wall_s) + DEADLINE_GRACE_S,
        automount_service_account_token=False,
        enable_service_links=False,
        host_network=False,
        host_pid=False,
        host_ipc=False,
        share_process_namespace=False,
        dns_policy="None",
        dns_config=client.V1PodDNSConfig(nameservers=["127.0.0.1"]),  # no resolver; egress is denied anyway
        security_context=client.V1PodSecurityContext(run_as_non_root=True, fs_group=65534),
        runtime_class_name=runtime_class or None,
        volumes=[
            client.V1Volume(
                name="tmp",
                empty_dir=client.V1EmptyDirVolumeSource(medium="Memory", size_limit=f"{limits.tmpfs_mb}Mi"),
            )
        ],
    )
    return client.V1Pod(
        api_version="v1",
        kind="Pod",
        metadata=client.V1ObjectMeta(name=name, namespace=namespace, labels=dict(LABELS)),
        spec=spec,
    )


def network_policy(*, namespace: str):
    """A NetworkPolicy that selects every sandbox pod and allows it no ingress and no egress at all."""
    from kubernetes import client

    return client.V1NetworkPolicy(
        api_version="networking.k8s.io/v1",
        kind="NetworkPolicy",
        metadata=client.V1ObjectMeta(name=POLICY_NAME, namespace=namespace, labels=dict(LABELS)),
        spec=client.V1NetworkPolicySpec(
            pod_selector=client.V1LabelSelector(match_labels={"anneal.sandbox": "1"}),
            policy_types=["Ingress", "Egress"],
            ingress=[],
            egress=[],
        ),
    )


def result_from_log(log: str, request: RunRequest, *, phase: str, reason: str) -> RunResult:
    """Turn a finished pod's log (ending in the runner's JSON line) and its phase/reason into a RunResult."""
    line = next((x for x in reversed(log.splitlines()) if x.startswith(RESULT_PREFIX)), None)
    if line is None:
        status = Status.TIMEOUT if reason == "DeadlineExceeded" else Status.SANDBOX_ERROR
        detail = f"pod ended ({phase}, {reason or 'no reason'}) without a result: {log.strip()[-300:]}"
        return RunResult(status, None, "", detail, 0.0)
    report = json.loads(line[len(RESULT_PREFIX) :])
    if report.get("setup_error"):
        return RunResult(Status.SANDBOX_ERROR, None, "", report["setup_error"], 0.0)
    outcome = Outcome(
        report["exit_code"],
        report["stdout"].encode(),
        report["stderr"].encode(),
        report["timed_out"],
        report["flooded"],
    )
    return run_result(
        outcome,
        request.limits,
        program_ran=True,
        duration_s=report["duration_s"],
        oom_killed=report.get("oom_killed") is True,
    )


class KubernetesBackend(SandboxBackend):
    name = "kubernetes"

    def __init__(
        self,
        *,
        namespace: str = "anneal-sandbox",
        image: str,
        workers: int = 8,
        seccomp_profile: str = "",
        runtime_class: str = "",
    ) -> None:
        self.namespace = namespace
        self.image = image
        self.workers = workers
        self.seccomp_profile = seccomp_profile
        self.runtime_class = runtime_class
        self._api = None

    def core_api(self):
        """A CoreV1Api for the configured cluster (in-cluster, else KUBECONFIG); raises when there is none."""
        if self._api is None:
            from kubernetes import client, config

            try:
                config.load_incluster_config()
            except config.ConfigException:
                config.load_kube_config()
            self._api = client.CoreV1Api()
            self.ensure_network_policy()
        return self._api

    def ensure_network_policy(self) -> None:
        from kubernetes import client
        from kubernetes.client.exceptions import ApiException

        try:
            client.NetworkingV1Api().create_namespaced_network_policy(
                self.namespace, network_policy(namespace=self.namespace)
            )
        except ApiException as exc:
            if exc.status != 409:  # 409: it exists already
                raise

    def run(self, request: RunRequest) -> RunResult:
        started = time.monotonic()
        try:
            api = self.core_api()
        except Exception as exc:  # noqa: BLE001 - no cluster configured reads the same whatever the cause
            return RunResult(Status.SANDBOX_ERROR, None, "", f"no Kubernetes cluster configured: {exc}", 0.0)
        name = f"anneal-sandbox-{uuid.uuid4().hex[:12]}"
        pod = pod_for(
            request,
            name=name,
            namespace=self.namespace,
            image=image_for(request.profile, self.image),  # a toolchain profile's own image
            seccomp_profile=self.seccomp_profile,
            runtime_class=self.runtime_class,
        )
        try:
            api.create_namespaced_pod(self.namespace, pod)
            deadline = started + pod.spec.active_deadline_seconds + 10
            while True:
                status = api.read_namespaced_pod_status(name, self.namespace).status
                if status.phase in ("Succeeded", "Failed") or time.monotonic() > deadline:
                    break
                time.sleep(0.2)
            log = api.read_namespaced_pod_log(name, self.namespace)
            result = result_from_log(log, request, phase=status.phase, reason=status.reason or "")
        except Exception as exc:  # noqa: BLE001 - the cluster failing is the sandbox failing
            result = RunResult(Status.SANDBOX_ERROR, None, "", f"Kubernetes error: {exc}", 0.0)
        finally:
            try:
                api.delete_namespaced_pod(name, self.namespace, grace_period_seconds=0)
            except Exception:  # noqa: BLE001 - already gone
                pass
        result.duration_s = round(time.monotonic() - started, 4)
        return result

    def run_many(self, requests: list[RunRequest]) -> list[RunResult]:
        with ThreadPoolExecutor(max_workers=max(1, min(self.workers, len(requests)))) as pool:
            return list(pool.map(self.run, requests))

    def health(self) -> dict:
        try:
            self.core_api().list_namespaced_pod(self.namespace, limit=1)
        except Exception as exc:  # noqa: BLE001
            return {"ok": False, "backend": self.name, "detail": f"no Kubernetes cluster reachable: {exc}"}
        return {"ok": True, "backend": self.name, "detail": f"namespace {self.namespace}; image {self.image}"}
