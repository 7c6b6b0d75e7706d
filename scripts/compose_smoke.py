"""The whole path through a running cluster (`make compose-smoke`, after `make compose-up`): a dataset uploaded,
an exact-answer verifier and a sandboxed python_tests verifier, a short job trained to the end, its checkpoint
deployed behind the regression gate, and one /v1 completion metered. Prints each stage's time; exits 1 naming
the stage that failed.

    python scripts/compose_smoke.py --url http://127.0.0.1:8000 --token TOKEN [--fault STAGE=COMMAND]

A fault drill on the cluster: `--fault job="podman restart anneal_redis_1"` runs the command once the job has
trained a step, `--fault serving="podman restart anneal_serve_1"` once the deployment is ready; the smoke must
pass all the same, the job in its first attempt, the completion (retried while it answers 503) metered once.
`--fault upload="podman restart anneal_web_1"` first sends a 20 MB upload and runs the command half-way through
its body: the upload must be refused cleanly (the connection drops, no upload appears) or taken whole (its
ingest reads every row), and the same file uploaded again afterwards must be taken whole.
"""

import argparse
import json
import subprocess
import sys
import time

import httpx

ROWS = [
    {"prompt": f"{a}+{b}=", "answer": str(a + b), "tests": [f"assert result == {a + b}"]}
    for a, b in [(12, 45), (33, 21), (70, 19), (41, 8), (25, 25), (60, 13)]
]
# Short, and a learning rate so small the checkpoint answers as its base model: the gate passes.
PARAMS = {"max_steps": 4, "num_generations": 2, "prompts_per_step": 2, "max_completion_length": 4}
PARAMS |= {"save_steps": 4, "learning_rate": 1e-9, "seed": 1}


BIG_ROWS = 20_000  # about 1 KB a row: 20 MB
CHUNK = 256 * 1024
BOUNDARY = "anneal-smoke-boundary"


class SmokeFailed(Exception):
    pass


def wait(fetch, done, *, timeout_s: float, what: str):
    """fetch() until done(its value); a fetch that fails (the API down for a fault drill) is tried again."""
    deadline = time.monotonic() + timeout_s
    value = None
    while time.monotonic() < deadline:
        try:
            value = fetch()
            if done(value):
                return value
        except (httpx.HTTPError, ValueError) as exc:
            value = f"{type(exc).__name__}: {exc}"
        time.sleep(1)
    raise SmokeFailed(
        f"{what} did not happen in {timeout_s:.0f} s; last seen: {json.dumps(value, default=str)[:500]}"
    )


def settle(api: httpx.Client, path: str, *, ended: tuple[str, ...], timeout_s: float, what: str) -> dict:
    """GET `path` until its state is one of `ended`; SmokeFailed unless it is the first of them."""
    value = wait(lambda: api.get(path).json(), lambda v: v["state"] in ended, timeout_s=timeout_s, what=what)
    if value["state"] != ended[0]:
        detail = value.get("error") or value.get("errors")
        raise SmokeFailed(f"{what} ended {value['state']}: {detail}")
    return value


def expect(response: httpx.Response, status: int, what: str) -> dict:
    if response.status_code != status:
        raise SmokeFailed(f"{what}: HTTP {response.status_code}: {response.text[:500]}")
    return response.json()


def inject(faults: dict[str, str], stage: str) -> None:
    if stage in faults:
        print(f"  fault at {stage}: {faults[stage]}", flush=True)
        subprocess.run(faults[stage], shell=True, check=True, timeout=120)


def big_dataset(rows: int = BIG_ROWS) -> bytes:
    """JSONL sums of about 1 KB a row."""
    pad = "x" * 1000
    return b"".join(
        json.dumps({"prompt": f"{n}+{n % 7}=", "answer": str(n + n % 7), "note": pad}).encode() + b"\n"
        for n in range(rows)
    )


