"""A checkpoint's model card as a page, a Markdown download, and REST (JSON or Markdown). Team-scoped like the
rest: a checkpoint of another team is a 404."""

from django.contrib.auth.decorators import login_required
from django.http import HttpResponse
from django.shortcuts import render
from django.utils.text import slugify
from django.views.decorators.http import require_GET
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework.renderers import BaseRenderer, JSONRenderer
from rest_framework.response import Response

from anneal.accounts.selectors import can_write
from anneal.api_base import TeamScopedView
from anneal.pages import get_visible_or_404
from anneal.training.costs import usd
from anneal.training.model_card import (
    change_text,
    habit_text,
    model_card,
    model_card_markdown,
    score_text,
)
from anneal.training.models import Checkpoint

CHECKPOINTS = Checkpoint.objects.select_related("job__eval_dataset_version__dataset")


def _markdown_response(card: dict) -> HttpResponse:
    response = HttpResponse(model_card_markdown(card), content_type="text/markdown; charset=utf-8")
    name = slugify(card["job"]["name"])[:60] or f"job-{card['job']['id']}"
    response["Content-Disposition"] = (
        f'attachment; filename="model-card-{name}-step-{card["checkpoint"]["step"]}.md"'
    )
    return response


@require_GET
@login_required
def checkpoint_card(request, pk: int):
    checkpoint = get_visible_or_404(request, CHECKPOINTS, pk, team_path="job__team")
    card = model_card(checkpoint=checkpoint)
    context = {
        "section": "jobs",
        "card": card,
        "checkpoint": checkpoint,
        "can_deploy": can_write(request.user, checkpoint.job.team),
        "held_out_rows": [
            {
                "domain": row["domain"],
                "base": score_text(row["base"]),
                "checkpoint": score_text(row["checkpoint"]),
                "change": change_text(row["change"]),
                "direction": "up" if (row["change"] or 0) > 0 else "down" if (row["change"] or 0) < 0 else "",
            }
            for row in card["held_out"]["rows"]
        ],
        "length_rows": [
            {**row, "base": score_text(row["base"]), "checkpoint": score_text(row["checkpoint"])}
            for row in (card["held_out_by_length"] or {}).get("rows", [])
        ],
        "agent_rows": [
            {
                "label": row["label"],
                "base": habit_text(row["habit"], row["base"]),
                "checkpoint": habit_text(row["habit"], row["checkpoint"]),
            }
            for row in (card["held_out_agent"] or {}).get("rows", [])
        ],
        "run_time": _duration(card["cost"]["run_seconds"]),
        "spend": usd(card["cost"]["total"]),
        "started": (card["time"]["started_at"] or "")[:19].replace("T", " "),
        "finished": (card["time"]["finished_at"] or "")[:19].replace("T", " "),
        **_curve(card["curves"].get("reward") or []),
    }
    return render(request, "training/model_card.html", context)


def _duration(seconds: float) -> str:
    minutes, second = divmod(round(seconds), 60)
    hours, minute = divmod(minutes, 60)
    return f"{hours} h {minute} min" if hours else f"{minute} min {second} s" if minute else f"{second} s"


def _curve(points: list[list[float]], *, width: int = 640, height: int = 180, pad: int = 8) -> dict:
    """The reward curve as an SVG polyline's points, scaled to the box (no script: prints and exports)."""
    if not points:
        return {}
    steps, values = [p[0] for p in points], [p[1] for p in points]
    low, high = min(0.0, min(values)), max(1.0, max(values))
    first, last = min(steps), max(steps)
    span_x, span_y = (last - first) or 1, (high - low) or 1

    def xy(step: float, value: float) -> str:
        x = pad + (step - first) / span_x * (width - 2 * pad)
        y = height - pad - (value - low) / span_y * (height - 2 * pad)
        return f"{x:.1f},{y:.1f}"

    return {
        "curve_points": " ".join(xy(s, v) for s, v in zip(steps, values, strict=True)),
        "curve_first": int(first),
        "curve_last": int(last),
        "curve_low": f"{min(values):.3f}",
        "curve_high": f"{max(values):.3f}",
    }


@require_GET
@login_required
def checkpoint_card_markdown(request, pk: int):
    checkpoint = get_visible_or_404(request, CHECKPOINTS, pk, team_path="job__team")
    return _markdown_response(model_card(checkpoint=checkpoint))


class CheckpointCardApi(TeamScopedView):
    @extend_schema(
        responses={200: OpenApiResponse(OpenApiTypes.OBJECT)},
        description="The checkpoint's model card: base model, data and verifier versions, held-out scores of the "
        "base model against this checkpoint per domain (and per prompt-length bucket), the training curve, "
        "alarms, cost and time. The same as Markdown: GET …/card/markdown.",
    )
    def get(self, request, pk: int):
        checkpoint = self.get_scoped(CHECKPOINTS, pk, team_path="job__team")
        return Response(model_card(checkpoint=checkpoint))


class MarkdownRenderer(BaseRenderer):
    """Lets a client ask for text/markdown; a refusal (a dict) still reads as JSON text."""

    media_type = "text/markdown"
    format = "md"
    charset = "utf-8"

    def render(self, data, accepted_media_type=None, renderer_context=None):
        return data.encode() if isinstance(data, str) else JSONRenderer().render(data)


class CheckpointCardMarkdownApi(TeamScopedView):
    renderer_classes = [JSONRenderer, MarkdownRenderer]

    @extend_schema(
        responses={(200, "text/markdown"): OpenApiTypes.STR}, description="The model card as Markdown."
    )
    def get(self, request, pk: int):
        checkpoint = self.get_scoped(CHECKPOINTS, pk, team_path="job__team")
        return _markdown_response(model_card(checkpoint=checkpoint))
