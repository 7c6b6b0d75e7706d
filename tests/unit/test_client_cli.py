"""The `anneal` command line without a platform: login saves the token readable by the user alone and the
environment overrides it; a user's mistake (a missing file, bad YAML, a server that is not there, no token)
prints a message and exits non-zero, never a traceback. The stack test drives the commands end to end."""

import os
import stat
import subprocess
import sys

import pytest
from click.testing import CliRunner

from anneal_client import _config
from anneal_client.cli.main import cli
from tests.fake_api import ScriptedApi
from tests.stack import free_port

ME = {"username": "owner", "teams": [{"id": 1, "name": "Research", "role": "owner"}], "token": True}


@pytest.fixture
def home(tmp_path, monkeypatch):
    """A user with no saved login and no ANNEAL_* variables."""
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    for name in ("ANNEAL_API_KEY", "ANNEAL_BASE_URL", "ANNEAL_CONFIG"):
        monkeypatch.delenv(name, raising=False)
    return tmp_path


def run(*args: str):
    return CliRunner().invoke(cli, list(args), catch_exceptions=False)


def test_login_saves_the_token_mode_0600_and_the_environment_overrides_it(home, monkeypatch):
    with ScriptedApi() as api:
        api.routes["/api/v1/me"] = [(200, {}, ME)]
        result = run("login", "--base-url", api.url, "--token", "ann_saved")
        assert result.exit_code == 0, result.output
        path = home / "config" / "anneal" / "config.toml"
        assert stat.S_IMODE(path.stat().st_mode) == 0o600
        assert _config.read_config() == {"base_url": api.url, "api_key": "ann_saved"}
        assert "Research" in result.stderr

        assert run("whoami").exit_code == 0
        monkeypatch.setenv("ANNEAL_API_KEY", "ann_from_env")
        assert run("whoami", "--json").exit_code == 0
    tokens = [headers["Authorization"] for _, path, _, headers in api.seen]
    assert tokens == ["Bearer ann_saved", "Bearer ann_saved", "Bearer ann_from_env"]


def test_a_refused_login_saves_nothing(home):
    with ScriptedApi() as api:
        api.routes["/api/v1/me"] = [(401, {}, {"detail": "Invalid or revoked API token."})]
        result = run("login", "--base-url", api.url, "--token", "ann_wrong")
    assert result.exit_code == 1
    assert "Invalid or revoked API token. (HTTP 401)" in result.stderr
    assert not (home / "config" / "anneal" / "config.toml").exists()


def test_user_mistakes_are_messages_not_tracebacks(home, monkeypatch):
    monkeypatch.setenv("ANNEAL_API_KEY", "ann_test")
    monkeypatch.setenv("ANNEAL_BASE_URL", f"http://127.0.0.1:{free_port()}")
    missing = run("verifiers", "apply", str(home / "nowhere.yaml"))
    assert missing.exit_code == 1 and "nowhere.yaml: no such file" in missing.stderr

    bad = home / "bad.yaml"
    bad.write_text("name: exact\nspec: {type: exact_match\n")
    broken = run("verifiers", "apply", str(bad))
    assert broken.exit_code == 1 and "bad.yaml: not valid YAML at line" in broken.stderr

    nameless = home / "nameless.yaml"
    nameless.write_text("spec: {type: exact_match}\n")
    assert "name: required" in run("verifiers", "apply", str(nameless)).stderr

    job = home / "job.yaml"
    job.write_text("dataset_version: 1\nverifers: []\n")
    typo = run("jobs", "launch", str(job))
    assert typo.exit_code == 1 and "verifers: unknown key" in typo.stderr

    monkeypatch.delenv("ANNEAL_API_KEY")
    keyless = run("jobs", "list")
    assert keyless.exit_code == 1 and "no API key" in keyless.stderr and "anneal login" in keyless.stderr


def test_the_installed_command_reports_a_server_that_is_not_there(home):
    env = {
        **os.environ,
        "XDG_CONFIG_HOME": str(home / "config"),
        "ANNEAL_API_KEY": "ann_test",
        "ANNEAL_BASE_URL": f"http://127.0.0.1:{free_port()}",
    }
    anneal = os.path.join(os.path.dirname(sys.executable), "anneal")
    result = subprocess.run([anneal, "jobs", "list"], env=env, capture_output=True, text=True, timeout=60)
    assert result.returncode == 1
    assert "could not reach http://127.0.0.1:" in result.stderr and "Traceback" not in result.stderr


