"""Code checks whose verdict the checked program cannot forge: the sources sent into the sandbox.

Not imported inside the sandbox: `request(payload, time_s)` builds the run whose main program is judge.py;
runner.py, codec.py and guard.py travel on its stdin. See judge.py for the three-process design.
"""

from __future__ import annotations

import json
from pathlib import Path

from sandboxes.types import Limits, RunRequest

HERE = Path(__file__).parent
JUDGE_SOURCE = (HERE / "judge.py").read_text(encoding="utf-8")
SIDE_FILES = {
    name: (HERE / name).read_text(encoding="utf-8") for name in ("runner.py", "codec.py", "guard.py")
}
REPORT_PREFIX = "ANNEAL_REPORT "
# The judge reports MARGIN_S (judge.py) before its own deadline; the sandbox's clock gets a second more.
SANDBOX_EXTRA_S = 1.0


def request(payload: dict, *, time_s: float) -> RunRequest:
    """A sandbox run of the judge on `payload` (which must hold "nonce" and "mode"), `time_s` for its work."""
    limit = time_s + SANDBOX_EXTRA_S
    return RunRequest(language="python", code=JUDGE_SOURCE, stdin=stdin(payload, time_s=time_s),
                      limits=Limits(wall_s=limit, cpu_s=limit))  # fmt: skip


def stdin(payload: dict, *, time_s: float) -> str:
    """What the judge reads: the side modules' sources (length-prefixed, read before it forks), then the
    payload. Sent on stdin rather than as files so that nothing is imported from the working directory,
    which in a session holds the model's repository."""
    sources = json.dumps(SIDE_FILES)
    return f"{len(sources.encode())}\n{sources}{json.dumps({**payload, 'time_s': time_s})}"


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
