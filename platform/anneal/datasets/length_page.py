"""The prompt-length chart of the dataset page: the model to count with (``?model=``), the histogram of its
token counts (anneal.datasets.selectors.prompt_length_histogram) and the chart's geometry, an inline SVG
with a marked line at the model's context window."""

import math
from dataclasses import dataclass

from django.conf import settings

from anneal.datasets.models import Dataset, DatasetVersion
from anneal.datasets.selectors import LengthHistogram, prompt_length_histogram
from anneal.training.models import Job
from gpu_jobs.model_store import TINY, list_models

WIDTH, HEIGHT, MAX_EXPONENT = 640, 150, 18  # bins up to 2^18 = 262,144 tokens


@dataclass
class Bar:
    x: float
    y: float  # top of the bar (SVG y grows downwards)
    width: float
    height: float
    label: str
    count: int
    over_window: bool


@dataclass
class Chart:
    bars: list[Bar]
    window_x: float | None
    width: int = WIDTH
    height: int = HEIGHT


def default_model(dataset: Dataset) -> str:
    """The model of the team's latest job on this dataset, else the tiny model."""
    job = Job.objects.filter(team=dataset.team, dataset_version__dataset=dataset).order_by("-pk").first()
    model = (job.spec or {}).get("model") if job else None
    return model if isinstance(model, str) and model else TINY


def _tokens(value: int) -> str:
    return f"{value // 1024}k" if value >= 1024 and value % 1024 == 0 else str(value)


def chart(histogram: LengthHistogram) -> Chart:
    """Bars of equal width, one per doubling of length (a log axis), extended to the window's bin."""
    bars = list(histogram.bars)
    if not bars:
        return Chart(bars=[], window_x=None)
    first = max(0, bars[0].high.bit_length() - 1)
    last = bars[-1].high.bit_length() - 1
    if histogram.window:
        last = min(MAX_EXPONENT, max(last, histogram.window.bit_length()))
    slots = last - first + 1
    slot = WIDTH / slots
    counts = {bar.high.bit_length() - 1: bar for bar in bars}
    peak = max(1, histogram.peak)
    drawn = []
    for index, exponent in enumerate(range(first, last + 1)):
        bar = counts.get(exponent)
        low = (1 << (exponent - 1)) if exponent else 0
        count = bar.count if bar else 0
        height = round((HEIGHT - 20) * count / peak, 1)
        drawn.append(
            Bar(
                x=round(index * slot + 1, 1),
                y=round(HEIGHT - height, 1),
                width=round(slot - 2, 1),
                height=height,
                label=f"{_tokens(low)}-{_tokens((1 << exponent) - 1) if exponent else '0'}",
                count=count,
                over_window=bool(histogram.window) and low > (histogram.window or 0),
            )
        )
    window_x = None
    if histogram.window:
        # Inside its bin [2^(e-1), 2^e) the line sits at log2(window) - (e - 1) of the bar's width.
        exponent = histogram.window.bit_length()
        inside = math.log2(histogram.window) - (exponent - 1)
        window_x = round(min(WIDTH, (exponent - first + inside) * slot), 1)
    return Chart(bars=drawn, window_x=window_x)


def length_context(request, *, dataset: Dataset, version: DatasetVersion) -> dict:
    """What the dataset page's length chart needs; an unknown ``?model=`` is said, and the default used."""
    names = [model.name for model in list_models(settings.MODEL_STORE)]
    chosen = request.GET.get("model") or default_model(dataset)
    error = ""
    if chosen not in names:
        error = f"model '{chosen}' is not in the model store; showing {default_model(dataset)}"
        chosen = default_model(dataset) if default_model(dataset) in names else TINY
    try:
        histogram = prompt_length_histogram(version=version, model=chosen, store=settings.MODEL_STORE)
    except OSError:
        return {"length_error": "the rows file of this version cannot be read"}
    return {
        "length_models": names,
        "length_model": chosen,
        "length_histogram": histogram,
        "length_chart": chart(histogram),
        "length_error": error,
    }
