"""The Kubernetes manifests (deploy/kubernetes): every rendered object passes the Kubernetes schema, offline, and
they keep the promises the rest of the code relies on: the commands of docker-compose.yml, locked-down and
limited containers, placeholder secrets, the sandbox backend's own network policy and API calls.

The kustomization uses only `resources` and `images`, so the test renders it itself (no kubectl on CI's machine);
where kubectl is installed, `kubectl kustomize` must render the same objects.
"""

import copy
import re
import shutil
import subprocess
from pathlib import Path

import kubernetes_validate
import pytest
import yaml
from django.urls import resolve
from kubernetes.client import ApiClient

from sandboxes.backends import kubernetes as backend
from sandboxes.types import Limits, RunRequest

ROOT = Path(__file__).resolve().parents[2]
MANIFESTS = ROOT / "deploy" / "kubernetes"
# The schema the objects are checked against: a release every managed Kubernetes offers today. Strict: an
# unknown field (a typo, a field at the wrong level) fails, where the API server would drop it silently.
KUBERNETES_VERSION = "1.32"
SANDBOX_NAMESPACE = "anneal-sandbox"
PLACEHOLDER = "REPLACE_ME"
POD_TEMPLATE_KINDS = {"Deployment", "Job"}
# What the "restricted" Pod Security Standard allows, which both namespaces enforce.
RESTRICTED_VOLUMES = set(
    "configMap csi downwardAPI emptyDir ephemeral persistentVolumeClaim projected secret".split()
)


def render() -> list[dict]:
    """The kustomization's resources in order, with its `images:` entries applied."""
    kustomization = yaml.safe_load((MANIFESTS / "kustomization.yaml").read_text())
    unknown = set(kustomization) - {"apiVersion", "kind", "resources", "images"}
    assert not unknown, f"render() does not apply {sorted(unknown)}: teach it, or rely on kubectl"
    objects = []
    for name in kustomization["resources"]:
        objects += [obj for obj in yaml.safe_load_all((MANIFESTS / name).read_text()) if obj]
    for obj in objects:
        for container in containers(obj):
            container["image"] = retagged(container["image"], kustomization.get("images", []))
    return objects


def retagged(image: str, entries: list[dict]) -> str:
    """`image` as kustomize's `images:` entries rewrite it: matched by name, given a new name and tag."""
    name, tag = image.rsplit(":", 1) if ":" in image.rsplit("/", 1)[-1] else (image, "")
    for entry in entries:
        if entry["name"] == name:
            name, tag = entry.get("newName", name), entry.get("newTag", tag)
            break
    return f"{name}:{tag}" if tag else name


def pod_spec(obj: dict) -> dict | None:
    return obj["spec"]["template"]["spec"] if obj["kind"] in POD_TEMPLATE_KINDS else None


def containers(obj: dict) -> list[dict]:
    spec = pod_spec(obj)
    return [] if spec is None else spec.get("initContainers", []) + spec["containers"]


def key(obj: dict) -> tuple[str, str, str]:
    return obj["kind"], obj["metadata"].get("namespace", ""), obj["metadata"]["name"]


@pytest.fixture(scope="module")
def objects() -> list[dict]:
    return render()


@pytest.fixture(scope="module")
def by_key(objects: list[dict]) -> dict[tuple[str, str, str], dict]:
    found = {key(obj): obj for obj in objects}
    assert len(found) == len(objects), "two objects share a kind, namespace and name"
    return found


@pytest.fixture(scope="module")
def config(by_key: dict) -> dict[str, str]:
    return by_key["ConfigMap", "anneal", "anneal-config"]["data"]


