"""Runs a task's unittest files in the sandbox for the agent's run_tests tool; stdlib only (its source is the
program the environment sends). What it prints is the model's observation and nothing more: the final
verdict is decided by code_judge, never from this output.

stdin: JSON {"files": [relative paths of test modules]}. It prints unittest's usual report, less the run's
wall time ("Ran 4 tests", not "Ran 4 tests in 0.005s"), and exits 0 when every test passed. The time would
make the same call on the same files read differently from run to run: a greedy episode's next turn, and the
warm-up's traces, would then depend on the machine's load, and one seed's job would not repeat its figures.
"""

import io
import json
import re
import sys
import unittest

WALL_TIME = re.compile(r"^(Ran \d+ tests?) in \d+(\.\d+)?s$", re.MULTILINE)


def main():
    config = json.loads(sys.stdin.read() or "{}")
    sys.stdin = io.StringIO("")
    names = [path[:-3].replace("/", ".") for path in config.get("files", []) if path.endswith(".py")]
    suite = unittest.TestSuite(unittest.defaultTestLoader.loadTestsFromName(name) for name in names)
    report = io.StringIO()
    result = unittest.TextTestRunner(stream=report, verbosity=1).run(suite)
    sys.stdout.write(WALL_TIME.sub(r"\1", report.getvalue()))
    sys.stdout.flush()
    return 0 if result.wasSuccessful() else 1


if __name__ == "__main__":
    sys.exit(main())