def upload_form(name: str, data: bytes) -> bytes:
    """The upload API's multipart body (a dataset name and a file), to stream with Content-Length set."""
    head = (
        f'--{BOUNDARY}\r\nContent-Disposition: form-data; name="name"\r\n\r\n{name}\r\n'
        f'--{BOUNDARY}\r\nContent-Disposition: form-data; name="file"; filename="big.jsonl"\r\n'
        "Content-Type: application/octet-stream\r\n\r\n"
    ).encode()
    return head + data + f"\r\n--{BOUNDARY}--\r\n".encode()


def upload_cut(url: str, token: str, body: bytes, faults: dict[str, str]) -> str:
    """POST the form, streaming it, with the upload fault injected half-way through the body; what came back."""

    pending = dict(faults)

    def stream():
        for start in range(0, len(body), CHUNK):
            if start >= len(body) // 2 and "upload" in pending:
                inject(pending, "upload")
                del pending["upload"]  # once
            yield body[start : start + CHUNK]

    headers = {
        "Authorization": f"Bearer {token}",
        "Content-Type": f"multipart/form-data; boundary={BOUNDARY}",
        "Content-Length": str(len(body)),
    }
    try:
        # A write stalled for 30 s is a dropped connection: Podman's port forwarder keeps the client's socket
        # open after the container behind it is gone (a reverse proxy would answer 502 at once).
        timeout = httpx.Timeout(180, write=30)
        response = httpx.post(
            f"{url}/api/v1/datasets/uploads", content=stream(), headers=headers, timeout=timeout
        )
    except (httpx.HTTPError, OSError) as exc:
        return f"dropped ({type(exc).__name__})"
    if response.status_code != 202:
        raise SmokeFailed(f"the cut upload was answered {response.status_code}: {response.text[:300]}")
    return "taken (202)"


def upload_drill(api: httpx.Client, url: str, token: str, faults: dict[str, str]) -> None:
    """The upload fault: a 20 MB upload cut by it is refused cleanly or taken whole, and is taken afterwards."""
    name = f"smoke big {time.time_ns()}"
    body = upload_form(name, big_dataset())
    print(f"  the upload cut by the fault: {upload_cut(url, token, body, faults)}", flush=True)
    wait(lambda: api.get("/datasets/uploads/list").json(), lambda page: isinstance(page, list), timeout_s=300,
         what="the API back after the fault")  # fmt: skip
    upload_cut(url, token, body, {})  # the same file again, whole
    mine = [u for u in api.get("/datasets/uploads/list").json() if u["dataset_name"] == name]
    for upload in mine:
        ended = settle(api, f"/datasets/uploads/{upload['id']}", ended=("ready", "failed", "review"),
                       timeout_s=600, what=f"upload {upload['id']}")  # fmt: skip
        if ended["rows_valid"] != BIG_ROWS:  # settle() has already refused any state but ready
            raise SmokeFailed(f"upload {upload['id']} is ready with {ended['rows_valid']} of {BIG_ROWS} rows")
    print(f"  {len(mine)} upload(s) of the file, each ingested whole ({BIG_ROWS} rows)", flush=True)


