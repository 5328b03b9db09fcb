"""Latency against request rate (§7): the vLLM paper's Fig. 12 as the simulator draws it.

* :func:`latency_curves`: one :class:`LatencyCurve` per scheme out of one or more
  :class:`~kvcourse.serving.RateSweep` (a scheme may be swept on its own grid of rates), with its
  highest sustainable rate for the mean, median or 90th-percentile latency;
* :func:`latency_rate_plot`: normalized latency (ms per token) against the request rate, flat
  then a knee, with the latency target and each scheme's highest sustainable rate marked;
* :func:`batch_rate_plot`: the mean batch size against the request rate, which shows why the
  knee comes: the batch grows with the rate until the scheme's memory is full;
* :func:`sustainable_ratio_plot`: how many times Oracle's and Max's rate Paged sustains, beside
  published figures (single values, "more than" values and ranges).

Everything draws on ``Axes`` you pass in, or on a new ``Figure`` built without pyplot. The
schemes keep their colours from :data:`~kvcourse.viz.style.SCHEME_COLORS`.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.ticker import FixedLocator, FuncFormatter, NullFormatter, NullLocator
from matplotlib.transforms import offset_copy

from kvcourse.serving.latency import LatencyResult
from kvcourse.serving.sweep import RateSweep, sustainable_rate
from kvcourse.viz.style import FONT_SIZE, SCHEME_COLORS, despine

__all__ = [
    "LatencyCurve",
    "batch_rate_plot",
    "latency_curves",
    "latency_rate_plot",
    "sustainable_ratio_plot",
]

#: The latency statistics a curve can follow, and the LatencyResult field of each.
STATISTICS: dict[str, str] = {
    "mean": "normalized_latency_s",
    "p50": "normalized_latency_p50_s",
    "p90": "normalized_latency_p90_s",
}
_STAT_WORDS = {"mean": "mean", "p50": "median", "p90": "90th-percentile"}


@dataclass(frozen=True)
class LatencyCurve:
    """One scheme's latency against the request rate.

    ``rates`` (req/s, increasing), and at each rate ``latency_s`` (the chosen statistic of the
    normalized latency, s/token) and ``batch_size`` (mean running requests per iteration);
    ``max_rate``: the highest rate at ≤ ``target_s``, interpolated between swept rates
    (:func:`~kvcourse.serving.sustainable_rate`; NaN if the first rate already misses it, the
    last rate if none does, then ``open_ended`` is True).
    """

    scheme: str
    label: str
    statistic: str
    target_s: float
    rates: tuple[float, ...]
    latency_s: tuple[float, ...]
    batch_size: tuple[float, ...]
    max_rate: float

    @property
    def open_ended(self) -> bool:
        """True when even the highest swept rate meets the target: ``max_rate`` is a lower
        bound (sweep further)."""
        return bool(self.latency_s[-1] <= self.target_s)


def latency_curves(
    sweeps: RateSweep | Sequence[RateSweep],
    *,
    statistic: str = "mean",
    target_s: float | None = None,
) -> dict[str, LatencyCurve]:
    """Each scheme's curve, merged over ``sweeps`` (one workload; a scheme may appear in several
    sweeps, at different rates, never twice at one rate), keyed by scheme name in order of
    appearance. ``statistic``: ``"mean"`` (the paper's and the lecture's), ``"p50"`` or
    ``"p90"``; ``target_s`` defaults to the sweeps' own target (50 ms/token)."""
    if isinstance(sweeps, RateSweep):
        sweeps = [sweeps]
    if isinstance(sweeps, (str, bytes)) or not isinstance(sweeps, Sequence) or not sweeps:
        raise ValueError("sweeps must be a RateSweep or a non-empty list of them")
    if not all(isinstance(s, RateSweep) for s in sweeps):
        raise TypeError("sweeps must contain only RateSweep results of latency_rate_sweep()")
    if statistic not in STATISTICS:
        raise ValueError(f"statistic must be one of {list(STATISTICS)}, got {statistic!r}")
    workloads = {s.workload for s in sweeps}
    if len(workloads) > 1:
        raise ValueError(f"the sweeps must share one workload, got {sorted(workloads)}")
    targets = {s.target_s for s in sweeps}
    if target_s is None:
        if len(targets) > 1:
            raise ValueError(f"the sweeps have different targets {sorted(targets)}: pass target_s")
        target_s = targets.pop()
    if not (isinstance(target_s, (int, float)) and target_s > 0 and math.isfinite(target_s)):
        raise ValueError(f"target_s must be a positive number of seconds, got {target_s!r}")
    points: dict[str, dict[float, LatencyResult]] = {}
    for sweep in sweeps:
        for name, row in sweep.results.items():
            by_rate = points.setdefault(name, {})
            for rate, result in zip(sweep.rates, row, strict=True):
                if rate in by_rate:
                    raise ValueError(f"scheme {name!r} was swept twice at {rate:g} req/s")
                by_rate[rate] = result
    field = STATISTICS[statistic]
    curves = {}
    for name, by_rate in points.items():
        rates = tuple(sorted(by_rate))
        results = [by_rate[r] for r in rates]
        latency = tuple(float(getattr(r, field)) for r in results)
        curves[name] = LatencyCurve(
            scheme=name,
            label=results[0].label,
            statistic=statistic,
            target_s=float(target_s),
            rates=rates,
            latency_s=latency,
            batch_size=tuple(float(r.mean_batch_size) for r in results),
            max_rate=sustainable_rate(rates, latency, target_s),
        )
    return curves


