"""Dataset ingest on the real stack: the Celery worker refuses a gzip bomb at the default limit and carries
on with the next upload; a CSV upload reports its progress and statistics over REST."""

import gzip
import io

import pytest

from tests.stack import wait_for

pytestmark = pytest.mark.integration

FINISHED = ("ready", "failed", "review", "rejected")


@pytest.fixture(scope="module")
def owner(stack):
    return stack.client(stack.member("ingester", team="Data"))


def finished(api, upload_id: int, *, timeout_s: float = 120) -> dict:
    return wait_for(
        lambda: api.get(f"/datasets/uploads/{upload_id}").json(),
        lambda u: u["state"] in FINISHED,
        timeout_s=timeout_s,
        what="the ingest task",
    )


def send(api, name: str, file_name: str, body: bytes, **fields) -> dict:
    response = api.post("/datasets/uploads", data={"name": name, **fields}, files={"file": (file_name, body)})
    assert response.status_code == 202, response.text
    return response.json()


def test_a_gzip_bomb_is_refused_and_the_worker_takes_the_next_upload(owner):
    # 2.1 GB of zeros as 2,100 gzip members of 1 MB each: about 2 MB sent, over the 2,000 MB default limit.
    member = gzip.compress(b"\0" * (1024 * 1024), compresslevel=9)
    bomb = member * 2100
    assert len(bomb) < 3 * 1024 * 1024
    refused = finished(owner, send(owner, "bomb", "bomb.jsonl.gz", bomb)["id"], timeout_s=300)
    assert refused["state"] == "failed"
    assert "decompresses to more than the limit of 2097152000 bytes" in refused["errors"][-1]["message"]
    assert "bomb" not in [d["name"] for d in owner.get("/datasets").json()]

    good = finished(owner, send(owner, "after", "ok.jsonl", b'{"prompt": "1+1=", "answer": "2"}\n')["id"])
    assert good["state"] == "ready" and good["dataset_version"]


def test_csv_progress_and_statistics_over_rest(owner):
    body = io.StringIO()
    body.write("question,solution,kind\n")
    for i in range(20_000):
        body.write(f"{i}+1=,{i + 1},{'odd' if i % 2 else 'even'}\n")
    body.write("dup+1=,1,even\ndup+1=,1,even\n")
    upload = send(
        owner,
        "counting",
        "counting.csv.gz",
        gzip.compress(body.getvalue().encode()),
        prompt_field="question",
        answer_field="solution",
        domain_field="kind",
    )
    done = finished(owner, upload["id"])
    assert done["state"] == "ready", done
    assert done["rows_seen"] == 20_002 and done["progress"] == 1.0
    assert done["rows_valid"] == 20_001 and done["duplicate_count"] == 1
    version = owner.get(f"/datasets/versions/{done['dataset_version']}").json()
    assert version["stats"]["domains"] == {"even": 10_001, "odd": 10_000}
    assert version["stats"]["prompt_tokens"]["max"] == len("19999+1=")
