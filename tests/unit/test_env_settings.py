"""A wrong environment variable stops start-up with a message naming the variable and what it expects."""

import os
import subprocess
import sys
from pathlib import Path

import pytest
from django.core.exceptions import ImproperlyConfigured

from anneal.env import env_bool, env_choice, env_int, env_str, env_url

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize(
    ("name", "value", "expected"),
    [
        ("DATABASE_URL", "mysql://x", "DATABASE_URL='mysql://x': expected a URL starting with sqlite://"),
        ("REDIS_URL", "localhost:6379", "REDIS_URL='localhost:6379': expected a URL starting with redis://"),
        ("DEBUG", "maybe", "DEBUG='maybe': expected a boolean"),
        ("SANDBOX_BACKEND", "chroot", "SANDBOX_BACKEND='chroot': expected one of bwrap"),
        ("ANNEAL_UPLOAD_MAX_MB", "lots", "ANNEAL_UPLOAD_MAX_MB='lots': expected a whole number"),
    ],
)
def test_manage_py_refuses_a_bad_variable_with_its_name(name, value, expected):
    env = {**os.environ, name: value}
    result = subprocess.run(
        [sys.executable, "manage.py", "check"], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120
    )
    assert result.returncode != 0
    assert expected in result.stderr


def test_secret_key_is_required_outside_debug():
    env = {k: v for k, v in os.environ.items() if k != "SECRET_KEY"} | {"DEBUG": "false"}
    result = subprocess.run(
        [sys.executable, "manage.py", "check"], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120
    )
    assert result.returncode != 0
    assert "SECRET_KEY is not set: it is required" in result.stderr


def test_helpers(monkeypatch, tmp_path):
    monkeypatch.setenv("X_INT", "7")
    assert env_int("X_INT", 1, minimum=0, maximum=10) == 7
    monkeypatch.setenv("X_INT", "70")
    with pytest.raises(ImproperlyConfigured, match="X_INT='70': expected a number between 0 and 10"):
        env_int("X_INT", 1, minimum=0, maximum=10)
    monkeypatch.setenv("X_BOOL", "yes")
    assert env_bool("X_BOOL") is True
    with pytest.raises(ImproperlyConfigured, match="X_CHOICE='c': expected one of a, b"):
        monkeypatch.setenv("X_CHOICE", "c")
        env_choice("X_CHOICE", "a", ("a", "b"))
    secret = tmp_path / "secret"
    secret.write_text("from-a-file\n")
    monkeypatch.setenv("X_SECRET_FILE", str(secret))
    assert env_str("X_SECRET") == "from-a-file"
    monkeypatch.setenv("X_URL", "unix://")
    with pytest.raises(ImproperlyConfigured, match="needs the socket path"):
        env_url("X_URL", "", schemes=("unix",))
