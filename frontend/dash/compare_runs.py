"""Compare runs: one metric of several jobs of the user's teams, overlaid by step."""

import plotly.graph_objects as go
from dash import dcc, html
from dash.dependencies import Input, Output
from django_plotly_dash import DjangoDash

from anneal.accounts.selectors import teams_for
from anneal.training.models import Job
from anneal.training.selectors import metric_keys, metric_series

app = DjangoDash("CompareRuns", serve_locally=True)
app.layout = html.Div(
    [
        html.Div(
            [
                html.Label(
                    ["Jobs", dcc.Dropdown(id="jobs", multi=True, placeholder="choose jobs to compare")]
                ),
                html.Label(
                    [
                        "Metric",
                        dcc.Dropdown(
                            id="metric",
                            value="reward",
                            options=[{"label": "reward", "value": "reward"}],
                            clearable=False,
                        ),
                    ]
                ),
            ],
            style={
                "display": "grid",
                "gridTemplateColumns": "2fr 1fr",
                "gap": "12px",
                "fontFamily": "system-ui",
            },
        ),
        dcc.Graph(id="chart", config={"displaylogo": False}),
    ]
)


def _jobs(user):
    return Job.objects.filter(team__in=teams_for(user))


@app.callback(Output("jobs", "options"), Output("jobs", "value"), Input("metric", "id"))
def job_choices(_, *, user, **kwargs):
    jobs = list(_jobs(user).order_by("-created_at")[:200])
    options = [{"label": f"#{job.pk} {job.name} ({job.state})", "value": job.pk} for job in jobs]
    return options, [job.pk for job in jobs[:3]]


@app.callback(Output("metric", "options"), Input("jobs", "value"))
def metric_choices(job_ids, *, user, **kwargs):
    jobs = _jobs(user).filter(pk__in=job_ids or [])
    return [{"label": key, "value": key} for key in metric_keys(jobs=jobs)] or [
        {"label": "reward", "value": "reward"}
    ]


@app.callback(Output("chart", "figure"), Input("jobs", "value"), Input("metric", "value"))
def chart(job_ids, metric, *, user, **kwargs):
    jobs = _jobs(user).filter(pk__in=job_ids or [])
    names = dict(jobs.values_list("pk", "name"))
    figure = go.Figure()
    for job_id, (steps, values) in metric_series(jobs=jobs, key=metric or "reward").items():
        figure.add_trace(go.Scatter(x=steps, y=values, mode="lines", name=f"#{job_id} {names[job_id]}"))
    if not figure.data:
        # Without a line Plotly draws arbitrary axes (-1 to 6); say why the chart is empty instead.
        figure.update_layout(
            xaxis={"visible": False},
            yaxis={"visible": False},
            annotations=[
                {
                    "text": f"No {metric or 'reward'} yet in the jobs chosen: it appears once they log a step."
                    if job_ids
                    else "Choose jobs above to compare their metrics by step.",
                    "showarrow": False,
                    "font": {"size": 14, "color": "#5b6473"},
                }
            ],
            template="plotly_white",
        )
        return figure
    figure.update_layout(
        margin={"l": 48, "r": 16, "t": 16, "b": 40},
        xaxis_title="step",
        yaxis_title=metric,
        legend={"orientation": "h", "y": -0.25},
        template="plotly_white",
    )
    return figure
