"""The benchmarks' plots: lines against a log2 x axis, written as a PNG (matplotlib, headless)."""

from __future__ import annotations

from pathlib import Path


def log2_lines(
    path: Path,
    lines: dict[str, dict[int, float]],
    *,
    title: str,
    xlabel: str,
    ylabel: str,
    dashed: frozenset[str] = frozenset(),
) -> Path:
    """One line per label (x -> y; the `dashed` ones drawn dashed, without markers), x on a log2 axis."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axes = plt.subplots(figsize=(6, 3.6), dpi=110)
    ticks: set[int] = set()
    for label, points in lines.items():
        style = {"linestyle": "--"} if label in dashed else {"marker": "o"}
        axes.plot(list(points), list(points.values()), label=label, **style)
        ticks |= set(points)
    axes.set_xscale("log", base=2)
    axes.set_xticks(sorted(ticks), [str(tick) for tick in sorted(ticks)])
    axes.set_xlabel(xlabel)
    axes.set_ylabel(ylabel)
    axes.set_title(title)
    return finish(figure, axes, path)


def finish(figure, axes, path: Path) -> Path:
    """Grid, legend and layout of a benchmark plot, written to `path` (its folder made) and closed."""
    import matplotlib.pyplot as plt

    axes.grid(alpha=0.3)
    axes.legend(fontsize=8)
    figure.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path)
    plt.close(figure)
    return path
