"""Preview: score pasted or sampled completions with a spec that need not be saved."""

from anneal.verifiers.services import platform_sandbox, verifier_spec_check
from gpu_jobs.rewards import ScoreResult, build_scorer

PREVIEW_EXAMPLE = {
    "spec": {"type": "numeric", "reference_field": "answer"},
    "samples": [
        {"row": {"prompt": "12+45=", "answer": "57"}, "completion": "The answer is 57."},
        {"row": {"prompt": "12+45=", "answer": "57"}, "completion": "58"},
    ],
}


def verifier_preview(*, spec: object, samples: list[dict]) -> list[ScoreResult]:
    """One result per {"row", "completion"} sample, in order. InputError (naming spec.<field>) for a bad spec;
    a sample the verifier cannot score gets 0 with the reason, never an error."""
    clean = verifier_spec_check(spec)
    scorer = build_scorer(clean, sandbox=platform_sandbox())
    return scorer.score_batch([s["row"] for s in samples], [s["completion"] for s in samples])