def restricted_violations(spec: dict) -> list[str]:
    """What in a pod spec the "restricted" Pod Security Standard (and this project) refuses, one line each.

    Beyond the standard: every container also needs CPU and memory requests and limits.
    """
    problems = []
    pod = spec.get("securityContext", {})
    for flag in ("hostNetwork", "hostPID", "hostIPC"):
        if spec.get(flag):
            problems.append(f"pod: {flag}")
    for volume in spec.get("volumes", []):
        if not set(volume) - {"name"} <= RESTRICTED_VOLUMES:
            problems.append(f"volume {volume['name']}: type {sorted(set(volume) - {'name'})}")
    for container in spec.get("initContainers", []) + spec["containers"]:
        where = f"container {container['name']}"
        context = container.get("securityContext", {})
        if not context.get("runAsNonRoot", pod.get("runAsNonRoot")):
            problems.append(f"{where}: runAsNonRoot is not set")
        if context.get("runAsUser", pod.get("runAsUser")) in (None, 0):
            # The image names its user (`USER anneal`), which the kubelet cannot check as non-root: give the uid.
            problems.append(f"{where}: no non-zero runAsUser")
        if context.get("allowPrivilegeEscalation") is not False:
            problems.append(f"{where}: allowPrivilegeEscalation is not false")
        if context.get("privileged"):
            problems.append(f"{where}: privileged")
        capabilities = context.get("capabilities", {})
        if capabilities.get("drop") != ["ALL"] or capabilities.get("add"):
            problems.append(f"{where}: capabilities are not drop [ALL] and add none")
        seccomp = context.get("seccompProfile", pod.get("seccompProfile", {})).get("type")
        if seccomp not in ("RuntimeDefault", "Localhost"):
            problems.append(f"{where}: seccompProfile is {seccomp}")
        resources = container.get("resources", {})
        for kind in ("requests", "limits"):
            if not {"cpu", "memory"} <= set(resources.get(kind, {})):
                problems.append(f"{where}: no cpu and memory {kind}")
    return problems


def test_kustomize_renders_what_the_test_renders(objects: list[dict]) -> None:
    if shutil.which("kubectl") is None:
        pytest.skip("kubectl is not installed: the other tests use the test's own rendering")
    result = subprocess.run(
        ["kubectl", "kustomize", str(MANIFESTS)], capture_output=True, text=True, timeout=60, check=False
    )
    assert result.returncode == 0, result.stderr
    rendered = [obj for obj in yaml.safe_load_all(result.stdout) if obj]
    assert {key(obj): obj for obj in rendered} == {key(obj): obj for obj in objects}


def test_every_object_passes_the_kubernetes_schema(objects: list[dict]) -> None:
    errors = []
    for obj in objects:
        try:
            kubernetes_validate.validate(obj, KUBERNETES_VERSION, strict=True)
        except kubernetes_validate.ValidationError as error:
            errors.append(f"{key(obj)} at {'.'.join(map(str, error.path))}: {error.message}")
    assert errors == []


def test_the_schema_check_refuses_a_misplaced_field(objects: list[dict]) -> None:
    deployment = copy.deepcopy(next(obj for obj in objects if obj["kind"] == "Deployment"))
    deployment["spec"]["template"]["spec"]["containers"][0]["limits"] = {"cpu": "1"}  # belongs in resources
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(deployment, KUBERNETES_VERSION, strict=True)


def test_every_container_is_limited_unprivileged_and_on_a_read_only_root(objects: list[dict]) -> None:
    problems = []
    for obj in objects:
        spec = pod_spec(obj)
        if spec is None:
            continue
        problems += [f"{key(obj)} {problem}" for problem in restricted_violations(spec)]
        for container in containers(obj):
            if container["securityContext"].get("readOnlyRootFilesystem") is not True:
                problems.append(f"{key(obj)} container {container['name']}: a writable root filesystem")
    assert problems == []


def test_both_namespaces_enforce_the_restricted_standard_and_admit_the_backends_pods(by_key: dict) -> None:
    for namespace in ("anneal", SANDBOX_NAMESPACE):
        labels = by_key["Namespace", "", namespace]["metadata"]["labels"]
        assert labels["pod-security.kubernetes.io/enforce"] == "restricted"
    request = RunRequest(
        language="python", code="print(1)", limits=Limits(wall_s=3, memory_mb=128, tmpfs_mb=8)
    )
    for profile in ("", "profiles/anneal.json"):
        pod = backend.pod_for(
            request, name="x", namespace=SANDBOX_NAMESPACE, image="i:1", seccomp_profile=profile
        )
        assert restricted_violations(ApiClient().sanitize_for_serialization(pod)["spec"]) == []


def test_the_commands_are_docker_composes(objects: list[dict]) -> None:
    services = yaml.safe_load((ROOT / "docker-compose.yml").read_text())["services"]
    anneal = {name: s["command"] for name, s in services.items() if s.get("image") == "anneal:latest"}
    seen = set()
    for obj in objects:
        for container in containers(obj):
            name = container["name"]
            assert name in anneal, f"{key(obj)} runs {name!r}, which docker-compose.yml has no service for"
            assert container["command"] == anneal[name], f"{key(obj)} container {name}"
            seen.add(name)
    assert seen == set(anneal), f"compose services with no container here: {sorted(set(anneal) - seen)}"


