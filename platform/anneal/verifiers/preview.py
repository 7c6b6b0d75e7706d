"""Preview: score pasted or sampled completions with a spec that need not be saved."""

from django.contrib.auth.models import User

from anneal.accounts.models import Team
from anneal.accounts.services import audit
from anneal.errors import InputError
from anneal.verifiers.outbound import judge_spec_check, team_outbound
from anneal.verifiers.sandbox_quota import preview_rate_check
from anneal.verifiers.services import team_sandbox, verifier_spec_check, web_model_problem
from gpu_jobs.rewards import ScoreResult, build_scorer

PREVIEW_EXAMPLE = {
    "spec": {"type": "numeric", "reference_field": "answer"},
    "samples": [
        {"row": {"prompt": "12+45=", "answer": "57"}, "completion": "The answer is 57."},
        {"row": {"prompt": "12+45=", "answer": "57"}, "completion": "58"},
    ],
}


def verifier_preview(*, team: Team, user: User, spec: object, samples: list[dict]) -> list[ScoreResult]:
    """One result per {"row", "completion"} sample, in order. InputError (naming spec.<field>) for a bad spec;
    a sample the verifier cannot score gets 0 with the reason, never an error.

    The caller checked that `user` may write in `team`. LimitReached past the user's previews per minute, or
    when the team's sandbox quota has no room for the code the preview runs (SandboxBusy).
    """
    clean = verifier_spec_check(spec)
    judge_spec_check(clean, team=team)
    too_big = web_model_problem(clean)
    if too_big:
        raise InputError(too_big, field="spec.model")
    preview_rate_check(user=user)
    sandbox = team_sandbox(team=team)
    # A judge reaches only the team's allowed hosts, with the team's secrets and deployments.
    results = build_scorer(clean, sandbox=sandbox, outbound=team_outbound(team)).score_batch(
        [s["row"] for s in samples], [s["completion"] for s in samples]
    )
    if sandbox.refused is not None:
        raise sandbox.refused
    # Previews run code and may call out: who ran what is kept, as for every other action.
    audit(
        team=team,
        user=user,
        action="verifier.preview",
        type=clean["type"],
        samples=len(samples),
        sandbox_runs=sandbox.runs,
    )
    return results
