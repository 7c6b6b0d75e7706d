"""The hack probes run on every verifier save include tampering probes: a verifier they can forge is flagged."""

import shutil

import pytest

from gpu_jobs.rewards.probes import run_probes

pytestmark = [
    pytest.mark.security,
    pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap is not installed"),
]

# A custom verifier that runs the completion inside score() and trusts its own `==`: forgeable.
TRUSTING = (
    "def score(row, completion):\n"
    "    namespace = {}\n"
    "    exec(completion.replace('```python', '').replace('```', ''), namespace)\n"
    "    return 1.0 if namespace.get('result') == 57 else 0.0\n"
)
# The same check through run_function: the value comes back as a plain copy.
CAREFUL = (
    "def score(row, completion):\n"
    "    code = completion.replace('```python', '').replace('```', '')\n"
    "    try:\n"
    "        value = run_function(code + '\\ndef _result():\\n    return result\\n', '_result')\n"
    "    except RuntimeError as exc:\n"
    "        return 0.0, str(exc)\n"
    "    return 1.0 if value == 57 else 0.0\n"
)


def _tampering(results):
    return {r.name: r for r in results if r.name.startswith("tamper_")}


def test_python_tests_withstands_every_tampering_probe():
    probes = _tampering(run_probes({"type": "python_tests", "tests": ["assert result == 57"]}))
    assert len(probes) >= 8
    assert [name for name, r in probes.items() if r.flagged or r.score > 0] == []
    named = [name for name, r in probes.items() if r.reason.startswith("tampering: ")]
    assert len(named) >= 8, {name: r.reason for name, r in probes.items()}


def test_a_custom_verifier_that_trusts_the_completions_equality_is_flagged():
    trusting = _tampering(run_probes({"type": "custom_python", "code": TRUSTING}))
    assert trusting["tamper_always_equal"].flagged
    careful = _tampering(run_probes({"type": "custom_python", "code": CAREFUL}))
    assert [name for name, r in careful.items() if r.flagged] == []