def test_api_errors_print_the_message_and_each_field(home, monkeypatch):
    with ScriptedApi() as api:
        monkeypatch.setenv("ANNEAL_API_KEY", "ann_test")
        monkeypatch.setenv("ANNEAL_BASE_URL", api.url)
        errors = [
            {"field": "params.max_steps", "message": "must be at least 1"},
            {"field": "domain_weights", "message": "must sum to 1"},
        ]
        api.routes["/api/v1/jobs"] = [
            (
                400,
                {},
                {
                    "detail": "params.max_steps: must be at least 1; domain_weights: must sum to 1",
                    "errors": errors,
                },
            )
        ]
        job = home / "job.yaml"
        job.write_text("dataset_version: 1\nverifiers: [{verifier_version: 1}]\nparams: {max_steps: 0}\n")
        result = run("jobs", "launch", str(job))
    assert result.exit_code == 1
    assert "(HTTP 400)" in result.stderr and "params.max_steps: must be at least 1" in result.stderr
    assert "  domain_weights: must sum to 1" in result.stderr


def test_the_watch_view_shows_steps_eta_reward_pass_rates_rollout_and_alarms():
    from rich.console import Console

    from anneal_client.cli.watch import WatchState, line_for, render
    from anneal_client.types import Job, JobEvent

    view = WatchState(Job.from_api({"id": 4, "name": "adder", "state": "queued", "max_steps": 10, "step": 0}))
    events = [
        ("state", {"state": "running"}, "10:00:00"),
        ("metric", {"step": 1, "reward": 0.25, "pass_rate/sums": 0.5, "pass_rate/code": 0.1}, "10:00:10"),
        (
            "rollout",
            {"step": 1, "prompt": "12+45=", "completion": "57", "reward": 1.0, "reason": "exact"},
            "10:00:10",
        ),
        ("metric", {"step": 3, "reward": 0.5, "pass_rate/sums": 0.75}, "10:00:30"),
        ("alarm", {"name": "no_signal", "step": 3, "message": "no learning signal"}, "10:00:30"),
    ]
    lines = []
    for seq, (kind, payload, at) in enumerate(events, start=1):
        event = JobEvent.from_api(
            {"seq": seq, "kind": kind, "payload": payload, "created_at": f"2026-12-01T{at}Z"}
        )
        view.observe(event)
        lines.append(line_for(view, event))
    # Two steps took 20 s on the server's clock: seven to go, 70 s.
    assert view.eta_seconds() == 70
    assert lines == [
        "state running",
        "step 1/10  reward 0.250  pass rate code=0.10 sums=0.50  ETA --:--",
        None,
        "step 3/10  reward 0.500  pass rate code=0.10 sums=0.75  ETA 0:01:10",
        "ALARM no_signal at step 3: no learning signal",
    ]
    console = Console(width=100, record=True, force_terminal=True)
    console.print(render(view))
    screen = console.export_text()
    assert "step 3/10" in screen and "ETA 0:01:10" in screen and "pass rate sums  0.75" in screen
    assert "latest rollout (step 1)" in screen and "completion: 57" in screen
    assert "ALARM no_signal at step 3" in screen


def test_packs_are_listed_and_made_from_the_command_line(home, monkeypatch):
    with ScriptedApi() as api:
        monkeypatch.setenv("ANNEAL_API_KEY", "ann_test")
        monkeypatch.setenv("ANNEAL_BASE_URL", api.url)
        api.routes["/api/v1/datasets/packs"] = [
            (200, {}, {"tasks": [{"task": "report_tables", "has_curriculum": True}], "max_difficulty": 5})
        ]
        made = {
            "dataset_version": {"id": 9, "row_count": 20},
            "verifiers": [{"id": 4, "name": "docs/report_tables", "version": 5}],
            "dropped": {},
        }
        api.routes["/api/v1/datasets/packs/create"] = [(201, {}, made)]
        listed = run("datasets", "packs")
        assert listed.exit_code == 0 and "report_tables" in listed.output, listed.output
        result = run(
            "datasets", "pack", "docs", "--task", "report_tables", "--size", "20", "--difficulty", "2"
        )
        assert result.exit_code == 0, result.output
        assert "version 9 (20 rows)" in result.output and "docs/report_tables" in result.output
    posts = [path for method, path, _, _ in api.seen if method == "POST"]
    assert posts == ["/api/v1/datasets/packs/create"]
