"""The Python client and the `anneal` CLI against the real stack (Daphne, Celery, PostgreSQL, Redis): log in,
upload, apply verifiers from YAML files (again: unchanged; edited: a new version), preview, launch a short
job from a file that names its dataset and verifier, watch it to the end, get its spec back as a file the
launch checks accept, deploy its checkpoint at the turbo tier and complete through the deployment's /v1.
One job and one deployment serve every test, in file order."""

import asyncio
import json

import openai
import pytest
import yaml
from click.testing import CliRunner

from anneal_client import Anneal, AsyncAnneal, BadRequestError, NotFoundError
from anneal_client.cli.main import cli
from tests.stack import jsonl

pytestmark = pytest.mark.integration

ROWS = [{"prompt": f"{a}+{b}=", "answer": str(a + b)} for a, b in [(12, 45), (33, 21), (70, 19), (41, 8)]]
# As test_deploy_stack: a learning rate so small that the checkpoint answers as its base model, so the
# regression gate passes deterministically.
PARAMS = {
    "max_steps": 2,
    "num_generations": 2,
    "prompts_per_step": 2,
    "max_completion_length": 4,
    "learning_rate": 1e-9,
}


@pytest.fixture(scope="module")
def user(stack, tmp_path_factory):
    """A team member whose CLI has a config folder of its own and no ANNEAL_* variables."""
    home = tmp_path_factory.mktemp("client-user")
    token = stack.member("scripter", team="Automation", organisation="ScriptCo")
    env = {"XDG_CONFIG_HOME": str(home / "config"), "ANNEAL_API_KEY": None, "ANNEAL_BASE_URL": None}

    def anneal(*args: str, code: int = 0):
        result = CliRunner().invoke(cli, list(args), env=env, catch_exceptions=False)
        assert result.exit_code == code, f"anneal {' '.join(args)} -> {result.exit_code}\n{result.output}"
        return result

    return {
        "home": home,
        "token": token,
        "anneal": anneal,
        "client": Anneal(api_key=token, base_url=stack.base_url),
        "state": {},
    }


def test_login_upload_and_verifiers_as_files(stack, user):
    anneal, home, state = user["anneal"], user["home"], user["state"]
    anneal("login", "--base-url", stack.base_url, "--token", user["token"])
    (home / "sums.jsonl").write_bytes(jsonl(ROWS))
    uploaded = json.loads(anneal("datasets", "upload", str(home / "sums.jsonl"), "--json").stdout)
    assert uploaded["state"] == "ready" and uploaded["rows_valid"] == len(ROWS)
    assert uploaded["dataset_name"] == "sums"

    specs = home / "verifiers"
    specs.mkdir()
    (specs / "exact.yaml").write_text("name: exact\nspec:\n  type: exact_match\n")
    (specs / "close.yaml").write_text("name: close\nspec:\n  type: numeric\n  abs_tol: 0.5\n")
    files = [str(specs / "close.yaml"), str(specs / "exact.yaml")]
    first = json.loads(anneal("verifiers", "apply", *files, "--json").stdout)
    assert [(r["name"], r["action"], r["number"]) for r in first] == [
        ("close", "created", 1),
        ("exact", "created", 1),
    ]
    again = json.loads(anneal("verifiers", "apply", *files, "--json").stdout)
    assert [r["action"] for r in again] == ["unchanged", "unchanged"]
    (specs / "close.yaml").write_text("name: close\nspec:\n  type: numeric\n  abs_tol: 2\n")
    edited = json.loads(anneal("verifiers", "apply", *files, "--json").stdout)
    assert [(r["action"], r["number"]) for r in edited] == [("new_version", 2), ("unchanged", 1)]

    # Exported, the verifier is a file `apply` finds unchanged: the round trip a team keeps in Git.
    exported = anneal("verifiers", "export", str(edited[0]["id"])).stdout
    assert yaml.safe_load(exported)["spec"]["abs_tol"] == 2
    (specs / "close-exported.yaml").write_text(exported)
    assert (
        json.loads(anneal("verifiers", "apply", str(specs / "close-exported.yaml"), "--json").stdout)[0][
            "action"
        ]
        == "unchanged"
    )

    (home / "samples.jsonl").write_bytes(
        jsonl([{"row": {"answer": "57"}, "completion": "56"}, {"row": {"answer": "57"}, "completion": "5"}])
    )
    scored = json.loads(
        anneal(
            "verifiers",
            "preview",
            str(specs / "close.yaml"),
            "--samples",
            str(home / "samples.jsonl"),
            "--json",
        ).stdout
    )
    assert [r["score"] for r in scored] == [1.0, 0.0]

    # An OpenAI grader comes in as a verifier; refusals name the grader's path (docs: openai-graders).
    grader = {
        "type": "string_check",
        "name": "exact answer",
        "input": "{{sample.output_text}}",
        "reference": "{{item.answer}}",
        "operation": "eq",
    }
    (home / "grader.json").write_text(json.dumps(grader))
    imported = json.loads(anneal("verifiers", "import", str(home / "grader.json"), "--json").stdout)
    assert imported["name"] == "exact answer" and imported["versions"][0]["number"] == 1
    (home / "bad-grader.json").write_text(json.dumps({**grader, "operation": "telepathy"}))
    refused = anneal("verifiers", "import", str(home / "bad-grader.json"), code=1)
    assert "grader.operation" in refused.stderr and "(HTTP 400)" in refused.stderr

    # The API's refusals arrive as exceptions with its status, field and message.
    with pytest.raises(BadRequestError) as bad:
        user["client"].verifiers.create(name="weird", spec={"type": "telepathy"})
    assert (
        bad.value.status_code == 400 and bad.value.field == "spec.type" and "telepathy" in bad.value.message
    )
    with pytest.raises(NotFoundError):
        user["client"].jobs.get(999_999)
    state["dataset_version"] = uploaded["dataset_version"]


