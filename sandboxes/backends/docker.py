"""The docker backend: containers through the `docker` SDK, against any engine that speaks the Docker API.

Production uses the Docker Engine; here it is Podman's Docker API service (scripts/sandbox-image.sh starts it
and builds the image from Debian's packages). Each container runs the same fork server as a warm bubblewrap
sandbox (fork_server.py) as its pid 1, connected to this process through a unix socket in a directory
bind-mounted into the container: the socket carries the run's descriptors (stdin, the stdout and stderr
pipes), so a warm run costs a fork inside a running container, not a container start (~0.65 s here) or an
exec (~160 ms).

Containers: no network, read-only root, a size-capped tmpfs at /tmp, uid 65534, every capability dropped,
no-new-privileges, the seccomp profile of seccomp.py (no new namespaces, ptrace, mounts, keyrings, BPF …) in
place of the engine's default, a private IPC namespace, memory and pids capped by the engine at the run's
limits (so all of a run's processes together stay within its memory_mb, plus the tmpfs and the fork
server), and per process by rlimits from the fork server; labelled with the creating host and process. A
warm container serves only runs with the limits it was made for; the fork server empties its /tmp and its
System V IPC objects and kills every process after each run. Containers end when their creator's socket
closes; `reap_orphans` removes any whose creator is gone (run whenever a backend is built).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
import os
import shutil
import socket
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from sandboxes.backends.base import SandboxBackend
from sandboxes.backends.seccomp import docker_profile
from sandboxes.backends.warm_pool import SandboxStartError, WarmPool, WarmSandbox
from sandboxes.preload import fork_server_source
from sandboxes.profiles import PROFILES, PYTHON, image_for
from sandboxes.types import Limits, RunRequest, RunResult, Status

DEFAULT_URL = "unix:///run/anneal-podman.sock"
DEFAULT_IMAGE = "localhost/anneal-sandbox:bookworm"
LABEL = "anneal.sandbox"
SOCKET_MOUNT = "/run/anneal"
SOCKET_DIR_PREFIX = "anneal-sandbox-"  # + creator pid: the host directory holding a container's socket
# The fork server's own share of a container's memory cap, on top of the run's memory_mb and its tmpfs.
FORK_SERVER_MEMORY_MB = 32
START_TIMEOUT_S = 30.0
PROFILES_TTL_S = 60.0  # how long the list of profiles with an image is kept before the engine is asked again
MAIN_FILE = {"python": "main.py", "shell": "main.sh"}


def _start_time(pid: int) -> str:
    """A process's start time (clock ticks since boot): tells a live creator from a reused pid."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[19]
    except (OSError, IndexError):
        return ""


def _owner_labels() -> dict[str, str]:
    return {
        LABEL: "1",
        f"{LABEL}.host": socket.gethostname(),
        f"{LABEL}.pid": str(os.getpid()),
        f"{LABEL}.start": _start_time(os.getpid()),
    }


def container_memory_mb(limits: Limits) -> int:
    """A container's memory cap: the run's memory_mb for all its processes, its tmpfs and the fork server."""
    return limits.memory_mb + limits.tmpfs_mb + FORK_SERVER_MEMORY_MB


def seccomp_option(engine_is_podman: bool) -> str:
    """HostConfig.SecurityOpt's seccomp entry: the Docker Engine takes the profile itself, Podman's Docker API
    a path on the engine's host (this one: the socket is local), written once per profile content."""
    text = json.dumps(docker_profile(), sort_keys=True)
    if not engine_is_podman:
        return f"seccomp={text}"
    path = (
        Path(tempfile.gettempdir()) / f"anneal-seccomp-{hashlib.sha256(text.encode()).hexdigest()[:16]}.json"
    )
    if not path.exists():
        partial = path.with_name(f"{path.name}.{os.getpid()}.tmp")
        partial.write_text(text)
        partial.replace(path)  # atomic: another process writing the same profile is harmless
    return f"seccomp={path}"


