"""Modules a warm sandbox's fork server loads once, at start, so that each run using them only forks.

An engine whose programs always import the same standard-library-only modules (the code judge) registers
their source here before its first run; warm sandboxes started after that carry them in the fork server's
source (`fork_server_source()`), define them before the first fork, and every run finds them in sys.modules.
Nothing here comes from a request: a run cannot change what later runs get. A sandbox started before the
registration, a cold run, or a remote host that never registered simply lacks them, and the program loads
its own copy (the judge's boot.py does).
"""

from __future__ import annotations

import binascii
import re
import zlib
from pathlib import Path

_FORK_SERVER = (Path(__file__).parent / "backends" / "fork_server.py").read_text()
_MODULES: dict[str, tuple[str, str]] = {}  # name -> (file name compiled under, packed source: pack())
_ASSIGNMENT = re.compile(r"^PRELOAD_SOURCES = \{\}", re.MULTILINE)
# Packed (pack()): argv strings are capped at 128 KiB each by the kernel; the fork server needs the rest.
MAX_BYTES = 96 * 1024


def register(name: str, source: str, *, filename: str) -> None:
    """Preload module `name` (standard library imports only) from `source`, compiled under `filename`."""
    _MODULES[name] = (filename, pack(source))
    size = sum(len(packed) for _, packed in _MODULES.values())
    if size > MAX_BYTES:
        del _MODULES[name]
        raise ValueError(f"preloaded modules would take {size} bytes packed, past the {MAX_BYTES}-byte limit")


def pack(source: str) -> str:
    """`source` as the fork server's command line carries it: compressed, in base64 (a third of its size, so
    the judge's ~100 KB of modules fit in one argv string with room to grow); fork_server.unpack reverses it."""
    return binascii.b2a_base64(zlib.compress(source.encode(), 9), newline=False).decode()


def fork_server_source() -> str:
    """The fork server's source with the registered modules in it (assigned on the line that starts with
    `PRELOAD_SOURCES = {}`; a mention of it anywhere else is left alone)."""
    source, count = _ASSIGNMENT.subn(lambda _: f"PRELOAD_SOURCES = {dict(_MODULES)!r}", _FORK_SERVER, count=1)
    if count != 1:
        raise RuntimeError("fork_server.py has no line starting with 'PRELOAD_SOURCES = {}' to fill in")
    return source