def test_the_celery_workers_are_told_their_node_names_for_the_ping_probe(objects: list[dict]) -> None:
    for obj in objects:
        for container in containers(obj):
            command = container["command"]
            if command[:4] != ["celery", "-A", "workers.celery_app", "worker"]:
                continue
            node = command[command.index("-n") + 1].removesuffix("@%h")
            assert {"name": "CELERY_NODE", "value": node} in container["env"], container["name"]
            probe = " ".join(container["readinessProbe"]["exec"]["command"])
            assert "inspect ping" in probe and "$CELERY_NODE@$HOSTNAME" in probe, container["name"]


def test_web_probes_ask_healthz_with_a_host_django_accepts(objects: list[dict], config: dict) -> None:
    allowed = config["ALLOWED_HOSTS"].split(",")
    probed = 0
    for obj in objects:
        for container in containers(obj):
            if container["command"][0] != "daphne":
                continue
            for probe in ("startupProbe", "readinessProbe", "livenessProbe"):
                get = container[probe]["httpGet"]
                assert resolve(get["path"]).url_name == "healthz"
                (host,) = [h["value"] for h in get["httpHeaders"] if h["name"] == "Host"]
                assert host in allowed, f"{container['name']} {probe}: Host {host} is not in ALLOWED_HOSTS"
                probed += 1
    assert probed == 3, "web's Daphne, three probes"


def test_the_secret_holds_placeholders_only(by_key: dict, config: dict) -> None:
    secrets = [obj for k, obj in by_key.items() if k[0] == "Secret"]
    assert [secret["metadata"]["name"] for secret in secrets] == ["anneal-secrets"]
    (secret,) = secrets
    assert "data" not in secret, "base64 hides what a value is: the template keeps plain placeholders"
    assert set(secret["stringData"]) == {"SECRET_KEY", "DATABASE_URL", "REDIS_URL"}
    for name, value in secret["stringData"].items():
        assert PLACEHOLDER in value, f"{name} must be a placeholder containing {PLACEHOLDER}"
    assert secret["stringData"]["DATABASE_URL"].startswith("postgres://")
    assert secret["stringData"]["REDIS_URL"].startswith("redis://")
    assert not set(config) & set(secret["stringData"]), "a setting is in the ConfigMap and the Secret"


def test_every_setting_is_one_the_code_reads(config: dict, by_key: dict) -> None:
    readers = ROOT / "platform" / "anneal" / "settings.py", ROOT / "sandboxes" / "registry.py"
    source = "".join(path.read_text() for path in readers)
    names = set(config) | set(by_key["Secret", "anneal", "anneal-secrets"]["stringData"])
    assert [name for name in sorted(names) if f'"{name}"' not in source] == []
    assert config["ANNEAL_K8S_NAMESPACE"] == SANDBOX_NAMESPACE
    assert (config["SANDBOX_BACKEND"], config["SANDBOX_EXECUTION"]) == ("kubernetes", "remote")


def test_the_sandbox_policy_is_the_one_the_backend_creates(by_key: dict) -> None:
    manifest = by_key["NetworkPolicy", SANDBOX_NAMESPACE, backend.POLICY_NAME]
    built = ApiClient().sanitize_for_serialization(backend.network_policy(namespace=SANDBOX_NAMESPACE))
    assert manifest == built
    selected = {
        k: v for k, v in backend.LABELS.items() if k in manifest["spec"]["podSelector"]["matchLabels"]
    }
    assert selected == manifest["spec"]["podSelector"]["matchLabels"], "the backend's pods carry the label"
    default = by_key["NetworkPolicy", SANDBOX_NAMESPACE, "anneal-sandbox-default-deny"]["spec"]
    assert default == {"podSelector": {}, "policyTypes": ["Ingress", "Egress"]}


