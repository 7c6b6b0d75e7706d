"""Code checks whose verdict the checked program cannot forge: the sources sent into the sandbox.

Not imported inside the sandbox: `request(payload, time_s)` builds the run whose main program is boot.py;
judge.py, runner.py, codec.py and guard.py travel on its stdin. See judge.py for the three-process design.
"""

from __future__ import annotations

import base64
import dataclasses
import hashlib
import json
import zlib
from pathlib import Path

from sandboxes import preload
from sandboxes.profiles import PYTHON
from sandboxes.types import Limits, RunRequest

HERE = Path(__file__).parent
BOOT_SOURCE = (HERE / "boot.py").read_text(encoding="utf-8")
MODULES = ("codec", "guard", "runner", "native", "judge")
REPORT_PREFIX = "ANNEAL_REPORT "
# The judge reports MARGIN_S (judge.py) before its own deadline; the sandbox's clock gets a second more.
SANDBOX_EXTRA_S = 1.0


def _head() -> str:
    """The judge's modules as boot.py reads them, compressed: a warm sandbox has them preloaded and skips
    this (so it is kept small: it travels with every check), a cold run compiles them."""
    sources = {name: (HERE / f"{name}.py").read_text(encoding="utf-8") for name in MODULES}
    source = {
        name: base64.b64encode(zlib.compress(text.encode(), 9)).decode() for name, text in sources.items()
    }
    return json.dumps({"source": source})


HEAD = _head()
# Names the judge's modules as one version: boot.py uses the copies preloaded in a warm sandbox only if equal.
DIGEST = hashlib.sha256(HEAD.encode()).hexdigest()[:16]
for _name in MODULES:
    _source = (HERE / f"{_name}.py").read_text(encoding="utf-8")
    if _name == "judge":
        _source += f"\nDIGEST = {DIGEST!r}\n"
    preload.register(_name, _source, filename=f"/anneal-judge/{_name}.py")


def request(
    payload: dict, *, time_s: float, run_s: float | None = None, profile: str = PYTHON, memory_mb: int = 0
) -> RunRequest:
    """A sandbox run of the judge on `payload` (which must hold "nonce" and "mode"), `time_s` for its work
    (or for each sample of a batch, whose run then gets `run_s` in all), in sandbox profile `profile` with
    `memory_mb` of address space per process (0: the default)."""
    limit = (run_s or time_s) + SANDBOX_EXTRA_S
    limits = Limits(wall_s=limit, cpu_s=limit)
    if memory_mb:
        limits = dataclasses.replace(limits, memory_mb=memory_mb)
    return RunRequest(language="python", code=BOOT_SOURCE, stdin=stdin(payload, time_s=time_s),
                      limits=limits, profile=profile)  # fmt: skip


def stdin(payload: dict, *, time_s: float) -> str:
    """What boot.py reads: the head (length-prefixed: the judge's modules), then the judge's input."""
    return f"{len(HEAD.encode())} {DIGEST}\n{HEAD}{json.dumps({**payload, 'time_s': time_s})}"


def find_report(stdout: str, nonce: str) -> dict | None:
    """The judge's report line for `nonce` (the last one), or None."""
    for line in reversed(stdout.splitlines()):
        if not line.startswith(REPORT_PREFIX):
            continue
        try:
            report = json.loads(line[len(REPORT_PREFIX) :])
        except ValueError:
            continue
        if isinstance(report, dict) and report.get("nonce") == nonce:
            return report
    return None
