"""Drill: the web process restarted (SIGTERM, as a supervisor does) and killed (SIGKILL) while it takes a
20 MB dataset upload: half-way through the body, and at moments after the last byte (while Django parses the
request and stores the file).

Each upload is refused cleanly (the connection drops; no row appears) or goes through whole (its row points
at the complete file, and the ingest reads every row). What a killed process leaves on disk, which no row
refers to, is removed by the uploads sweep; and the same file uploaded again after the restart is taken.
"""

import os
import signal
import threading
import time
from pathlib import Path

import httpx
import psycopg
import pytest

from scripts.compose_smoke import BIG_ROWS, BOUNDARY, big_dataset, upload_form
from tests.stack import wait_for

pytestmark = pytest.mark.chaos

CHUNK = 256 * 1024
# (signal, (when, at)): "body", `at` the share of the body sent before the kill; "after", `at` the share of the
# time a clean upload takes from its last byte to its answer (parsing, storing, saving the row) before it.
FAULTS = [
    (signal.SIGKILL, ("body", 0.5)),
    (signal.SIGTERM, ("body", 0.5)),
    (signal.SIGKILL, ("after", 0.3)),
    (signal.SIGTERM, ("after", 0.6)),
    (signal.SIGKILL, ("after", 0.8)),
    (signal.SIGKILL, ("after", 0.9)),
    (signal.SIGKILL, ("after", 0.97)),
]


def upload(
    cluster, token: str, body: bytes, *, kill=None, answer_s: float = 0
) -> tuple[int, dict | str, float]:
    """POST the form, streaming it; `kill` (see FAULTS; `answer_s`: a clean upload's time from last byte to
    answer) restarts the web process on the way. (status, body or error, seconds from last byte to answer)."""
    sig, (when, at) = kill or (None, ("body", None))
    killed = threading.Event()
    last_byte = [0.0]

    def restart() -> None:
        if not killed.is_set():
            killed.set()
            cluster.kill("web", sig)

    def stream():
        for start in range(0, len(body), CHUNK):
            if when == "body" and at is not None and start >= at * len(body):
                restart()
            yield body[start : start + CHUNK]
        last_byte[0] = time.monotonic()
        if when == "after" and at is not None:
            threading.Timer(at * answer_s, restart).start()

    headers = {
        "Authorization": f"Bearer {token}",
        "Content-Type": f"multipart/form-data; boundary={BOUNDARY}",
        "Content-Length": str(len(body)),
    }
    try:
        response = httpx.post(
            f"{cluster.base_url}/api/v1/datasets/uploads", content=stream(), headers=headers, timeout=120
        )
        outcome = (response.status_code, response.json(), time.monotonic() - last_byte[0])
    except (httpx.HTTPError, OSError) as exc:
        outcome = (0, f"{type(exc).__name__}: {exc}", time.monotonic() - last_byte[0])
    if kill:
        wait_for(lambda: killed.is_set(), bool, timeout_s=10, what="the kill")
        if cluster.processes["web"].poll() is None:  # the request ended before the kill reached it
            cluster.kill("web", sig)
        cluster.respawn("web")
        cluster.wait_healthy()
    return outcome


def upload_rows(cluster, team_name: str) -> list[tuple]:
    with psycopg.connect(cluster.database_url, autocommit=True) as conn:
        return conn.execute(
            "SELECT u.id, u.file_path, u.size_bytes FROM datasets_datasetupload u "
            "JOIN accounts_team t ON t.id = u.team_id WHERE t.name = %s ORDER BY u.id",
            [team_name],
        ).fetchall()


def test_the_web_restarted_during_an_upload_refuses_it_cleanly_or_takes_it_whole(cluster):
    token = cluster.member("upload-drill-owner", team="upload-drill")
    api = cluster.client(token)
    data = big_dataset()
    body = upload_form("big sums", data)
    status, first, answer_s = upload(cluster, token, body)
    assert status == 202, first
    outcomes = [upload(cluster, token, body, kill=fault, answer_s=answer_s) for fault in FAULTS]
    for status, out, _ in outcomes:
        assert status in (0, 202), f"not a clean refusal nor a success: {status} {out}"
    accepted = {first["id"]} | {out["id"] for status, out, _ in outcomes if status == 202}
    rows = upload_rows(cluster, "upload-drill")
    assert accepted <= {row[0] for row in rows}, "an accepted upload has no row"
    assert len(rows) < 1 + len(FAULTS), "no fault reached an upload: the drill did not test anything"
    for upload_id, file_path, size in rows:  # an ingested upload's file is gone: its row count says below
        if Path(file_path).exists():
            assert Path(file_path).stat().st_size == size == len(data), f"upload {upload_id}: a short file"
    # What the killed processes left, which no row refers to, goes with the sweep.
    cluster.manage(
        "shell", "-c", "from anneal.datasets.housekeeping import uploads_sweep; uploads_sweep(older_than_s=0)"
    )
    upload_dir = Path(cluster.env["ANNEAL_DATA_DIR"]) / "uploads"
    on_disk = {str(path) for path in upload_dir.iterdir() if path.is_file()}
    assert on_disk <= {row[1] for row in rows}, f"left on disk: {sorted(on_disk - {row[1] for row in rows})}"
    assert os.listdir(upload_dir / "receiving") == []
    # Every upload that has a row is read whole, and the same file is taken again after the restarts.
    status, again, _ = upload(cluster, token, body)
    assert status == 202, again
    for upload_id in [row[0] for row in rows] + [again["id"]]:
        done = wait_for(
            lambda upload_id=upload_id: api.get(f"/datasets/uploads/{upload_id}").json(),
            lambda u: u["state"] in ("ready", "failed", "review"),
            timeout_s=180,
            what=f"the ingest of upload {upload_id}",
        )
        assert done["state"] == "ready" and done["rows_valid"] == BIG_ROWS, done
