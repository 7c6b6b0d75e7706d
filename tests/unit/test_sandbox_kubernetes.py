"""The kubernetes backend: the Pod and NetworkPolicy it would submit, and its in-pod runner run on this host."""

import json
import os
import shutil
import subprocess
import sys
import tempfile

import pytest
from kubernetes.client import ApiClient

from sandboxes.backends.kubernetes import (
    LABELS,
    POD_RUNNER_SOURCE,
    POD_UID_MAX,
    POD_UID_MIN,
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
    uid = container["securityContext"].pop("runAsUser")
    assert container["securityContext"] == {
        "allowPrivilegeEscalation": False,
        "capabilities": {"drop": ["ALL"]},
        "privileged": False,
        "readOnlyRootFilesystem": True,
        "runAsGroup": 65534,
        "runAsNonRoot": True,
        "seccompProfile": {"type": "RuntimeDefault"},
    }
    assert "runtimeClassName" not in spec
    # A uid of the pod's own, so that the runner's RLIMIT_NPROC counts this pod's processes alone.
    assert POD_UID_MIN <= uid <= POD_UID_MAX
    other = submitted(pod_for(REQUEST, name="anneal-sandbox-y", namespace="sandboxes", image="img:1"))
    assert other["spec"]["containers"][0]["securityContext"]["runAsUser"] != uid
    assert container["resources"]["limits"] == {"cpu": "1", "memory": "192Mi", "ephemeral-storage": "8Mi"}
    assert spec["volumes"] == [{"name": "tmp", "emptyDir": {"medium": "Memory", "sizeLimit": "8Mi"}}]
    assert container["volumeMounts"] == [{"mountPath": "/tmp", "name": "tmp"}]
    assert container["command"][-1] == POD_RUNNER_SOURCE
    (env,) = container["env"]
    assert env["name"] == "ANNEAL_REQUEST"
    assert RunRequest.from_dict(json.loads(env["value"])) == REQUEST


def test_an_operator_can_name_anneals_seccomp_profile_and_a_runtime_class(monkeypatch):
    monkeypatch.setenv("ANNEAL_K8S_SECCOMP_PROFILE", "anneal/sandbox.json")
    monkeypatch.setenv("ANNEAL_K8S_RUNTIME_CLASS", "gvisor")
    get_backend.cache_clear()
    try:
        backend = get_backend("kubernetes")
    finally:
        get_backend.cache_clear()
    pod = pod_for(
        REQUEST,
        name="x",
        namespace="sandboxes",
        image="img:1",
        seccomp_profile=backend.seccomp_profile,
        runtime_class=backend.runtime_class,
    )
    spec = submitted(pod)["spec"]
    assert spec["runtimeClassName"] == "gvisor"
    assert spec["containers"][0]["securityContext"]["seccompProfile"] == {
        "type": "Localhost",
        "localhostProfile": "anneal/sandbox.json",
    }


def test_the_seccomp_profile_for_the_nodes_is_printed_as_json():
    proc = subprocess.run(
        [sys.executable, "-m", "sandboxes.backends.seccomp"], capture_output=True, text=True, check=True
    )
    profile = json.loads(proc.stdout)
    assert profile["defaultAction"] == "SCMP_ACT_ALLOW"
    refused = {name for rule in profile["syscalls"] if "args" not in rule for name in rule["names"]}
    assert {"unshare", "setns", "mount", "ptrace", "keyctl", "bpf", "userfaultfd", "clone3"} <= refused


def test_the_network_policy_denies_all_traffic_of_every_sandbox_pod():
    policy = submitted(network_policy(namespace="sandboxes"))
    assert policy["kind"] == "NetworkPolicy"
    assert policy["metadata"]["namespace"] == "sandboxes"
    spec = policy["spec"]
    assert spec["policyTypes"] == ["Ingress", "Egress"]
    assert spec["egress"] == [] and spec["ingress"] == []
    selector = spec["podSelector"]["matchLabels"]
    assert selector.items() <= LABELS.items()  # it selects the pods pod_for makes


def run_runner(request: RunRequest, tmp_path, *, uid: int | None = None) -> str:
    """pod_runner.py as the pod would run it, here on the host in a temporary working directory (as `uid`,
    which needs root, when given)."""
    env = {"ANNEAL_REQUEST": json.dumps(request.to_dict()), "ANNEAL_WORKDIR": str(tmp_path / "work")}
    if uid is not None:  # pytest's folders are private to root: a folder of the pod uid's own instead
        env["ANNEAL_WORKDIR"] = tempfile.mkdtemp(prefix="anneal-pod-")
        os.chown(env["ANNEAL_WORKDIR"], uid, -1)
    proc = subprocess.run(
        ["/usr/bin/python3", "-c", POD_RUNNER_SOURCE]
        if uid is not None
        else [sys.executable, "-c", POD_RUNNER_SOURCE],
        env=env,
        capture_output=True,
        text=True,
        timeout=30,
        user=uid,
    )
    if uid is not None:
        shutil.rmtree(env["ANNEAL_WORKDIR"])
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


@pytest.mark.skipif(os.getuid() != 0, reason="runs the runner as a pod's uid, which needs root")
def test_the_runner_caps_the_programs_processes_under_a_pods_uid(tmp_path):
    code = """
import os, time
n = 0
try:
    while n < 50:  # bounded: without the cap this would fork on the host
        if os.fork() == 0:
            time.sleep(5)
            os._exit(0)
        n += 1
except OSError:
    pass
print(n)
"""
    request = RunRequest(language="python", code=code, limits=Limits(pids=6, wall_s=10))
    result = result_from_log(
        run_runner(request, tmp_path, uid=POD_UID_MIN + 12345), request, phase="", reason=""
    )
    assert result.status == Status.OK, result.stderr
    assert int(result.stdout) < 6


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
