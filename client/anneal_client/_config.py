"""Where the client finds the API and its token: arguments, then ANNEAL_BASE_URL / ANNEAL_API_KEY, then the
user's config file (written by ``anneal login``, mode 0600), then the local default."""

from __future__ import annotations

import os
import tomllib
from pathlib import Path

DEFAULT_BASE_URL = "http://127.0.0.1:8000"


def config_path() -> Path:
    """$ANNEAL_CONFIG, or config.toml under $XDG_CONFIG_HOME/anneal (~/.config/anneal by default)."""
    explicit = os.environ.get("ANNEAL_CONFIG")
    if explicit:
        return Path(explicit)
    root = os.environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return Path(root) / "anneal" / "config.toml"


def read_config() -> dict[str, str]:
    """The saved settings; an unreadable or malformed file counts as none (the error would hide the fix)."""
    try:
        data = tomllib.loads(config_path().read_text(encoding="utf-8"))
    except (OSError, tomllib.TOMLDecodeError, UnicodeDecodeError):
        return {}
    return {k: v for k, v in data.items() if isinstance(v, str)}


def write_config(values: dict[str, str]) -> Path:
    """Save the settings readable by the user alone: the file is created 0600 before the token is in it."""
    path = config_path()
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    lines = "".join(f"{key} = {_toml_string(value)}\n" for key, value in values.items())
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    os.fchmod(fd, 0o600)  # an older file may have been created with wider permissions
    with os.fdopen(fd, "w", encoding="utf-8") as out:
        out.write("# Written by `anneal login`. ANNEAL_API_KEY and ANNEAL_BASE_URL override it.\n" + lines)
    return path


def _toml_string(value: str) -> str:
    out = []
    for char in value:
        if char in ('"', "\\"):
            out.append("\\" + char)
        elif char.isprintable():
            out.append(char)
        else:
            out.append(f"\\u{ord(char):04x}")
    return '"' + "".join(out) + '"'


def resolve(*, api_key: str | None, base_url: str | None) -> tuple[str | None, str]:
    saved: dict[str, str] | None = None
    if api_key is None:
        api_key = os.environ.get("ANNEAL_API_KEY") or None
    if base_url is None:
        base_url = os.environ.get("ANNEAL_BASE_URL") or None
    if api_key is None or base_url is None:
        saved = read_config()
        api_key = api_key or saved.get("api_key")
        base_url = base_url or saved.get("base_url")
    return api_key, normalise_base_url(base_url or DEFAULT_BASE_URL)


def normalise_base_url(url: str) -> str:
    """The site's root: ``https://anneal.example.com``; a trailing /api/v1 (the REST prefix) is dropped."""
    url = url.strip().rstrip("/")
    if url.endswith("/api/v1"):
        url = url[: -len("/api/v1")]
    if not url.startswith(("http://", "https://")):
        url = "http://" + url
    return url