class DockerLauncher:
    """One container running the fork server, reached through a unix socket bind-mounted into it."""

    def __init__(self, *, backend: DockerBackend, limits: Limits, image: str) -> None:
        """The container (of `image`) is made for `limits`' tmpfs_mb, pids and memory_mb: runs asking for
        others need another container."""
        self._backend = backend
        self.image = image
        self.limits = limits
        self.tmpfs_mb = limits.tmpfs_mb
        self.pids = limits.pids
        self.pid: str = ""
        self._container: Any = None  # a docker SDK Container (the SDK has no types)
        self._dir: str | None = None
        self._error = ""

    def start(self) -> socket.socket:
        import docker.errors

        self._dir = tempfile.mkdtemp(prefix=f"{SOCKET_DIR_PREFIX}{os.getpid()}-")
        os.chmod(self._dir, 0o755)
        path = os.path.join(self._dir, "sock")
        listener = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        try:
            listener.bind(path)
            os.chmod(path, 0o666)  # the container's uid 65534 connects
            listener.listen(1)
            listener.settimeout(START_TIMEOUT_S)
            try:
                security = ["no-new-privileges", self._backend.seccomp_option()]
            except Exception as exc:  # noqa: BLE001 - an engine that stopped answering, whatever the cause
                raise SandboxStartError(f"the container engine did not answer: {exc}") from exc
            try:
                self._container = self._backend.client().containers.create(
                    self.image,
                    [
                        "/usr/bin/python3",
                        "-E",
                        "-s",
                        "-S",
                        "-B",
                        "-c",
                        fork_server_source(),
                        f"unix:{SOCKET_MOUNT}/sock",
                    ],
                    auto_remove=True,
                    network_mode="none",
                    read_only=True,
                    user="65534:65534",
                    working_dir="/tmp",
                    # Engines add writable tmpfs mounts of their own to a read-only root (Podman: /var/tmp,
                    # /dev/shm, /dev/mqueue): /tmp is the only writable place a run gets.
                    tmpfs={"/tmp": f"size={self.tmpfs_mb}m,mode=1777", "/var/tmp": "ro,size=4k"},
                    ipc_mode="none",  # a private IPC namespace (and no /dev/shm)
                    volumes={self._dir: {"bind": SOCKET_MOUNT, "mode": "rw"}},
                    mem_limit=f"{container_memory_mb(self.limits)}m",
                    memswap_limit=f"{container_memory_mb(self.limits)}m",  # no swap on top
                    pids_limit=self.pids + 1,  # the program's processes and the fork server
                    cap_drop=["ALL"],
                    security_opt=security,
                    hostname="sandbox",
                    environment={"PATH": "/usr/bin:/bin"},
                    labels=_owner_labels(),
                )
                self._container.start()  # created first, so a failed start still leaves one to remove
            except docker.errors.DockerException as exc:
                raise SandboxStartError(f"the container engine refused the sandbox: {exc}") from exc
            self.pid = self._container.short_id
            try:
                conn, _ = listener.accept()
            except OSError as exc:
                self._error = f"the fork server did not connect: {exc}"
                raise SandboxStartError(f"{self._error}; {self.diagnostics()}") from exc
        except BaseException:
            self.close()
            raise
        finally:
            listener.close()
            try:
                os.unlink(path)  # nothing else may connect: the program runs as the same uid as the server
            except OSError:
                pass
        return conn

    def set_limits(self, limits: Limits) -> None:
        if (limits.pids, limits.memory_mb) != (self.pids, self.limits.memory_mb):
            raise OSError(
                f"this container caps processes at {self.pids} and memory at {self.limits.memory_mb} MB, "
                f"the run asks for {limits.pids} and {limits.memory_mb} MB"
            )

    def oom_kills(self) -> int:
        return 0  # the fork server reads the container's own counter and reports it with each run

    def only_own_tasks_left(self) -> bool:
        return True  # the fork server kills and reaps every other process before it reports a run

    def close(self) -> None:
        if self._container is not None:
            try:
                self._container.remove(force=True)
            except Exception:  # noqa: BLE001 - already gone (auto_remove) or the engine is down
                pass
            self._container = None
        if self._dir is not None:
            shutil.rmtree(self._dir, ignore_errors=True)
            self._dir = None

    def diagnostics(self) -> str:
        if self._container is None:
            return self._error or "no container"
        try:
            return self._container.logs(tail=20).decode(errors="replace").strip()[-500:] or self._error
        except Exception as exc:  # noqa: BLE001
            return f"{self._error}; no logs: {exc}"