def run(url: str, token: str, faults: dict[str, str]) -> None:
    api = httpx.Client(base_url=f"{url}/api/v1", headers={"Authorization": f"Bearer {token}"}, timeout=60)
    stage = time.monotonic()

    def done(name: str) -> None:
        nonlocal stage
        print(f"{name}: {time.monotonic() - stage:.1f} s", flush=True)
        stage = time.monotonic()

    if "upload" in faults:
        upload_drill(api, url, token, faults)
        done("upload drill")
    body = "".join(json.dumps(row) + "\n" for row in ROWS).encode()
    upload = expect(
        api.post("/datasets/uploads", data={"name": "smoke sums"}, files={"file": ("sums.jsonl", body)}),
        202,
        "upload",
    )
    uploaded = f"/datasets/uploads/{upload['id']}"
    ready = settle(api, uploaded, ended=("ready", "failed", "review"), timeout_s=120, what="the ingest")
    done("upload and ingest")
    exact = expect(
        api.post("/verifiers", json={"name": "exact", "spec": {"type": "exact_match"}}), 201, "verifier"
    )
    tests_spec = {"type": "python_tests", "tests_field": "tests"}
    tests = expect(api.post("/verifiers", json={"name": "tests", "spec": tests_spec}), 201, "verifier")
    sample = {"row": ROWS[0], "completion": "57"}
    preview = expect(
        api.post("/verifiers/preview", json={"spec": tests_spec, "samples": [sample]}), 200, "preview"
    )
    if preview["results"][0]["score"] != 1.0:
        raise SmokeFailed(f"the sandbox service scored a right answer {preview['results'][0]}")
    print("  preview on the sandbox service: a right answer scores 1", flush=True)
    done("verifiers")
    job = expect(
        api.post(
            "/jobs",
            json={
                "name": "smoke",
                "dataset_version": ready["dataset_version"],
                "verifiers": [
                    {"verifier_version": exact["versions"][0]["id"], "weight": 1.0},
                    {"verifier_version": tests["versions"][0]["id"], "weight": 0.5},
                ],
                "params": PARAMS,
            },
        ),
        201,
        "job launch",
    )
    if "job" in faults:
        wait(
            lambda: api.get(f"/jobs/{job['id']}").json(),
            lambda j: j["step"] >= 1,
            timeout_s=600,
            what="step 1",
        )
        inject(faults, "job")
    ended = ("succeeded", "failed", "cancelled", "stopped")
    finished = settle(api, f"/jobs/{job['id']}", ended=ended, timeout_s=900, what="the job")
    if finished["attempt"] != 1 or finished["step"] != PARAMS["max_steps"]:
        raise SmokeFailed(f"the job ended at step {finished['step']} in attempt {finished['attempt']}")
    done(f"job ({finished['step']} steps)")
    checkpoint = max(finished["checkpoints"], key=lambda c: c["step"])
    deployment = expect(
        api.post("/deployments", json={"checkpoint": checkpoint["id"], "name": "smoke"}), 201, "deploy"
    )
    settle(
        api,
        f"/deployments/{deployment['id']}",
        ended=("ready", "failed", "stopped"),
        timeout_s=600,
        what="the deployment",
    )
    done("deploy (gate and replica)")
    key = expect(
        api.post("/deployments/keys", json={"name": "smoke", "deployment": deployment["id"]}), 201, "key"
    )
    inject(faults, "serving")

    def call() -> httpx.Response:
        return httpx.post(
            f"{url}/v1/completions",
            headers={"Authorization": f"Bearer {key['key']}"},
            json={"model": "smoke", "prompt": "33+21=", "max_tokens": 3, "temperature": 0},
            timeout=120,
        )

    answer = wait(call, lambda r: r.status_code != 503, timeout_s=180, what="an answer that is not a 503")
    completion = expect(answer, 200, "/v1 completion")
    usage = expect(api.get(f"/deployments/{deployment['id']}/usage"), 200, "usage")["totals"]
    if usage["requests"] != 1:
        raise SmokeFailed(f"one completion was metered as {usage['requests']} requests")
    print(f"  completion {completion['choices'][0]['text']!r}, usage {completion['usage']}", flush=True)
    done("/v1 completion")
    api.post(f"/deployments/{deployment['id']}/stop")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--url", required=True)
    parser.add_argument("--token", required=True)
    parser.add_argument("--fault", action="append", default=[], metavar="STAGE=COMMAND")
    args = parser.parse_args()
    faults = dict(fault.split("=", 1) for fault in args.fault)
    unknown = set(faults) - {"upload", "job", "serving"}
    if unknown:
        parser.error(f"--fault stages are upload, job and serving, not {', '.join(sorted(unknown))}")
    started = time.monotonic()
    try:
        run(args.url.rstrip("/"), args.token, faults)
    except (SmokeFailed, httpx.HTTPError, subprocess.SubprocessError) as exc:
        print(f"smoke failed: {exc}", file=sys.stderr)
        return 1
    print(f"smoke passed in {time.monotonic() - started:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