def _as_curves(curves: object, statistic: str = "mean") -> list[LatencyCurve]:
    if isinstance(curves, Mapping):
        curves = list(curves.values())
    if isinstance(curves, RateSweep) or (
        isinstance(curves, Sequence) and curves and isinstance(curves[0], RateSweep)
    ):
        curves = list(latency_curves(curves, statistic=statistic).values())
    if isinstance(curves, (str, bytes)) or not isinstance(curves, Sequence) or not curves:
        raise ValueError("give latency_curves() output, a RateSweep or a list of RateSweeps")
    curves = list(curves)
    if not all(isinstance(c, LatencyCurve) for c in curves):
        raise TypeError("curves must contain only LatencyCurve records")
    return curves


def _hollow(ax: Axes, x: float, y: float, color: str, *, marker: str = "o", ms: float = 8) -> None:
    """One hollow marker edged in ``color``, over the curves."""
    ax.plot([x], [y], ls="none", marker=marker, ms=ms, mfc="white", mec=color, mew=2, zorder=4)


def _rate_text(curve: LatencyCurve) -> str:
    if math.isnan(curve.max_rate):
        return "misses it at every rate"
    more = "≥ " if curve.open_ended else ""
    return f"{more}{curve.max_rate:.2f} req/s"


def latency_rate_plot(
    curves: Mapping[str, LatencyCurve] | Sequence[LatencyCurve] | RateSweep | Sequence[RateSweep],
    *,
    ax: Axes | None = None,
    statistic: str = "mean",
    ymax_ms: float | None = None,
    xmax: float | None = None,
    mark: bool = True,
    title: str | None = None,
    legend_loc: str | None = "upper left",
    fontsize: float = FONT_SIZE,
) -> Axes:
    """Normalized latency (ms per token) against the request rate, one curve per scheme.

    ``curves`` is what :func:`latency_curves` returns, or sweeps to pass to it (with
    ``statistic``). A dashed line marks the latency target; with ``mark``, a hollow marker and a
    dotted drop line in the scheme's colour mark where each curve crosses it, its highest
    sustainable rate, and the legend gives that rate. Curves leave the top of the plot at
    ``ymax_ms`` (default four times the target): past the knee the latency grows without bound.

    ``legend_loc``: where the legend goes, a matplotlib location inside the axes, ``"below"``
    (under the axes, clear of the x label: curves that shoot up cross any corner) or None for
    none (take ``ax.get_legend_handles_labels()`` for a legend of your own). Returns the axes (of
    a new figure when ``ax`` is None).
    """
    curves = _as_curves(curves, statistic)
    target_ms = 1e3 * curves[0].target_s
    if ymax_ms is None:
        ymax_ms = 4 * target_ms
    if not ymax_ms > 0:
        raise ValueError(f"ymax_ms must be positive, got {ymax_ms!r}")
    if ax is None:
        ax = Figure(figsize=(6.4, 4.0), layout="constrained").add_subplot()
    for curve in curves:
        color = SCHEME_COLORS.get(curve.scheme, "0.3")
        label = curve.label
        if mark:
            label += f": {_rate_text(curve)}"
        ax.plot(
            curve.rates,
            [1e3 * x for x in curve.latency_s],
            color=color,
            marker="o",
            ms=4.5,
            lw=2,
            label=label,
        )
        if mark and math.isfinite(curve.max_rate):
            ax.plot([curve.max_rate] * 2, [0, target_ms], color=color, lw=1.3, ls=":", zorder=3)
            _hollow(ax, curve.max_rate, target_ms, color)
    ax.axhline(
        target_ms, color="0.35", lw=1.2, ls="--", zorder=1, label=f"target: {target_ms:g} ms/token"
    )
    right = max(c.rates[-1] for c in curves) if xmax is None else float(xmax)
    ax.set_xlim(0, right * 1.03)
    ax.set_ylim(0, ymax_ms)
    ax.set_xlabel("request rate (req/s)", fontsize=fontsize)
    words = _STAT_WORDS[curves[0].statistic]
    ax.set_ylabel(f"{words} normalized latency\n(ms per output token)", fontsize=fontsize)
    ax.tick_params(labelsize=fontsize - 1)
    ax.grid(alpha=0.3)
    despine(ax)
    if legend_loc == "below":
        below = offset_copy(ax.transAxes, fig=ax.figure, y=-3.2 * fontsize, units="points")
        ax.legend(
            loc="upper center",
            bbox_to_anchor=(0.5, 0.0),
            bbox_transform=below,
            frameon=False,
            fontsize=fontsize - 1,
        )
    elif legend_loc is not None:
        ax.legend(frameon=False, fontsize=fontsize - 1, loc=legend_loc)
    if title:
        ax.set_title(title, loc="left", fontsize=fontsize + 1)
    return ax


