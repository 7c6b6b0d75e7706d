"""The files that deploy and run Anneal: docker-compose.yml, the Makefile, .ci/run, the GPU set, the demo.

Django-free: runs with `-p no:django`.
"""

import os
import re
import shutil
import socket
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
ANNEAL_SERVICES = ("web", "worker", "gpu-worker", "sandbox", "beat")
QUEUES = {"worker": "default", "gpu-worker": "gpu", "sandbox": "sandbox"}
needs_compose = pytest.mark.skipif(
    shutil.which("docker-compose") is None,
    reason="docker-compose is not installed (`scripts/setup-system.sh test` installs it)",
)


@pytest.fixture(scope="module")
def services() -> dict:
    return yaml.safe_load((ROOT / "docker-compose.yml").read_text())["services"]


def compose_config(
    *, secret_key: str | None, tmp_path: Path, overrides: tuple[str, ...] = ()
) -> subprocess.CompletedProcess:
    env = {key: value for key, value in os.environ.items() if key != "SECRET_KEY"}
    if secret_key is not None:
        env["SECRET_KEY"] = secret_key
    # An empty --env-file: a developer's own .env must not decide the outcome.
    (tmp_path / "empty.env").write_text("")
    command = [
        "docker-compose",
        "--env-file",
        str(tmp_path / "empty.env"),
        "-f",
        "docker-compose.yml",
        *[arg for override in overrides for arg in ("-f", override)],
        "config",
        "-q",
    ]
    return subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=60)


def test_compose_runs_the_production_topology(services: dict) -> None:
    assert set(ANNEAL_SERVICES) | {"postgres", "redis"} <= set(services)
    assert services["postgres"]["image"] == "postgres:15"
    assert services["redis"]["image"] == "redis:7"


def test_every_anneal_service_runs_the_one_image_once_postgres_and_redis_are_healthy(services: dict) -> None:
    for name in (*ANNEAL_SERVICES, "migrate"):
        service = services[name]
        assert (service["image"], service["build"]) == ("anneal:latest", "."), name
        assert service["depends_on"]["postgres"] == {"condition": "service_healthy"}, name
        assert service["depends_on"]["redis"] == {"condition": "service_healthy"}, name
    for name in ANNEAL_SERVICES:
        assert services[name]["depends_on"]["migrate"] == {"condition": "service_completed_successfully"}


def test_databases_and_long_running_processes_have_healthchecks(services: dict) -> None:
    assert "pg_isready" in " ".join(services["postgres"]["healthcheck"]["test"])
    assert services["redis"]["healthcheck"]["test"] == ["CMD", "redis-cli", "ping"]
    assert "/healthz" in " ".join(services["web"]["healthcheck"]["test"])
    for name in QUEUES:
        assert "inspect ping" in " ".join(services[name]["healthcheck"]["test"]), name


def test_each_worker_consumes_its_own_queue(services: dict) -> None:
    for name, queue in QUEUES.items():
        command = services[name]["command"]
        assert command[:4] == ["celery", "-A", "workers.celery_app", "worker"], name
        assert command[command.index("-Q") + 1] == queue, name
    assert services["beat"]["command"][:4] == ["celery", "-A", "workers.celery_app", "beat"]
    assert services["web"]["command"][0] == "daphne"
    assert services["web"]["command"][-1] == "anneal.asgi:application"


def test_the_gpu_worker_alone_reserves_a_gpu_on_a_gpu_host_and_takes_one_job_at_a_time(
    services: dict,
) -> None:
    gpu_host = yaml.safe_load((ROOT / "deploy/compose/gpu.yml").read_text())["services"]
    devices = gpu_host["gpu-worker"]["deploy"]["resources"]["reservations"]["devices"]
    assert devices == [{"driver": "nvidia", "count": 1, "capabilities": ["gpu"]}]
    assert list(gpu_host) == ["gpu-worker"]
    # Without the GPU file (a CPU-only host, `make compose-up` here) the gpu queue still has its worker.
    assert not [name for name, service in services.items() if "deploy" in service]
    command = services["gpu-worker"]["command"]
    assert command[command.index("-c") + 1] == "1"
    assert command[command.index("--prefetch-multiplier") + 1] == "1"


def test_the_workers_and_sandbox_hosts_scale_out(services: dict) -> None:
    """`docker compose up --scale sandbox=2 --scale worker=2`: no fixed name or host port in the way, and each
    worker's Celery name is unique per container (%h, its hostname)."""
    for name, service in services.items():
        assert "container_name" not in service, name
        if name != "web":
            assert "ports" not in service, f"{name} publishes a host port: a second one could not start"
    for name in ("worker", "sandbox", "gpu-worker"):
        command = services[name]["command"]
        assert command[command.index("-n") + 1].endswith("@%h"), name


