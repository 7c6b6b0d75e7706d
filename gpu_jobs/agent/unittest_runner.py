"""Runs a task's unittest files in the sandbox; stdlib only (its source is the program the environment sends).

stdin: JSON {"files": [relative paths of test modules], "nonce": str}. It prints unittest's usual report;
with a nonce it ends with one line REPORT_PREFIX + JSON {"nonce", "passed": [test ids that passed], "ran"}.
The nonce is read before any code under test is imported and stdin is then emptied, so that code cannot
read it back from there.
"""

import io
import json
import sys
import unittest

REPORT_PREFIX = "ANNEAL-TESTS "


class _Recording(unittest.TextTestResult):
    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.passed_ids = []

    def addSuccess(self, test):  # noqa: N802 - unittest's name
        super().addSuccess(test)
        self.passed_ids.append(test.id())


def main():
    config = json.loads(sys.stdin.read() or "{}")
    sys.stdin = io.StringIO("")
    nonce = config.get("nonce", "")
    names = [path[:-3].replace("/", ".") for path in config.get("files", []) if path.endswith(".py")]
    suite = unittest.TestSuite(unittest.defaultTestLoader.loadTestsFromName(name) for name in names)
    runner = unittest.TextTestRunner(stream=sys.stdout, verbosity=1, resultclass=_Recording)
    result = runner.run(suite)
    sys.stdout.flush()
    if nonce:
        print(
            "\n"
            + REPORT_PREFIX
            + json.dumps({"nonce": nonce, "passed": result.passed_ids, "ran": result.testsRun})
        )
    return 0 if result.wasSuccessful() else 1


if __name__ == "__main__":
    sys.exit(main())