def batch_rate_plot(
    curves: Mapping[str, LatencyCurve] | Sequence[LatencyCurve] | RateSweep | Sequence[RateSweep],
    *,
    ax: Axes | None = None,
    xmax: float | None = None,
    mark: bool = True,
    title: str | None = None,
    legend: bool = False,
    fontsize: float = FONT_SIZE,
) -> Axes:
    """Mean batch size (requests running per iteration) against the request rate, one curve per
    scheme; with ``mark``, a hollow marker on each curve at the scheme's highest sustainable rate
    (its batch there interpolated). Returns the axes."""
    curves = _as_curves(curves)
    if ax is None:
        ax = Figure(figsize=(6.4, 3.6), layout="constrained").add_subplot()
    for curve in curves:
        color = SCHEME_COLORS.get(curve.scheme, "0.3")
        ax.plot(
            curve.rates, curve.batch_size, color=color, marker="o", ms=4.5, lw=2, label=curve.label
        )
        if mark and math.isfinite(curve.max_rate):
            batch = float(np.interp(curve.max_rate, curve.rates, curve.batch_size))
            _hollow(ax, curve.max_rate, batch, color)
    right = max(c.rates[-1] for c in curves) if xmax is None else float(xmax)
    ax.set_xlim(0, right * 1.03)
    ax.set_ylim(bottom=0)
    ax.set_xlabel("request rate (req/s)", fontsize=fontsize)
    ax.set_ylabel("mean batch size\n(requests running)", fontsize=fontsize)
    ax.tick_params(labelsize=fontsize - 1)
    ax.grid(alpha=0.3)
    despine(ax)
    if legend:
        ax.legend(frameon=False, fontsize=fontsize - 1, loc="upper left")
    if title:
        ax.set_title(title, loc="left", fontsize=fontsize + 1)
    return ax


#: The ratios :func:`sustainable_ratio_plot` draws, top to bottom: key, row label, the scheme
#: whose colour the row takes.
_RATIO_ROWS = (("paged/oracle", "Paged ÷ Oracle", "Oracle"), ("paged/max", "Paged ÷ Max", "Max"))
#: How the published sources are drawn, in order: a single value's marker.
_SOURCE_MARKERS = (("D", 7.5), ("*", 12.0), ("s", 7.0), ("P", 9.0))


