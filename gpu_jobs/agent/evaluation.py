"""Held-out evaluation of an agent job: episodes on held-out tasks (repositories the job never trains on; one
greedy episode each, or the environment's ``eval_episodes`` sampled ones), scored as the habits the product's
articles describe.

``agent_scores`` turns the episodes' results into the metric event's fields:

- ``eval/<domain>`` and ``eval/mean``: the share of episodes that solved their task (every test passes on the
  final state), so the forgetting alarm, the job page's held-out chart and the model card read an agent job's
  evaluation as they read any other;
- ``eval_agent/solved``, ``eval_agent/tests`` (mean share of tests passing at the end),
  ``eval_agent/tested_before_finish`` (episodes that called finish with a run_tests after their last edit:
  gpu_jobs.agent.episode.tested_before_finish; an episode with no edit counts when it ran them at all),
  ``eval_agent/edited`` (episodes where an edit applied), ``eval_agent/edited_then_tested`` (both: changed the
  code, ran the tests after, finished: the habit without the episodes that never touch the code),
  ``eval_agent/valid_calls`` (mean share of an episode's turns holding a well-formed tool call),
  ``eval_agent/turns`` (mean turns) and ``eval_agent/episodes`` (all of them, every task's episodes counted).
"""

from __future__ import annotations

from collections import defaultdict

from gpu_jobs.agent.episode import EpisodeResult
from gpu_jobs.domains import row_domain


def agent_scores(rows: list[dict], results: list[EpisodeResult]) -> dict[str, float]:
    """The metric fields for episodes ``results`` of ``rows`` (one each, in order; a row repeats for each of
    its episodes). Precondition: non-empty."""
    by_domain: dict[str, list[float]] = defaultdict(list)
    for row, result in zip(rows, results, strict=True):
        by_domain[row_domain(row)].append(result.parts["solved"])
    n = len(results)
    scores = {f"eval/{domain}": sum(values) / len(values) for domain, values in sorted(by_domain.items())}
    scores["eval/mean"] = sum(r.parts["solved"] for r in results) / n
    scores.update(
        {
            "eval_agent/solved": scores["eval/mean"],
            "eval_agent/tests": sum(r.parts["tests"] for r in results) / n,
            "eval_agent/tested_before_finish": sum(r.parts.get("tested", 0.0) for r in results) / n,
            "eval_agent/edited": sum(r.parts.get("edited", 0.0) for r in results) / n,
            "eval_agent/edited_then_tested": sum(edited_then_tested(r) for r in results) / n,
            "eval_agent/valid_calls": sum(r.parts["format"] for r in results) / n,
            "eval_agent/turns": sum(r.parts["turns"] for r in results) / n,
            "eval_agent/episodes": float(n),
        }
    )
    return scores


def edited_then_tested(result: EpisodeResult) -> float:
    """1.0 when the episode changed the code, ran the tests after its last edit, and finished."""
    return result.parts.get("edited", 0.0) * result.parts.get("tested", 0.0)