def test_settings_reach_every_anneal_service_through_the_environment(services: dict) -> None:
    for name in ANNEAL_SERVICES:
        env = services[name]["environment"]
        assert env["DATABASE_URL"].startswith("postgres://") and "@postgres:5432/" in env["DATABASE_URL"]
        assert env["REDIS_URL"] == "redis://redis:6379/0"
        assert env["SECRET_KEY"].startswith("${SECRET_KEY:?"), "a deployment must choose its own key"
        assert env["DEBUG"] == "false"
        assert (env["SANDBOX_BACKEND"], env["SANDBOX_EXECUTION"]) == ("bwrap", "remote")
        assert {"ANNEAL_DATA_DIR", "ANNEAL_BASE_URL", "ALLOWED_HOSTS"} <= set(env)


@needs_compose
def test_docker_compose_accepts_the_file(tmp_path: Path) -> None:
    result = compose_config(secret_key="a-long-random-string", tmp_path=tmp_path)
    assert result.returncode == 0, result.stderr


@needs_compose
@pytest.mark.parametrize("override", ["deploy/compose/gpu.yml", "deploy/compose/local.yml"])
def test_docker_compose_accepts_the_file_with_each_override(tmp_path: Path, override: str) -> None:
    result = compose_config(secret_key="a-long-random-string", tmp_path=tmp_path, overrides=(override,))
    assert result.returncode == 0, result.stderr


@needs_compose
def test_docker_compose_refuses_to_run_without_a_secret_key(tmp_path: Path) -> None:
    result = compose_config(secret_key=None, tmp_path=tmp_path)
    assert result.returncode != 0
    assert "set SECRET_KEY" in result.stderr


def test_the_image_leaves_local_state_out_of_the_build_context() -> None:
    ignored = (ROOT / ".dockerignore").read_text().split()
    assert {".git", ".venv", "var"} <= set(ignored)
    dockerfile = (ROOT / "Dockerfile").read_text()
    assert dockerfile.startswith("# ") and "ARG BASE=python:3.11-slim-bookworm\nFROM ${BASE}" in dockerfile
    assert re.search(r"^USER anneal$", dockerfile, re.MULTILINE), "the processes must not run as root"


def test_ci_runs_make_test() -> None:
    ci = ROOT / ".ci" / "run"
    assert os.access(ci, os.X_OK)
    lines = [line.strip() for line in ci.read_text().splitlines()]
    assert lines[0] == "#!/usr/bin/env bash"
    assert "set -euo pipefail" in lines
    assert "make test" in lines


@pytest.mark.parametrize(
    ("target", "expected"),
    [
        ("demo", ".venv/bin/python scripts/demo.py"),
        ("run", ".venv/bin/python scripts/demo.py --no-seed"),
        ("test", ".venv/bin/pytest tests"),
        ("lint", "ruff format --check"),
        ("gpu-resolve", "requirements/gpu.txt"),
        ("compose-up", "scripts/compose-up.sh up"),
        ("compose-smoke", "scripts/compose-up.sh smoke"),
        ("compose-down", "scripts/compose-up.sh down"),
    ],
)
def test_make_targets_run_what_the_readme_says(target: str, expected: str) -> None:
    result = subprocess.run(["make", "-n", target], cwd=ROOT, capture_output=True, text=True, timeout=30)
    assert result.returncode == 0, result.stderr
    assert expected in result.stdout


def _pins(lines: list[str]) -> dict[str, str]:
    return {re.split(r"[=<>~!\[ ]", line, maxsplit=1)[0].lower(): line for line in lines}


def test_the_gpu_set_repeats_pyproject_pins_except_those_vllm_needs() -> None:
    base = _pins(tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"])
    text = (ROOT / "requirements" / "gpu.txt").read_text()
    gpu = _pins([line.strip() for line in text.splitlines() if line.strip() and not line.startswith("#")])
    assert all("==" in requirement for requirement in gpu.values()), "every package of the GPU set is pinned"
    assert gpu["vllm"] == "vllm==0.33.0"
    assert gpu["torch"] == "torch==2.14.0"  # vLLM 0.33.0 requires exactly this
    vllm_needs = {"vllm", "torch", "transformers"}
    assert {k: v for k, v in gpu.items() if k not in vllm_needs} == {
        k: v for k, v in base.items() if k not in vllm_needs
    }


def run_demo(*, port: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "demo.py")],
        env={**os.environ, "PORT": port},
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_demo_names_a_taken_port_and_starts_nothing() -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        result = run_demo(port=str(port))
    assert result.returncode == 2
    assert f"Port {port} on 127.0.0.1 is taken" in result.stderr
    assert f"PORT={port + 1} make demo" in result.stderr
    assert result.stdout == "", "nothing was started, so no process printed anything"


def test_demo_rejects_a_port_that_is_not_a_number() -> None:
    result = run_demo(port="eighty")
    assert result.returncode == 2
    assert "PORT='eighty': expected a TCP port number" in result.stderr
