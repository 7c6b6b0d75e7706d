"""Runs a task's unittest files in the sandbox for the agent's run_tests tool; stdlib only (its source is the
program the environment sends). What it prints is the model's observation and nothing more: the final
verdict is decided by code_judge, never from this output.

stdin: JSON {"files": [relative paths of test modules]}. It prints unittest's usual report and exits 0 when
every test passed.
"""

import io
import json
import sys
import unittest


def main():
    config = json.loads(sys.stdin.read() or "{}")
    sys.stdin = io.StringIO("")
    names = [path[:-3].replace("/", ".") for path in config.get("files", []) if path.endswith(".py")]
    suite = unittest.TestSuite(unittest.defaultTestLoader.loadTestsFromName(name) for name in names)
    result = unittest.TextTestRunner(stream=sys.stdout, verbosity=1).run(suite)
    sys.stdout.flush()
    return 0 if result.wasSuccessful() else 1


if __name__ == "__main__":
    sys.exit(main())
