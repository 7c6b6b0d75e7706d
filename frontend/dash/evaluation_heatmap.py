"""Held-out evaluation per domain: the base model (step 0) and each evaluated checkpoint of one job."""

import plotly.graph_objects as go
from dash import dcc, html
from dash.dependencies import Input, Output
from django_plotly_dash import DjangoDash

from anneal.accounts.selectors import teams_for
from anneal.training.models import Job
from anneal.training.selectors import evaluation_table

app = DjangoDash("EvaluationHeatmap", serve_locally=True)
app.layout = html.Div(
    [
        html.Label(["Job", dcc.Dropdown(id="job", clearable=False, placeholder="a job with evaluations")]),
        dcc.Graph(id="heatmap", config={"displaylogo": False}),
    ],
    style={"fontFamily": "system-ui"},
)


def _jobs(user):
    # A job launched without a held-out set stores null there, which isnull=False would still match.
    return Job.objects.filter(team__in=teams_for(user), spec__has_key="eval_dataset_version").exclude(
        spec__eval_dataset_version=None
    )


@app.callback(Output("job", "options"), Output("job", "value"), Input("heatmap", "id"))
def job_choices(_, *, user, **kwargs):
    jobs = list(_jobs(user).order_by("-created_at")[:200])
    options = [{"label": f"#{job.pk} {job.name} ({job.state})", "value": job.pk} for job in jobs]
    return options, jobs[0].pk if jobs else None


@app.callback(Output("heatmap", "figure"), Input("job", "value"))
def heatmap(job_id, *, user, **kwargs):
    figure = go.Figure()
    job = _jobs(user).filter(pk=job_id).first() if job_id else None
    domains, steps, scores = evaluation_table(job=job) if job is not None else ([], [], [])
    if not steps:
        # An empty heatmap would draw arbitrary axes (-1 to 6); say why there is nothing instead.
        return _empty_figure(
            "No evaluation yet: a job's held-out set is scored before step 1 and as it trains."
            if job is not None
            else "No job with a held-out set yet: choose one (evaluation set) when launching a job."
        )
    if job is not None:
        columns = ["base" if step == 0 else f"step {step}" for step in steps]
        figure.add_trace(
            go.Heatmap(
                z=scores,
                x=columns,
                y=domains,
                zmin=0,
                zmax=1,
                colorscale="Viridis",
                text=[[f"{v:.2f}" if v is not None else "" for v in row] for row in scores],
                texttemplate="%{text}",
                hovertemplate="%{y} at %{x}: %{z:.3f}<extra></extra>",
            )
        )
    figure.update_layout(margin={"l": 80, "r": 16, "t": 16, "b": 40}, template="plotly_white")
    return figure


def _empty_figure(message: str) -> go.Figure:
    figure = go.Figure()
    figure.update_layout(
        xaxis={"visible": False},
        yaxis={"visible": False},
        annotations=[{"text": message, "showarrow": False, "font": {"size": 14, "color": "#5b6473"}}],
        margin={"l": 16, "r": 16, "t": 16, "b": 16},
        height=240,
        template="plotly_white",
    )
    return figure