def backend_grants() -> set[tuple[str, str, str]]:
    """(API group, resource, verb) for every namespaced call in sandboxes/backends/kubernetes.py."""
    verbs = {"create": "create", "read": "get", "list": "list", "delete": "delete", "patch": "patch"}
    groups = {"pods": "", "networkpolicies": "networking.k8s.io"}
    calls = re.findall(r"\.(\w+?)_namespaced_(\w+?)(_status|_log)?\(", Path(backend.__file__).read_text())
    grants = set()
    for verb, kind, sub in calls:
        plural = kind.replace("_", "")
        plural = plural[:-1] + "ies" if plural.endswith("y") else plural + "s"
        grants.add((groups[plural], plural + sub.replace("_", "/"), verbs[verb]))
    return grants


def test_the_sandbox_worker_may_do_what_the_backend_calls_in_the_sandbox_namespace_only(
    objects: list,
) -> None:
    assert not [key(obj) for obj in objects if obj["kind"] in ("ClusterRole", "ClusterRoleBinding")]
    roles = [obj for obj in objects if obj["kind"] == "Role"]
    assert [key(role) for role in roles] == [("Role", SANDBOX_NAMESPACE, "anneal-sandbox-runner")]
    granted = {
        (group, resource, verb)
        for rule in roles[0]["rules"]
        for group in rule["apiGroups"]
        for resource in rule["resources"]
        for verb in rule["verbs"]
    }
    assert ("", "pods", "create") in backend_grants(), "the scan of the backend's calls finds them"
    assert granted == backend_grants()
    (binding,) = [obj for obj in objects if obj["kind"] == "RoleBinding"]
    assert binding["metadata"]["namespace"] == SANDBOX_NAMESPACE
    assert binding["roleRef"]["name"] == "anneal-sandbox-runner"
    assert binding["subjects"] == [
        {"kind": "ServiceAccount", "name": "anneal-sandbox-worker", "namespace": "anneal"}
    ]
    tokens = {
        obj["metadata"]["name"]: pod_spec(obj).get("serviceAccountName")
        for obj in objects
        if pod_spec(obj) is not None and pod_spec(obj).get("automountServiceAccountToken", True)
    }
    assert tokens == {"anneal-sandbox-worker": "anneal-sandbox-worker"}, "only it holds an API token"


def test_beat_stays_single_and_web_survives_a_drain(by_key: dict) -> None:
    spec = by_key["Deployment", "anneal", "anneal-beat"]["spec"]
    assert (spec["replicas"], spec["strategy"]["type"]) == (1, "Recreate")
    pdb = by_key["PodDisruptionBudget", "anneal", "anneal-web"]["spec"]
    web = by_key["Deployment", "anneal", "anneal-web"]["spec"]
    assert pdb["selector"] == web["selector"] and pdb["minAvailable"] < web["replicas"]


def test_only_the_gpu_worker_asks_for_gpus_one_per_job_it_runs_at_once(objects: list[dict]) -> None:
    def gpus(obj: dict) -> int:
        return sum(int(c["resources"]["limits"].get("nvidia.com/gpu", 0)) for c in containers(obj))

    assert {obj["metadata"]["name"]: gpus(obj) for obj in objects if gpus(obj)} == {"anneal-gpu-worker": 1}
    (gpu,) = [obj for obj in objects if gpus(obj)]
    (container,) = containers(gpu)
    assert container["command"][container["command"].index("-c") + 1] == "1"
    spec = pod_spec(gpu)
    assert spec["nodeSelector"] and any(t["key"] == "nvidia.com/gpu" for t in spec["tolerations"])


def test_replicas_record_their_pods_address_and_only_web_reaches_them(by_key: dict) -> None:
    (serve,) = containers(by_key["Deployment", "anneal", "anneal-serve"])
    env = {item["name"]: item for item in serve["env"]}
    assert env["ANNEAL_SERVE_BIND_HOST"]["value"] == "0.0.0.0"
    assert env["ANNEAL_SERVE_ADVERTISE_HOST"]["valueFrom"] == {"fieldRef": {"fieldPath": "status.podIP"}}
    policy = by_key["NetworkPolicy", "anneal", "anneal-allow-replicas"]["spec"]
    assert policy["podSelector"] == {"matchLabels": {"app.kubernetes.io/component": "serve"}}
    (rule,) = policy["ingress"]
    assert rule["from"] == [{"podSelector": {"matchLabels": {"app.kubernetes.io/component": "web"}}}]
    http = by_key["NetworkPolicy", "anneal", "anneal-allow-http"]["spec"]
    assert http["podSelector"] == {"matchLabels": {"app.kubernetes.io/component": "web"}}
