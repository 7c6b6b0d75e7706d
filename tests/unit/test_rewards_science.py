"""python_tests with `libraries` (the python-science profile: Debian's numpy, scipy, pandas and sympy) in the
real bubblewrap sandbox: the libraries import and work under the guard, numpy arrays and scalars cross as plain
values, and a test that needs the program's own objects fails with the reason, since such a runner holds numpy's
ctypes and its own verdict is not taken."""

import pytest

from gpu_jobs.rewards import build_scorer, validate_spec
from gpu_jobs.rewards.base import SpecError
from sandboxes.backends.bwrap import BwrapBackend

ALL = ["numpy", "scipy", "pandas", "sympy"]


@pytest.fixture(scope="module")
def sandbox():
    backend = BwrapBackend(pool_size=1)
    yield backend
    backend.pool.close()


def scorer(sandbox, tests, libraries=ALL):
    spec = {"type": "python_tests", "libraries": libraries, "scoring": "fraction", "tests": tests}
    return build_scorer(spec, sandbox=sandbox)


def test_each_library_works_and_numpy_values_cross_as_plain_ones(sandbox):
    program = (
        "import numpy as np\nimport pandas as pd\nimport sympy\nfrom scipy import integrate, optimize\n"
        "def area(a):\n    return integrate.quad(lambda x: a * x, 0, 1)[0]\n"
        "def root():\n    return optimize.brentq(lambda x: x * x - 2, 0, 2)\n"
        "def doubled(n):\n    return np.arange(n) * 2\n"
        "def mean(values):\n    return np.mean(values)\n"
        "def derivative():\n    x = sympy.Symbol('x')\n    return str(sympy.diff(x ** 3, x))\n"
        "def totals(rows):\n    return pd.DataFrame(rows).groupby('k')['v'].sum().to_dict()\n"
    )
    tests = [
        "assert abs(area(4) - 2) < 1e-9",
        "assert abs(root() - 2 ** 0.5) < 1e-9",
        "assert list(doubled(3)) == [0, 2, 4]",
        {"call": "mean", "args": [[1, 2, 3, 6]], "expected": 3.0},
        {"call": "doubled", "args": [2], "expected": [0, 2]},
        "assert derivative() == '3*x**2'",
        {
            "call": "totals",
            "args": [[{"k": "a", "v": 1}, {"k": "a", "v": 2}, {"k": "b", "v": 5}]],
            "expected": {"a": 3, "b": 5},
        },
    ]
    result = scorer(sandbox, tests).score({}, program)
    assert (result.score, result.reason) == (1.0, "all 7 tests passed")
    assert result.parts["tampering"] == 0.0


def test_a_test_that_needs_the_programs_objects_fails_saying_so(sandbox):
    program = "import pandas as pd\ndef frame():\n    return pd.DataFrame({'a': [1, 2]})\n"
    result = scorer(sandbox, ["assert frame()['a'].sum() == 3"], ["numpy", "pandas"]).score({}, program)
    assert result.score == 0.0
    assert result.reason == (
        "0/1 tests passed; test 1: the test needs the program's objects; return plain values or numpy arrays"
    )


def test_without_libraries_numpy_is_not_there_and_bad_lists_are_refused(sandbox):
    plain = build_scorer({"type": "python_tests", "tests": ["assert f() == 1"]}, sandbox=sandbox)
    result = plain.score({}, "import numpy\ndef f():\n    return 1\n")
    assert result.reason == "the program raised ModuleNotFoundError: No module named 'numpy'"
    with pytest.raises(SpecError) as error:
        validate_spec({"type": "python_tests", "libraries": ["numpy", "torch"]})
    assert (error.value.field, error.value.message) == (
        "libraries",
        "must list some of numpy, scipy, pandas, sympy; got ['torch']",
    )
    assert validate_spec({"type": "python_tests", "libraries": ["sympy", "numpy"]})["libraries"] == [
        "numpy",
        "sympy",
    ]
