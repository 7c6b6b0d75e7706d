"""Runs inside a Kubernetes sandbox pod as its only process: one request, then one JSON line, then exit.

Not imported by Anneal: the kubernetes backend puts this file's source in the pod's command
(`python3 -c SOURCE`), so it may use only the standard library. The request comes in the ANNEAL_REQUEST
environment variable (RunRequest.to_dict() as JSON), which is removed before the program starts. The program
runs in a fresh /tmp/work with the sandbox environment, its own session and rlimits (address space, CPU, file
size, no core, and processes when the pod runs as a uid of its own: see POD_UID_MIN in kubernetes.py); the wall
clock and output caps are kept here, and the whole process group is killed at the end. The container's memory
limit holds all of the run's processes together; an OOM kill inside it is reported ("oom_killed").
The last line this prints is `ANNEAL_POD_RESULT {json}`: the RunResult fields the backend reads back from the
pod's log (a pod's log mixes stdout and stderr, so both travel inside the JSON).
"""

import json
import os
import resource
import selectors
import signal
import subprocess
import sys
import time

WORKDIR = os.environ.pop("ANNEAL_WORKDIR", "/tmp/work")  # overridden only by tests running this on a host
ENV = {"PATH": "/usr/local/bin:/usr/bin:/bin", "LANG": "C.UTF-8", "HOME": WORKDIR, "PWD": WORKDIR}
if WORKDIR == "/tmp/work":  # in a pod, whose /tmp is its own emptyDir (not a test running this on a host)
    ENV["SANDBOX_TMP"] = "/tmp"  # the code judge empties it between samples (bwrap.SANDBOX_ENV)
MAIN_FILE = {"python": "main.py", "shell": "main.sh"}
PREFIX = "ANNEAL_POD_RESULT "
POD_UID_MIN = (
    1 << 20
)  # kubernetes.py gives each pod a uid from here up: RLIMIT_NPROC then counts that pod only
OOM_COUNTERS = ("/sys/fs/cgroup/memory.events", "/sys/fs/cgroup/memory/memory.oom_control")


def limit(limits: dict) -> None:
    cpu = int(-(-limits["cpu_s"] // 1))
    resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu + 1))
    resource.setrlimit(resource.RLIMIT_FSIZE, (limits["file_size_mb"] << 20,) * 2)
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    resource.setrlimit(resource.RLIMIT_AS, (limits["memory_mb"] << 20,) * 2)
    if os.getuid() >= POD_UID_MIN:
        nproc = limits["pids"] + 1  # this runner is a process of the same uid
        resource.setrlimit(resource.RLIMIT_NPROC, (nproc, nproc))


def oom_kills() -> int:
    """The kernel's count of processes killed for passing this container's memory limit; 0 when unseen."""
    for path in OOM_COUNTERS:
        try:
            with open(path) as f:
                counts = dict(line.split() for line in f.read().splitlines() if len(line.split()) == 2)
            return int(counts.get("oom_kill", 0))
        except (OSError, ValueError):
            continue
    return 0


def run(request: dict) -> dict:
    limits = request["limits"]
    main = MAIN_FILE[request["language"]]
    os.makedirs(WORKDIR, exist_ok=True)
    for name, content in [*request["files"].items(), (main, request["code"])]:
        path = os.path.join(WORKDIR, name)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w", encoding="utf-8") as f:
            f.write(content)
    argv = (
        ["/usr/bin/python3", "-E", "-s", "-S", "-u", "-B", main] if main == "main.py" else ["/bin/sh", main]
    )
    started = time.monotonic()
    oom_kills_before = oom_kills()
    proc = subprocess.Popen(
        argv,
        cwd=WORKDIR,
        env=ENV,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        start_new_session=True,
        preexec_fn=lambda: limit(limits),  # single-threaded here, so safe
    )
    assert proc.stdin is not None and proc.stdout is not None and proc.stderr is not None  # all PIPE
    try:
        proc.stdin.write(request["stdin"].encode())
        proc.stdin.close()
    except BrokenPipeError:
        pass
    out, err = proc.stdout.fileno(), proc.stderr.fileno()
    buffers = {out: bytearray(), err: bytearray()}
    timed_out = flooded = False
    deadline = started + limits["wall_s"]
    with selectors.DefaultSelector() as selector:
        for fd in buffers:
            selector.register(fd, selectors.EVENT_READ)
        while selector.get_map() and not flooded:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                timed_out = True
                break
            for key, _ in selector.select(remaining):
                chunk = os.read(key.fd, 1 << 16)
                if not chunk:
                    selector.unregister(key.fileobj)
                    continue
                buffers[key.fd] += chunk
                flooded = flooded or len(buffers[key.fd]) > limits["output_bytes"]
    if not (timed_out or flooded):
        try:
            proc.wait(timeout=max(deadline - time.monotonic(), 0.0))
        except subprocess.TimeoutExpired:
            timed_out = True
    try:
        os.killpg(proc.pid, signal.SIGKILL)  # the whole tree: no daemon outlives the run
    except ProcessLookupError:
        pass
    proc.wait()
    return {
        "exit_code": proc.returncode,
        "stdout": bytes(buffers[out]).decode(errors="replace"),
        "stderr": bytes(buffers[err]).decode(errors="replace"),
        "timed_out": timed_out,
        "flooded": flooded,
        "duration_s": round(time.monotonic() - started, 4),
        "oom_killed": oom_kills() > oom_kills_before,
    }


def main() -> None:
    request = json.loads(os.environ.pop("ANNEAL_REQUEST"))
    try:
        report = run(request)
    except OSError as exc:
        report = {"setup_error": f"could not set the run up: {exc}"}
    sys.stdout.write("\n" + PREFIX + json.dumps(report) + "\n")


if __name__ == "__main__":
    main()