class DockerBackend(SandboxBackend):
    name = "docker"

    def __init__(
        self,
        *,
        base_url: str = DEFAULT_URL,
        image: str = DEFAULT_IMAGE,
        workers: int = 2,
        pool_size: int = 0,
        recycle_after: int = 200,
    ) -> None:
        """`base_url`: the engine's Docker API (unix:// or tcp://). pool_size > 0 keeps warm containers for
        requests with the default tmpfs size and process limit; the others get a container of their own.
        """
        self.base_url = base_url
        self.image = image
        self.workers = max(workers, pool_size)
        self._client: Any = None  # a docker.DockerClient, made on first use
        self._seccomp_option = ""
        self.defaults = Limits()
        self.pool_size = pool_size
        self.recycle_after = recycle_after
        # A warm pool per profile (each profile has an image of its own), made on the profile's first run; a
        # pool's containers are made for the defaults, with the profile's memory floor (profile_limits).
        self.pools: dict[str, WarmPool] = {}
        self._pools_lock = threading.Lock()
        self.pool: WarmPool | None = self._pool_for(PYTHON) if pool_size > 0 else None
        self._profiles: list[str] = []
        self._profiles_at = -math.inf

    def profile_limits(self, profile: str) -> Limits:
        """The limits a warm container of `profile` is made for."""
        memory_mb = max(self.defaults.memory_mb, PROFILES[profile].memory_mb)
        return dataclasses.replace(self.defaults, memory_mb=memory_mb)

    def _pool_for(self, profile: str) -> WarmPool:
        with self._pools_lock:
            if profile not in self.pools:
                limits, image = self.profile_limits(profile), image_for(profile, self.image)
                self.pools[profile] = WarmPool(
                    make_launcher=lambda: DockerLauncher(backend=self, limits=limits, image=image),
                    size=self.pool_size,
                    recycle_after=self.recycle_after,
                )
            return self.pools[profile]

    def close(self) -> None:
        """Stop every profile's warm containers (runs after this start new ones)."""
        with self._pools_lock:
            pools, self.pools = list(self.pools.values()), {}
        for pool in pools:
            pool.close()
        self.pool = None

    def client(self):
        if self._client is None:
            import docker

            self._client = docker.DockerClient(base_url=self.base_url, timeout=60)
            self.reap_orphans()
        return self._client

    def seccomp_option(self) -> str:
        if not self._seccomp_option:
            components = self.client().version().get("Components") or []
            podman = any("podman" in str(c.get("Name", "")).lower() for c in components)
            self._seccomp_option = seccomp_option(podman)
        return self._seccomp_option

    def engine_problem(self, profile: str = PYTHON) -> str:
        """Why no container of `profile` can run here ("" when one can): the engine's socket or the image is
        missing."""
        try:
            client = self.client()
            client.ping()
        except Exception as exc:  # noqa: BLE001 - any failure to reach the engine reads the same to a user
            self._client = None
            return (
                f"no Docker API at {self.base_url} ({type(exc).__name__}); start one with "
                "`make sandbox-image` (Podman) or point ANNEAL_DOCKER_URL at a Docker Engine"
            )
        import docker.errors

        image = image_for(profile, self.image)
        try:
            client.images.get(image)
        except docker.errors.ImageNotFound:
            return f"image {image} (sandbox profile {profile}) not found; build it with `make sandbox-image`"
        except docker.errors.DockerException as exc:
            return f"could not look up image {image}: {exc}"
        return ""

    def profiles(self) -> list[str]:
        """The profiles whose image the engine holds (looked up at most once a minute)."""
        now = time.monotonic()
        if now - self._profiles_at > PROFILES_TTL_S:
            self._profiles = [name for name in PROFILES if not self.engine_problem(name)]
            self._profiles_at = now
        return list(self._profiles)

    def warm_pools(self) -> dict[str, int]:
        return {profile: pool.size for profile, pool in list(self.pools.items())}

    def run(self, request: RunRequest) -> RunResult:
        main = MAIN_FILE[request.language]
        if main in request.files:
            return RunResult(
                Status.SANDBOX_ERROR, None, "", f"files may not contain {main}: that name holds the code", 0.0
            )
        limits = request.limits
        pooled = self.profile_limits(request.profile)
        if self.pool_size > 0 and (limits.tmpfs_mb, limits.pids, limits.memory_mb) == (
            pooled.tmpfs_mb,
            pooled.pids,
            pooled.memory_mb,
        ):
            return self._pool_for(request.profile).run(request)
        return self.run_cold(request)

    def run_cold(self, request: RunRequest) -> RunResult:
        """A container of its own for this request: started, used once, removed."""
        started = time.monotonic()
        image = image_for(request.profile, self.image)
        launcher = DockerLauncher(backend=self, limits=request.limits, image=image)
        try:
            sandbox = WarmSandbox(launcher=launcher)
        except SandboxStartError as exc:
            problem = self.engine_problem(request.profile) or str(exc)
            return RunResult(Status.SANDBOX_ERROR, None, "", problem, round(time.monotonic() - started, 4))
        try:
            result = sandbox.run(request).result
        finally:
            sandbox.close()
        result.duration_s = round(time.monotonic() - started, 4)
        return result

    def run_many(self, requests: list[RunRequest]) -> list[RunResult]:
        if len(requests) <= 1 or self.workers <= 1:
            return [self.run(request) for request in requests]
        with ThreadPoolExecutor(max_workers=min(self.workers, len(requests))) as pool:
            return list(pool.map(self.run, requests))

    def health(self) -> dict:
        problem = self.engine_problem()
        if problem:
            return {"ok": False, "backend": self.name, "detail": problem}
        result = self.run(RunRequest(language="python", code="print('ok')"))
        ok = result.status == Status.OK and result.stdout.strip() == "ok"
        detail = f"Docker API at {self.base_url}; image {self.image}"
        profiles = [name for name in PROFILES if name == PYTHON or not self.engine_problem(name)]
        detail += f"; profiles {', '.join(profiles)} (an image each: <image>-<profile>)"
        for profile, pool in list(self.pools.items()):
            stats = pool.stats
            detail += (
                f"; {profile} warm pool of {pool.size}: {stats.warm_runs} warm runs, {stats.started} started"
            )
        if not ok:
            detail += f"; test program gave {result.status}: {result.stderr.strip()[-300:]}"
        return {"ok": ok, "backend": self.name, "detail": detail}

    def reap_orphans(self) -> int:
        """Remove sandbox containers made on this host by a process that no longer runs; how many."""
        import docker.errors

        removed = 0
        try:
            containers = self._client.containers.list(all=True, filters={"label": f"{LABEL}=1"})
        except docker.errors.DockerException:
            return 0
        for container in containers:
            labels = container.labels or {}
            if labels.get(f"{LABEL}.host") != socket.gethostname():
                continue  # another host's sandbox: its own reaper decides
            pid = labels.get(f"{LABEL}.pid", "")
            alive = pid.isdigit() and _start_time(int(pid)) == labels.get(f"{LABEL}.start")
            if not alive:
                try:
                    container.remove(force=True)
                    removed += 1
                except docker.errors.DockerException:
                    pass
        for folder in Path(tempfile.gettempdir()).glob(f"{SOCKET_DIR_PREFIX}*-*"):
            pid = folder.name[len(SOCKET_DIR_PREFIX) :].split("-", 1)[0]
            if pid.isdigit() and not Path(f"/proc/{pid}").exists():
                shutil.rmtree(folder, ignore_errors=True)  # a dead creator's socket folder
        return removed
