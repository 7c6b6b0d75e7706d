"""Our verifiers agree with reasoning-gym's own score_answer on its tasks (full credit = a pass).

Per task: 200 generated questions; each is scored with its reference answer, a correct answer written
differently (where the task accepts one) and perturbed wrong answers. Agreement must be at least 99%.
"""

from fractions import Fraction

import pytest
import reasoning_gym

from gpu_jobs.rewards import build_scorer

SAMPLES = 200


def _number_variants(answer: str) -> list[str]:
    value = int(Fraction(answer))
    return [answer, str(value + 1), str(value - 1), str(value * 2 + 1), ""]


def _word_variants(answer: str) -> list[str]:
    swapped = (
        answer[1] + answer[0] + answer[2:] if len(answer) > 1 and answer[0] != answer[1] else answer + "x"
    )
    return [
        answer,
        answer.upper(),
        swapped,
        answer[::-1] + "x" if answer[::-1] == answer else answer[::-1],
        "",
    ]


def _fraction_variants(answer: str, entry: dict) -> list[str]:
    numerator = entry["metadata"]["simplified_numerator"]
    denominator = entry["metadata"]["simplified_denominator"]
    return [
        answer,  # as the task writes it: $\dfrac{a}{b}$, $a/b$ or a/b
        f"{numerator}/{denominator}",
        f"\\frac{{{numerator}}}{{{denominator}}}",
        f"{numerator + 1}/{denominator}",
        f"{numerator}/{denominator + 1}",
        "",
    ]


TASKS = {
    "basic_arithmetic": ({"type": "numeric"}, lambda a, e: _number_variants(a)),
    "chain_sum": ({"type": "numeric"}, lambda a, e: [*_number_variants(a), f"{a}.0"]),
    "leg_counting": ({"type": "numeric"}, lambda a, e: _number_variants(a)),
    "gcd": ({"type": "exact_match"}, lambda a, e: _number_variants(a)),
    "spell_backward": ({"type": "exact_match", "strip_whitespace": False}, lambda a, e: _word_variants(a)),
    "fraction_simplification": ({"type": "math"}, _fraction_variants),
}


@pytest.mark.parametrize("task", sorted(TASKS))
def test_agreement_with_reasoning_gym(task):
    spec, variants = TASKS[task]
    dataset = reasoning_gym.create_dataset(task, size=SAMPLES, seed=7)
    scorer = build_scorer(spec)
    rows, completions, expected = [], [], []
    for entry in dataset:
        for answer in variants(entry["answer"], entry):
            rows.append({"prompt": entry["question"], "answer": entry["answer"]})
            completions.append(answer)
            expected.append(dataset.score_answer(answer, entry) == 1.0)
    ours = [result.score == 1.0 for result in scorer.score_batch(rows, completions)]
    agree = sum(a == b for a, b in zip(ours, expected, strict=True))
    disagreements = [
        (c, r["answer"]) for c, r, a, b in zip(completions, rows, ours, expected, strict=True) if a != b
    ]
    assert agree / len(ours) >= 0.99, f"{task}: {agree}/{len(ours)} agree; e.g. {disagreements[:5]}"
    assert sum(expected) >= SAMPLES  # the references (at least) pass: the comparison is not all zeros