def test_launch_from_a_file_watch_to_the_end_and_get_the_spec_back(stack, user, tmp_path_factory):
    anneal, home, state = user["anneal"], user["home"], user["state"]
    job_file = home / "job.yaml"
    job_file.write_text(
        yaml.safe_dump(
            {
                "name": "adder from git",
                "dataset": "sums",  # by name: its newest version
                "eval_dataset_version": state["dataset_version"],
                "verifiers": [{"verifier": "exact", "weight": 1}],
                "params": PARAMS,
            }
        )
    )
    estimate = json.loads(anneal("jobs", "estimate", str(job_file), "--json").stdout)
    assert estimate["total"] >= 0 and estimate["devices"] >= 1
    launched = json.loads(anneal("jobs", "launch", str(job_file), "--json").stdout)
    assert launched["dataset_version"] == state["dataset_version"] and launched["state"] == "queued"

    watched = anneal("jobs", "watch", str(launched["id"]))
    lines = watched.stdout.splitlines()
    assert "state running" in lines and f"step 2/{PARAMS['max_steps']}" in watched.stdout
    assert lines[-1] == f"job {launched['id']} succeeded", f"{watched.stdout}\n{stack.log_tail('gpu')}"

    # The frozen spec comes back as a file that the launch checks accept as it is (estimate: nothing kept).
    anneal("jobs", "spec", str(launched["id"]), "-o", str(home / "spec.yaml"))
    spec = yaml.safe_load((home / "spec.yaml").read_text())
    assert spec["dataset_version"] == state["dataset_version"] and spec["params"]["max_steps"] == 2
    assert spec["verifiers"][0]["name"] == "exact"
    anneal("jobs", "estimate", str(home / "spec.yaml"))

    client = user["client"]
    job = client.jobs.get(launched["id"])
    events = list(client.jobs.events(job.id, page_size=7))
    assert [e.seq for e in events] == list(range(1, job.last_seq + 1))
    assert events[-1].kind == "state" and events[-1].payload["state"] == "succeeded"

    async def from_async():
        async with AsyncAnneal(api_key=user["token"], base_url=stack.base_url) as aclient:
            jobs = await aclient.jobs.list()
            seqs = [e.seq async for e in aclient.jobs.events(job.id, after=job.last_seq - 3)]
            return [j.id for j in jobs], seqs

    ids, tail = asyncio.run(from_async())
    assert job.id in ids and tail == [job.last_seq - 2, job.last_seq - 1, job.last_seq]
    listed = json.loads(anneal("jobs", "list", "--json").stdout)
    assert [j["state"] for j in listed if j["id"] == job.id] == ["succeeded"]
    state["checkpoint"] = job.latest_checkpoint.id
    # The model card before a deploy: the same card as JSON (Python) and as Markdown (the CLI, to a file).
    card = user["client"].checkpoints.card(job.latest_checkpoint.id)
    assert card["job"]["id"] == job.id and card["base_model"] == "tiny" and card["curves"]["reward"]
    written = tmp_path_factory.mktemp("card") / "card.md"
    anneal("checkpoints", "card", str(job.latest_checkpoint.id), "-o", str(written))
    assert written.read_text().startswith(f"# Model card: {job.name}, step {job.latest_checkpoint.step}")


def test_deploy_at_turbo_and_complete_through_v1(stack, user):
    anneal, state = user["anneal"], user["state"]
    deployed = json.loads(
        anneal(
            "deploy",
            str(state["checkpoint"]),
            "--tier",
            "turbo",
            "--name",
            "adder-cli",
            "--key",
            "app",
            "--json",
        ).stdout
    )
    assert deployed["state"] == "ready", f"{deployed}\n{stack.log_tail('serve')}"
    assert deployed["tier"] == "turbo" and deployed["key"]["key"].startswith("sk-anneal-")
    try:
        v1 = openai.OpenAI(
            base_url=deployed["base_url"], api_key=deployed["key"]["key"], max_retries=0, timeout=120
        )
        reply = v1.completions.create(model="adder-cli", prompt="33+21=", max_tokens=3, temperature=0)
        assert reply.choices[0].text and reply.usage.completion_tokens > 0
        usage = user["client"].deployments.usage(deployed["id"])
        assert usage["totals"]["requests"] == 1
    finally:
        user["client"].deployments.stop(deployed["id"])
