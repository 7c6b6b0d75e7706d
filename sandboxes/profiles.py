"""Sandbox profiles: the toolchains a run's programs find under /usr, selectable per verifier.

A profile names what must be installed where the program runs: on a bubblewrap host, the host's own /usr
(bound read-only into every sandbox, so one warm pool serves every profile the host has installed:
scripts/setup-system.sh installs them); for the docker and kubernetes backends, an image of the profile's
own, built from Debian's packages by scripts/sandbox-image.sh (`<image>-<profile>`, the base image for
the profiles it already holds). Every profile has Python 3 beside its toolchain: the trusted judge of a code check is Python.

`memory_mb` is the address space a profile's programs need at the least: Node.js's V8 reserves about a
gigabyte of virtual memory before it runs a line, and cc1plus maps a few hundred megabytes.
"""

from __future__ import annotations

import os
from dataclasses import dataclass


@dataclass(frozen=True)
class Profile:
    name: str
    summary: str
    packages: tuple[str, ...]  # Debian packages that provide it (on a bwrap host; in the docker image)
    binaries: tuple[str, ...]  # what must exist for it to run, each with the package that provides it
    memory_mb: int


PYTHON = "python"
# Profiles the base image (debootstrap minbase with python3: bash, coreutils, Python's sqlite3) already holds.
IN_BASE_IMAGE = (PYTHON, "shell", "sql")
PROFILES: dict[str, Profile] = {
    profile.name: profile
    for profile in (
        Profile(PYTHON, "Python 3 and a POSIX shell", ("python3",), ("/usr/bin/python3",), 256),
        Profile(
            "python-science",
            "Python 3 with numpy, scipy, pandas and sympy (Debian's)",
            ("python3", "python3-numpy", "python3-scipy", "python3-pandas", "python3-sympy"),
            tuple(
                f"/usr/lib/python3/dist-packages/{name}/__init__.py"
                for name in ("numpy", "scipy", "pandas", "sympy")
            ),
            2048,
        ),
        Profile("shell", "bash and coreutils", ("python3", "bash"), ("/usr/bin/python3", "/bin/bash"), 256),
        Profile(
            "c-cpp",
            "gcc and g++ (C17, C++17)",
            ("python3", "gcc", "g++", "libc6-dev"),
            ("/usr/bin/python3", "/usr/bin/gcc", "/usr/bin/g++", "/usr/include/stdio.h"),
            1024,
        ),
        Profile("javascript", "Node.js", ("python3", "nodejs"), ("/usr/bin/python3", "/usr/bin/node"), 2048),
        Profile("sql", "SQLite, through Python's sqlite3 module", ("python3",), ("/usr/bin/python3",), 256),
        Profile(
            "sql-postgres",
            "a PostgreSQL server started in the sandbox for the run, and psycopg2",
            ("python3", "postgresql-15", "python3-psycopg2"),
            (
                "/usr/bin/python3",
                "/usr/lib/postgresql",
                "/usr/lib/python3/dist-packages/psycopg2/__init__.py",
            ),
            1024,
        ),
        Profile(
            "render",
            "librsvg's rsvg-convert (SVG to PNG)",
            ("python3", "librsvg2-bin"),
            ("/usr/bin/python3", "/usr/bin/rsvg-convert"),
            512,
        ),
        Profile(
            "spreadsheet",
            "LibreOffice Calc, headless (formulas evaluated)",
            ("python3", "libreoffice-calc-nogui"),
            ("/usr/bin/python3", "/usr/bin/soffice", "/usr/lib/libreoffice/program/soffice.bin"),
            2048,
        ),
    )
}


def profile_problem(name: str) -> str:
    """Why `name` is not a profile ("" when it is)."""
    if name in PROFILES:
        return ""
    return f"unknown sandbox profile {name!r}; profiles: {', '.join(PROFILES)}"


def missing_here(name: str, *, root: str = "/") -> list[str]:
    """The files profile `name` needs that this host lacks (a bubblewrap host runs programs on its own /usr)."""
    return [path for path in PROFILES[name].binaries if not os.path.exists(os.path.join(root, path[1:]))]


def installed_here() -> list[str]:
    """The profiles whose toolchains this host has."""
    return [name for name in PROFILES if not missing_here(name)]


def image_for(name: str, base_image: str) -> str:
    """The container image of profile `name`: the base image for those it holds, else `<repository>-<profile>:<tag>`
    ("localhost/anneal-sandbox:bookworm" -> "localhost/anneal-sandbox-c-cpp:bookworm")."""
    if name in IN_BASE_IMAGE:
        return base_image
    repository, colon, tag = base_image.rpartition(":")
    if not colon or "/" in tag:  # no tag ("host:5000/anneal-sandbox" has a port, not a tag)
        return f"{base_image}-{name}"
    return f"{repository}-{name}:{tag}"
