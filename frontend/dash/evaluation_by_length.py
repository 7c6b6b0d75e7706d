"""Held-out evaluation by prompt length: one job's score per length bucket, the base model (step 0) against
each evaluated checkpoint, for one domain or the mean: whether the model uses its context."""

import plotly.graph_objects as go
from dash import dcc, html
from dash.dependencies import Input, Output
from django_plotly_dash import DjangoDash

from anneal.accounts.selectors import teams_for
from anneal.training.length_results import length_evaluation
from anneal.training.models import Job

app = DjangoDash("EvaluationByLength", serve_locally=True)
app.layout = html.Div(
    [
        html.Div(
            [
                html.Label(
                    ["Job", dcc.Dropdown(id="job", clearable=False, placeholder="a job with evaluations")]
                ),
                html.Label(["Domain", dcc.Dropdown(id="domain", clearable=False)]),
            ],
            style={"display": "grid", "gridTemplateColumns": "2fr 1fr", "gap": "12px"},
        ),
        dcc.Graph(id="by-length", config={"displaylogo": False}),
    ],
    style={"fontFamily": "system-ui"},
)


def _jobs(user):
    # Only the user's teams' jobs, and only those with a held-out set (the others have nothing to show).
    return Job.objects.filter(team__in=teams_for(user), spec__eval_dataset_version__isnull=False)


@app.callback(Output("job", "options"), Output("job", "value"), Input("by-length", "id"))
def job_choices(_, *, user, **kwargs):
    jobs = list(_jobs(user).order_by("-created_at")[:200])
    options = [{"label": f"#{job.pk} {job.name} ({job.state})", "value": job.pk} for job in jobs]
    return options, jobs[0].pk if jobs else None


@app.callback(Output("domain", "options"), Output("domain", "value"), Input("job", "value"))
def domain_choices(job_id, *, user, **kwargs):
    job = _jobs(user).filter(pk=job_id).first() if job_id else None
    domains = length_evaluation(job=job)["domains"] if job is not None else []
    return [{"label": d, "value": d} for d in domains], domains[0] if domains else None


@app.callback(Output("by-length", "figure"), Input("job", "value"), Input("domain", "value"))
def by_length_figure(job_id, domain, *, user, **kwargs):
    job = _jobs(user).filter(pk=job_id).first() if job_id else None
    return figure_for(length_evaluation(job=job) if job is not None else None, domain or "mean")


def figure_for(evaluation: dict | None, domain: str) -> go.Figure:
    """One line per evaluated step over the length buckets; the base model dotted."""
    figure = go.Figure()
    if evaluation and evaluation["bounds"]:
        labels = [f"≤ {bound}" for bound in evaluation["bounds"]]
        for step, scores in zip(evaluation["steps"], evaluation["scores"].get(domain, []), strict=False):
            figure.add_trace(
                go.Scatter(
                    x=labels,
                    y=scores,
                    mode="lines+markers",
                    name="base (step 0)" if step == 0 else f"step {step}",
                    line={"dash": "dot" if step == 0 else "solid"},
                )
            )
    else:
        figure.add_annotation(
            text="No evaluation by prompt length for this job yet",
            showarrow=False,
            x=0.5,
            y=0.5,
            xref="paper",
            yref="paper",
        )
    figure.update_layout(
        margin={"l": 50, "r": 16, "t": 16, "b": 40},
        template="plotly_white",
        xaxis={"title": "prompt length (tokens)", "type": "category"},
        yaxis={"title": "score", "range": [0, 1.05]},
    )
    return figure
