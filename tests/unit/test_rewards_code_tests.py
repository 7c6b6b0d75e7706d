"""The code_tests verifier through the real sandbox (bubblewrap, the host's gcc, g++ and Node.js): C, C++ and
JavaScript programs built once and run against stdin/stdout tests (and JavaScript calls), a compiler's error
as the program's reason, wrong test forms refused naming the test."""

import pytest

from gpu_jobs.rewards import build_scorer, validate_spec
from gpu_jobs.rewards.base import SpecError
from gpu_jobs.rewards.code_tests import extract_code
from sandboxes.client import SandboxClient

SUM_TESTS = [
    {"stdin": "3 4\n", "stdout": "7\n"},
    {"stdin": "-5 5\n", "stdout": "0\n"},
    {"stdin": "2000000000 2000000000\n", "stdout": "4000000000\n"},  # past 32 bits: an `int` sum fails it
]
PROGRAMS = {
    "c": '#include <stdio.h>\nint main(void) { long long a, b; scanf("%lld %lld", &a, &b); '
    'printf("%lld\\n", a + b); return 0; }\n',
    "cpp": "#include <iostream>\nint main() { long long a, b; std::cin >> a >> b; std::cout << a + b << '\\n'; }\n",
    "javascript": "const [a, b] = require('fs').readFileSync(0, 'utf8').trim().split(/\\s+/).map(BigInt);\n"
    "console.log(String(a + b));\n",
}
INT_SUM = '#include <stdio.h>\nint main(void) { int a, b; scanf("%d %d", &a, &b); printf("%d\\n", a + b); }\n'


@pytest.fixture(scope="module")
def sandbox():
    return SandboxClient()


def scorer(sandbox, language, **spec):
    return build_scorer({"type": "code_tests", "language": language, **spec}, sandbox=sandbox)


def fenced(tag, program):
    return f"Here is my solution.\n```{tag}\n{program}```\nIt reads both numbers."


@pytest.mark.parametrize("language,tag", [("c", "c"), ("cpp", "cpp"), ("javascript", "js")])
def test_a_right_program_passes_and_a_wrong_one_fails_in_every_language(sandbox, language, tag):
    wrong = PROGRAMS[language].replace("a + b", "a - b")
    results = scorer(sandbox, language, tests=SUM_TESTS).score_batch(
        [{}, {}], [fenced(tag, PROGRAMS[language]), fenced(tag, wrong)]
    )
    assert (results[0].score, results[0].reason) == (1.0, "all 3 tests passed")
    assert results[1].score == 0.0
    assert "wrong output: got '7\\n'" not in results[1].reason
    assert results[1].reason.startswith("0/3 tests passed; test 1: wrong output: got '-1\\n'")


def test_fraction_scoring_counts_the_tests_an_overflowing_sum_still_passes(sandbox):
    result = scorer(sandbox, "c", tests=SUM_TESTS, scoring="fraction").score({}, fenced("c", INT_SUM))
    assert result.score == pytest.approx(2 / 3)
    assert result.parts["tests_passed"] == 2.0
    assert "test 3: wrong output" in result.reason


def test_a_compile_error_is_the_programs_failure_with_the_compilers_message(sandbox):
    results = scorer(sandbox, "c", tests=SUM_TESTS).score_batch(
        [{}, {}], [fenced("c", "int main(void) { return missing; }\n"), fenced("c", "")]
    )
    assert results[0].score == 0.0
    assert results[0].reason.startswith("the program did not compile: error: ‘missing’ undeclared")
    assert results[0].output["status"] == "ok"  # the sandbox ran: not a sandbox error
    assert results[1].reason == "the program did not compile: undefined reference to `main'"


def test_a_crash_and_a_loop_fail_their_tests_without_costing_the_others_theirs(sandbox):
    crash = "#include <stdlib.h>\nint main(void) { abort(); }\n"
    loop = "int main(void) { for (;;) {} }\n"
    results = scorer(sandbox, "c", tests=SUM_TESTS[:1], timeout_s=2).score_batch(
        [{}, {}, {}], [fenced("c", crash), fenced("c", loop), fenced("c", PROGRAMS["c"])]
    )
    assert "the program failed (killed by signal 6)" in results[0].reason
    assert results[1].reason == "0/1 tests passed; test 1: time ran out"
    assert results[2].score == 1.0