def sustainable_ratio_plot(
    ours: Mapping[str, float],
    *,
    spread: Mapping[str, tuple[float, float]] | None = None,
    references: Mapping[str, Mapping[str, float | tuple[float, float]]] | None = None,
    ours_label: str = "this page",
    ax: Axes | None = None,
    xlim: tuple[float, float] = (1.0, 10.0),
    title: str | None = None,
    fontsize: float = FONT_SIZE,
) -> Axes:
    """How many times Oracle's and Max's highest sustainable rate Paged sustains, one row per
    ratio (``"paged/oracle"``, ``"paged/max"``, as :meth:`~kvcourse.serving.RateSweep.ratios`),
    on a log axis.

    ``ours``: our ratios, filled dots, with ``spread`` (key → (low, high), e.g. over seeds) as a
    line through them. ``references``: source → key → a value (a hollow marker, one shape per
    source), ``(low, math.inf)`` for "more than low" (a hollow triangle pointing right) or
    ``(low, high)`` for a range (a pale bar). Returns the axes.
    """
    references = dict(references or {})
    if len(references) > len(_SOURCE_MARKERS):
        raise ValueError(f"at most {len(_SOURCE_MARKERS)} references, got {len(references)}")
    rows = [row for row in _RATIO_ROWS if row[0] in ours]
    if not rows:
        raise ValueError(f"ours must give at least one of {[r[0] for r in _RATIO_ROWS]}")
    lo_x, hi_x = (float(v) for v in xlim)
    if not 0 < lo_x < hi_x:
        raise ValueError(f"xlim must be two increasing positive ratios, got {xlim!r}")
    if ax is None:
        ax = Figure(figsize=(6.4, 1.4 + 1.0 * len(rows)), layout="constrained").add_subplot()
    n_sources = len(references) + 1
    step = 0.62 / max(n_sources - 1, 1)
    ys = []
    for i, (key, _label, scheme) in enumerate(rows):
        y0 = len(rows) - 1 - i
        ys.append(y0)
        color = SCHEME_COLORS[scheme]
        top = y0 + 0.31
        value = float(ours[key])
        if spread and key in spread:
            low, high = (float(v) for v in spread[key])
            ax.plot([low, high], [top, top], color=color, lw=2.5, solid_capstyle="butt")
            for end in (low, high):
                ax.plot([end, end], [top - 0.07, top + 0.07], color=color, lw=2)
        ax.plot([value], [top], ls="none", marker="o", ms=8, color=color, zorder=4)
        for j, ((_source, values), (marker, size)) in enumerate(
            zip(references.items(), _SOURCE_MARKERS, strict=False), start=1
        ):
            if key not in values:
                continue
            y = top - j * step
            ref = values[key]
            if isinstance(ref, tuple):
                low, high = (float(v) for v in ref)
                if math.isinf(high):
                    _hollow(ax, low, y, color, marker=">", ms=9)
                    ax.annotate(
                        "",
                        xy=(low * 1.25, y),
                        xytext=(low * 1.04, y),
                        arrowprops={"arrowstyle": "->", "color": color, "lw": 1.5},
                    )
                else:
                    ax.plot(
                        [low, high],
                        [y, y],
                        color=color,
                        alpha=0.35,
                        lw=9,
                        solid_capstyle="butt",
                    )
            else:
                _hollow(ax, float(ref), y, color, marker=marker, ms=size)
    # The legend: neutral grey, since the colour belongs to the row.
    handles = [ax.plot([], [], ls="none", marker="o", ms=8, color="0.3", label=ours_label)[0]]
    for (source, values), (marker, size) in zip(references.items(), _SOURCE_MARKERS, strict=False):
        kinds = {
            "range" if isinstance(v, tuple) and not math.isinf(v[1]) else "mark"
            for v in values.values()
        }
        if kinds == {"range"}:
            style = {"color": "0.3", "alpha": 0.35, "lw": 9, "solid_capstyle": "butt"}
            handles += ax.plot([], [], label=f"{source} (range)", **style)
        else:
            proxy = {"marker": marker, "ms": size, "mfc": "white", "mec": "0.3", "mew": 2}
            handles += ax.plot([], [], ls="none", label=source, **proxy)
    ax.set_xscale("log")
    ax.set_xlim(lo_x, hi_x)
    ticks = [t for t in (1, 1.5, 2, 3, 4, 6, 8, 10, 15, 20, 30) if lo_x <= t <= hi_x]
    ax.xaxis.set_major_locator(FixedLocator(ticks))
    ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _pos: f"{v:g}×"))
    ax.xaxis.set_minor_locator(NullLocator())
    ax.xaxis.set_minor_formatter(NullFormatter())
    ax.set_yticks(ys, [label for _, label, _ in rows], fontsize=fontsize)
    ax.set_ylim(-0.55, len(rows) - 0.45)
    ax.tick_params(axis="y", length=0)
    ax.tick_params(axis="x", labelsize=fontsize - 1)
    ax.set_xlabel("times the highest sustainable rate", fontsize=fontsize)
    ax.grid(axis="x", alpha=0.3)
    despine(ax, ("top", "right", "left"))
    ax.legend(
        handles=handles,
        loc="upper center",
        bbox_to_anchor=(0.5, -0.32 if len(rows) > 1 else -0.5),
        ncols=len(handles),
        frameon=False,
        fontsize=fontsize - 1,
    )
    if title:
        ax.set_title(title, loc="left", fontsize=fontsize + 1)
    return ax
