"""The drawings of §9.4 (the Conductor): the placements compared on one trace, and their TTFT as
the load grows.

* :func:`placement_comparison_figure` draws :class:`~kvcourse.cluster.conductor_sim.ConductorRun`
  results side by side: hit rate, tokens prefilled, and mean and p90 TTFT (log scale), one bar
  per placement with its value written on it, optional reference values (the mean TTFTs of
  Fig. 5 of the Mooncake paper's FAST '25 version) as hollow marks;
* :func:`ttft_load_plot` draws mean TTFT against the trace's speed-up, one line per placement.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

from matplotlib.axes import Axes
from matplotlib.figure import Figure

from kvcourse.cluster.conductor_sim import ConductorRun
from kvcourse.viz.style import BLUE, FONT_SIZE, GREEN, ORANGE, OTHERS, PURPLE, despine

__all__ = ["placement_comparison_figure", "ttft_load_plot"]

_COLORS = (OTHERS, ORANGE, BLUE, GREEN, PURPLE)


def _check_runs(runs: object) -> dict[str, ConductorRun]:
    if not isinstance(runs, Mapping) or not runs:
        raise ValueError("runs must be a non-empty {placement name: ConductorRun} mapping")
    for name, run in runs.items():
        if not isinstance(run, ConductorRun):
            raise TypeError(f"runs[{name!r}] must be a ConductorRun, got {run!r:.60}")
    return dict(runs)


_SHORT = {
    "load-balanced": "load-\nbalanced",
    "cache-aware": "cache-\naware",
    "cache-aware + replication": "cache-\naware +\nreplication",
}


def _short(name: str) -> str:
    return _SHORT.get(name, name)


def placement_comparison_figure(
    runs: Mapping[str, ConductorRun],
    *,
    reference_ttft_s: Mapping[str, float] | None = None,
    reference_label: str = "paper",
    title: str = "",
) -> Figure:
    """Three panels, one bar per placement: block hit rate, tokens prefilled (millions), and TTFT
    (mean bar, p90 tick; log scale). ``reference_ttft_s`` adds hollow diamonds for a placement's
    quoted mean TTFT (e.g. Fig. 5 of the Mooncake paper's FAST '25 version)."""
    runs = _check_runs(runs)
    names = list(runs)
    colors = [_COLORS[i % len(_COLORS)] for i in range(len(names))]
    fig = Figure(figsize=(9.6, 3.7), layout="constrained")
    axes = fig.subplots(1, 3)
    x = range(len(names))
    panels = (
        ("block hit rate", [r.hit_rate for r in runs.values()], "{:.0%}"),
        ("tokens prefilled (M)", [r.tokens_computed / 1e6 for r in runs.values()], "{:.0f}"),
    )
    for ax, (label, values, fmt) in zip(axes[:2], panels, strict=True):
        bars = ax.bar(x, values, color=colors, width=0.7)
        ax.bar_label(bars, [fmt.format(v) for v in values], fontsize=FONT_SIZE - 1.5, padding=2)
        ax.set_title(label, fontsize=FONT_SIZE)
        ax.set_ylim(0, max(values) * 1.18 if max(values) > 0 else 1)
        ax.set_yticks([])
    ax = axes[2]
    means = [r.mean_ttft_s for r in runs.values()]
    p90s = [r.p90_ttft_s for r in runs.values()]
    bars = ax.bar(x, means, color=colors, width=0.7)
    ax.bar_label(bars, [_seconds(m) for m in means], fontsize=FONT_SIZE - 1.5, padding=2)
    ax.plot(x, p90s, "_", color="0.2", ms=22, mew=1.6, label="p90")
    ax.set_yscale("log")
    ax.set_title("TTFT (s, log): mean bars", fontsize=FONT_SIZE)
    if reference_ttft_s:
        xs = [names.index(k) for k in reference_ttft_s if k in names]
        ys = [reference_ttft_s[names[i]] for i in xs]
        ax.plot(xs, ys, "D", mfc="none", mec="0.1", ms=7, label=f"{reference_label} mean")
    finite = [v for v in [*means, *p90s] if math.isfinite(v) and v > 0]
    if finite:
        ax.set_ylim(min(finite) / 2, max(finite) * 3)
    ax.legend(frameon=False, fontsize=FONT_SIZE - 2, loc="upper right")
    for ax in axes:
        ax.set_xticks(list(x), [_short(n) for n in names], fontsize=FONT_SIZE - 2.5)
        despine(ax)
    if title:
        fig.suptitle(title, fontsize=FONT_SIZE)
    return fig


def _seconds(value: float) -> str:
    if not math.isfinite(value):
        return "–"
    return f"{value:.2f}" if value < 10 else f"{value:.0f}"


def ttft_load_plot(
    sweep: Mapping[float, Mapping[str, ConductorRun]],
    *,
    ax: Axes | None = None,
    statistic: str = "mean",
) -> Axes:
    """Mean (or ``statistic="p90"``) TTFT against the speed-up of the trace's arrivals, one line
    per placement: ``sweep`` maps each speed-up to that run's ``{placement: ConductorRun}``."""
    if not isinstance(sweep, Mapping) or not sweep:
        raise ValueError("sweep must map each speed-up to a {placement name: ConductorRun} mapping")
    if statistic not in ("mean", "p90"):
        raise ValueError(f"statistic must be 'mean' or 'p90', got {statistic!r}")
    speedups: Sequence[float] = sorted(sweep)
    names = list(_check_runs(sweep[speedups[0]]))
    if ax is None:
        ax = Figure(figsize=(6.4, 4.0), layout="constrained").subplots()
    for i, name in enumerate(names):
        values = []
        for s in speedups:
            run = _check_runs(sweep[s]).get(name)
            if run is None:
                raise ValueError(f"speed-up {s} has no run for placement {name!r}")
            values.append(run.mean_ttft_s if statistic == "mean" else run.p90_ttft_s)
        color = _COLORS[i % len(_COLORS)]
        color = "0.45" if color == OTHERS else color
        ax.plot(speedups, values, "o-", color=color, lw=2, ms=5, label=name)
    ax.set_yscale("log")
    ax.set_xlabel("arrivals sped up ×", fontsize=FONT_SIZE)
    ax.set_ylabel(f"{statistic} TTFT (s)", fontsize=FONT_SIZE)
    ax.legend(frameon=False, fontsize=FONT_SIZE - 1.5)
    ax.grid(True, which="major", color="0.9", lw=0.8)
    despine(ax)
    return ax
