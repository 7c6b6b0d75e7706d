"""``{% job_length_panels job %}``: the job page's long-context panels (training/job_length.html), the length
curriculum and the held-out evaluation by prompt length, drawn from the job's events on the server and kept
live by job_length.js. The page passes a job the user may see."""

from django import template

from anneal.training.length_results import curriculum_progress, length_evaluation

register = template.Library()


@register.inclusion_tag("training/job_length.html")
def job_length_panels(job) -> dict:
    spec = job.spec if isinstance(job.spec, dict) else {}
    curriculum = curriculum_progress(job=job)
    evaluation = length_evaluation(job=job)
    long_context = bool(evaluation["bounds"] or curriculum or spec.get("max_prompt_length"))
    return {
        "job": job,
        "curriculum": curriculum,
        # Shown for a job with a held-out set once it has scores by length, or set up for long prompts.
        "show_length_eval": bool(spec.get("eval_dataset_version")) and long_context,
        "length_data": {"evaluation": evaluation, "curriculum": curriculum},
        "prompt_tokens": spec.get("prompt_tokens"),
        "max_prompt_length": spec.get("max_prompt_length") or 0,
        "overflow_policy": spec.get("overflow_policy") or "refuse",
    }