def test_a_javascript_error_is_named(sandbox):
    result = scorer(sandbox, "javascript", tests=SUM_TESTS[:1]).score({}, fenced("js", "null.x;\n"))
    assert result.reason.startswith("0/1 tests passed; test 1: the program failed (exit code 1) TypeError:")


def test_javascript_call_tests_compare_returned_json(sandbox):
    tests = [
        {"call": "add", "args": [1, 2], "expected": 3},
        {"call": "add", "args": [0.1, 0.2], "expected": 0.3},
        {"call": "pairs", "args": [["a", "b"]], "expected": {"a": 0, "b": 1}},
    ]
    good = (
        "function add(a, b) { return a + b; }\n"
        "const pairs = (keys) => Object.fromEntries(keys.map((k, i) => [k, i]));\n"
    )
    results = scorer(sandbox, "javascript", tests=tests, scoring="fraction").score_batch(
        [{}, {}, {}, {}, {}],
        [
            fenced("javascript", good),
            fenced("javascript", "function add(a, b) { return a - b; }\n"),
            fenced("javascript", "function add() { throw new RangeError('no'); }\n"),
            fenced("javascript", "syntax error here\n"),
            fenced("javascript", "function other() {}\n"),
        ],
    )
    assert (results[0].score, results[0].reason) == (1.0, "all 3 tests passed")
    assert results[1].reason.startswith("0/3 tests passed; test 1: add(1, 2) returned -1, expected 3")
    assert "add(1, 2) threw 'no'" in results[2].reason
    assert results[3].reason.startswith("the program raised SyntaxError")
    assert results[4].reason.startswith(
        "0/3 tests passed; test 1: add(1, 2): the program defines no function add"
    )


def test_row_tests_in_a_form_the_language_lacks_are_named(sandbox):
    rows = [
        {"tests": ["assert add(1, 2) == 3"]},
        {"tests": [{"stdin": "1\n", "stdout": "1\n"}, {"call": "add", "args": [1], "expected": 1}]},
        {"tests": {"inputs": ["3 4\n"], "outputs": ["7\n"]}},
    ]
    results = scorer(sandbox, "c").score_batch(rows, [fenced("c", PROGRAMS["c"])] * 3)
    assert results[0].reason == ("row's 'tests': assert scripts are Python; give {stdin, stdout} tests for c")
    assert results[1].reason == (
        "row's 'tests': test 2: c has no call tests (only JavaScript does); give {stdin, stdout} tests"
    )
    assert results[2].score == 1.0  # APPS-style stdin and expected stdout


def test_specs_that_cannot_run_are_refused_naming_the_field():
    with pytest.raises(SpecError) as error:
        validate_spec({"type": "code_tests", "language": "rust"})
    assert error.value.field == "language"
    with pytest.raises(SpecError) as error:
        validate_spec(
            {"type": "code_tests", "language": "cpp", "tests": [{"call": "f", "args": [], "expected": 1}]}
        )
    assert (error.value.field, error.value.message) == (
        "tests",
        "cpp has no call tests (only JavaScript does); give {stdin, stdout} tests",
    )
    with pytest.raises(SpecError) as error:
        validate_spec(
            {
                "type": "code_tests",
                "language": "javascript",
                "tests": [{"call": "f", "kwargs": {"x": 1}, "expected": 1}],
            }
        )
    assert "no keyword arguments" in error.value.message
    spec = validate_spec({"type": "code_tests", "language": "c"})
    assert (spec["tests_field"], spec["timeout_s"]) == ("tests", 10)


def test_the_block_of_the_language_is_the_program():
    text = "```python\nprint(1)\n```\n```c\nint main(void){}\n```\n```js\nconsole.log(1)\n```"
    assert extract_code(text, "c") == "int main(void){}\n"
    assert extract_code(text, "javascript") == "console.log(1)\n"
    assert extract_code(text, "cpp") == text  # no C++ block and no untagged one: all of it
    assert extract_code("```\nint main(){}\n```", "cpp") == "int main(){}\n"
    assert extract_code("```c++\nint main(){}", "cpp") == "int main(){}"  # cut off: runs to the end
