"""The kubernetes backend: the Pod and NetworkPolicy it would submit, and its in-pod runner run on this host."""

import json
import subprocess
import sys

from kubernetes.client import ApiClient

from sandboxes.backends.kubernetes import (
    LABELS,
    POD_RUNNER_SOURCE,
    KubernetesBackend,
    network_policy,
    pod_for,
    result_from_log,
)
from sandboxes.registry import BACKEND_NAMES, get_backend
from sandboxes.types import Limits, RunRequest, Status

REQUEST = RunRequest(
    language="python",
    code="print(input())",
    stdin="hi\n",
    files={"data/x.txt": "1"},
    limits=Limits(wall_s=3, memory_mb=128, tmpfs_mb=8),
)


def submitted(obj) -> dict:
    """The JSON body the kubernetes client would send for `obj`."""
    return ApiClient().sanitize_for_serialization(obj)


def test_the_pod_is_locked_down_and_limited():
    pod = submitted(pod_for(REQUEST, name="anneal-sandbox-x", namespace="sandboxes", image="img:1"))
    assert pod["metadata"] == {"name": "anneal-sandbox-x", "namespace": "sandboxes", "labels": LABELS}
    spec = pod["spec"]
    assert spec["restartPolicy"] == "Never"
    assert spec["activeDeadlineSeconds"] == 3 + 30
    assert spec["automountServiceAccountToken"] is False
    assert spec["enableServiceLinks"] is False
    assert (spec["hostNetwork"], spec["hostPID"], spec["hostIPC"]) == (False, False, False)
    (container,) = spec["containers"]
    assert container["image"] == "img:1"
    assert container["securityContext"] == {
        "allowPrivilegeEscalation": False,
        "capabilities": {"drop": ["ALL"]},
        "privileged": False,
        "readOnlyRootFilesystem": True,
        "runAsGroup": 65534,
        "runAsNonRoot": True,
        "runAsUser": 65534,
        "seccompProfile": {"type": "RuntimeDefault"},
    }
    assert container["resources"]["limits"] == {"cpu": "1", "memory": "192Mi", "ephemeral-storage": "8Mi"}
    assert spec["volumes"] == [{"name": "tmp", "emptyDir": {"medium": "Memory", "sizeLimit": "8Mi"}}]
    assert container["volumeMounts"] == [{"mountPath": "/tmp", "name": "tmp"}]
    assert container["command"][-1] == POD_RUNNER_SOURCE
    (env,) = container["env"]
    assert env["name"] == "ANNEAL_REQUEST"
    assert RunRequest.from_dict(json.loads(env["value"])) == REQUEST


def test_the_network_policy_denies_all_traffic_of_every_sandbox_pod():
    policy = submitted(network_policy(namespace="sandboxes"))
    assert policy["kind"] == "NetworkPolicy"
    assert policy["metadata"]["namespace"] == "sandboxes"
    spec = policy["spec"]
    assert spec["policyTypes"] == ["Ingress", "Egress"]
    assert spec["egress"] == [] and spec["ingress"] == []
    selector = spec["podSelector"]["matchLabels"]
    assert selector.items() <= LABELS.items()  # it selects the pods pod_for makes


def run_runner(request: RunRequest, tmp_path) -> str:
    """pod_runner.py as the pod would run it, here on the host in a temporary working directory."""
    env = {"ANNEAL_REQUEST": json.dumps(request.to_dict()), "ANNEAL_WORKDIR": str(tmp_path / "work")}
    proc = subprocess.run(
        [sys.executable, "-c", POD_RUNNER_SOURCE], env=env, capture_output=True, text=True, timeout=30
    )
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


def test_the_runner_reports_a_run_the_backend_can_read(tmp_path):
    log = "noise from the image\n" + run_runner(REQUEST, tmp_path)
    result = result_from_log(log, REQUEST, phase="Succeeded", reason="")
    assert (result.status, result.exit_code, result.stdout) == (Status.OK, 0, "hi\n")


def test_the_runner_keeps_the_wall_clock_and_the_output_cap(tmp_path):
    slow = RunRequest(language="shell", code="sleep 30", limits=Limits(wall_s=0.5))
    assert (
        result_from_log(run_runner(slow, tmp_path), slow, phase="Succeeded", reason="").status
        == Status.TIMEOUT
    )
    loud = RunRequest(
        language="python", code="while True: print('x' * 100)", limits=Limits(output_bytes=1000)
    )
    flooded = result_from_log(run_runner(loud, tmp_path / "b"), loud, phase="Succeeded", reason="")
    assert flooded.status == Status.OUTPUT_LIMIT


def test_a_pod_killed_at_its_deadline_is_a_timeout():
    result = result_from_log("", REQUEST, phase="Failed", reason="DeadlineExceeded")
    assert result.status == Status.TIMEOUT


def test_without_a_cluster_runs_are_sandbox_errors(monkeypatch, tmp_path):
    monkeypatch.setenv("KUBECONFIG", str(tmp_path / "no-such-kubeconfig"))
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    backend = KubernetesBackend(image="img:1")
    result = backend.run(REQUEST)
    assert result.status == Status.SANDBOX_ERROR
    assert "no Kubernetes cluster configured" in result.stderr
    assert backend.health()["ok"] is False


def test_the_backend_is_registered_by_name():
    assert "kubernetes" in BACKEND_NAMES
    assert isinstance(get_backend("kubernetes"), KubernetesBackend)
