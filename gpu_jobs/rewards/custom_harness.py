"""Runs inside the sandbox as main.py: calls a user's score(row, completion) on each sample of a batch.

Not imported by Anneal: custom_python.py sends this file's source. Standard library only. Inputs: the
nonce on the first line of stdin, {"code", "samples": [{"row", "completion"}]} in payload.json. Output:
one line `ANNEAL_REPORT {json}` on the original stdout, after every sample, with one entry per sample.
"""

import json
import math
import os
import sys

REPORT_PREFIX = "ANNEAL_REPORT "


def describe(exc):
    try:
        text = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
    except Exception:
        text = type(exc).__name__
    return text[:300]


def as_result(value):
    """(score, reason) from what score() returned: a number, (number, reason) or {"score", "reason"}."""
    reason = ""
    if isinstance(value, dict):
        value, reason = value.get("score"), str(value.get("reason", ""))
    elif isinstance(value, tuple) and len(value) == 2:
        value, reason = value[0], str(value[1])
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        return None, f"score() returned {type(value).__name__} {str(value)[:60]}, not a finite number"
    return float(value), reason[:300]


def main():
    nonce = sys.stdin.readline().strip()
    with open("payload.json", encoding="utf-8") as f:
        payload = json.load(f)
    report_fd = os.dup(1)
    os.dup2(2, 1)  # the function's prints go to stderr: they cannot forge the report line
    namespace = {"__name__": "verifier"}
    results = []
    try:
        exec(compile(payload["code"], "<verifier>", "exec"), namespace)
        score = namespace.get("score")
        if not callable(score):
            raise NameError("the code must define a function score(row, completion)")
    except BaseException as exc:
        error = "the verifier code failed: " + describe(exc)
        results = [{"score": None, "reason": error} for _ in payload["samples"]]
    else:
        for sample in payload["samples"]:
            try:
                value, reason = as_result(score(sample["row"], sample["completion"]))
            except BaseException as exc:
                value, reason = None, "score() raised " + describe(exc)
            results.append({"score": value, "reason": reason})
    report = {"nonce": nonce, "results": results}
    os.write(report_fd, (REPORT_PREFIX + json.dumps(report) + "\n").encode())
    os._exit(0)


if __name__ == "__main__":
    main()
