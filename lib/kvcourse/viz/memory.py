"""Where the KV memory of a whole serving run went (§3.3): the simulator's results as charts.

* :func:`memory_breakdown_bars`: one stacked bar per scheme of :mod:`kvcourse.serving`, the five
  kinds of memory as memory-weighted shares;
* :func:`memory_timeline_plot`: the five kinds over simulated time for one scheme;
* :func:`rate_sweep_plot`: concurrency and finished requests per second against the request rate;
* :func:`ratio_sweep_plot`: Paged's concurrency over Oracle's and Max's against the request rate.

Everything draws on ``Axes`` you pass in, or on a new ``Figure`` built without pyplot, so a page
shows a figure only when it displays or glues it. The kinds keep their colours from
:data:`~kvcourse.viz.style.KIND_COLORS`, the schemes theirs from
:data:`~kvcourse.viz.style.SCHEME_COLORS`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.transforms import offset_copy

from kvcourse._checks import check_positive_int
from kvcourse.serving.records import KINDS, AccountingResult
from kvcourse.serving.simulation import concurrency_ratios
from kvcourse.viz.style import (
    FONT_SIZE,
    KIND_COLORS,
    KIND_LABELS,
    SCHEME_COLORS,
    center_text,
    despine,
    text_color_on,
)

__all__ = ["memory_breakdown_bars", "memory_timeline_plot", "ratio_sweep_plot", "rate_sweep_plot"]

#: Half the height of a bar of :func:`memory_breakdown_bars`, in data units (bars sit 1 apart).
_HALF_BAR = 0.31


def memory_breakdown_bars(
    results: Mapping[str, AccountingResult] | Sequence[AccountingResult],
    *,
    ax: Axes | None = None,
    reference: Mapping[str, float] | None = None,
    reference_label: str = "reference",
    show_running: bool = True,
    min_label: float = 0.04,
    title: str | None = None,
    legend_ncols: int | None = None,
    fontsize: float = FONT_SIZE,
) -> Axes:
    """Where the KV memory went: one horizontal bar per result, top to bottom, split into the five
    kinds (memory-weighted shares, :class:`~kvcourse.serving.MemoryShares`).

    Segments of at least ``min_label`` are labelled with their percentage. ``reference`` (scheme
    name → share of memory holding tokens, e.g. the lecture's) marks that share on the bar with a
    black triangle on each edge, outside the labels; ``show_running`` adds each scheme's mean
    number of running requests under its name. The legend has ``legend_ncols`` columns; by
    default 3 where they fit the figure's width, else 2 (a phone shows a figure at half size, so
    narrow figures read better there). Returns the axes (a new figure's when ``ax`` is None).
    """
    results = _as_results(results)
    if ax is None:
        ax = Figure(figsize=(8.0, 1.2 + 0.9 * len(results)), layout="constrained").add_subplot()
    ys = np.arange(len(results))[::-1].astype(float)
    lefts = np.zeros(len(results))
    for kind in KINDS:
        widths = np.array([100 * getattr(r.shares, kind) for r in results])
        ax.barh(
            ys,
            widths,
            left=lefts,
            height=2 * _HALF_BAR,
            color=KIND_COLORS[kind],
            edgecolor="white",
            linewidth=0.8,
            label=KIND_LABELS[kind],
        )
        for y, left, w in zip(ys, lefts, widths, strict=True):
            if w >= 100 * min_label:
                center_text(
                    ax,
                    left + w / 2,
                    y,
                    f"{w:.0f}\u00a0%",
                    fontsize=fontsize,
                    color=text_color_on(KIND_COLORS[kind]),
                )
        lefts += widths
    if reference:
        # A black triangle on each edge of the bar, pointing at the reference share: nothing is
        # drawn inside the bar, so no mark ever covers a segment's label.
        for y, r in zip(ys, results, strict=True):
            if r.scheme in reference:
                x = 100 * float(reference[r.scheme])
                for edge, mark, va in (
                    (y + _HALF_BAR, "\u25bc", "bottom"),
                    (y - _HALF_BAR, "\u25b2", "top"),
                ):
                    ax.annotate(mark, (x, edge), ha="center", va=va, fontsize=0.8 * fontsize)
        # The legend's entry: the same triangle as a marker.
        ax.plot(
            [], [], ls="none", marker="v", ms=0.7 * fontsize, color="black", label=reference_label
        )
    names = []
    for r in results:
        name = r.label
        if show_running:
            name += f"\n{r.mean_running:.1f} running"
        names.append(name)
    ax.set_yticks(ys, names, fontsize=fontsize)
    ax.set_xlim(0, 100)
    ax.set_ylim(-0.6, len(results) - 0.4)
    ax.set_xlabel("share of the KV token slots (%)", fontsize=fontsize)
    ax.tick_params(axis="y", length=0)
    despine(ax, ("top", "right", "left"))
    # The legend hangs a fixed distance below the axes, clear of the tick labels and x label.
    below = offset_copy(ax.transAxes, fig=ax.figure, y=-3.6 * fontsize, units="points")
    if legend_ncols is None:
        labels = ax.get_legend_handles_labels()[1]
        width = ax.figure.get_figwidth()
        legend_ncols = 3 if _legend_width_in(labels, 3, fontsize - 1) <= width - 0.3 else 2
    ax.legend(
        loc="upper center",
        bbox_to_anchor=(0.5, 0.0),
        bbox_transform=below,
        ncols=check_positive_int("legend_ncols", legend_ncols),
        frameon=False,
        fontsize=fontsize - 1,
    )
    if title:
        ax.set_title(title, loc="left", fontsize=fontsize + 1)
    return ax


def memory_timeline_plot(
    result: AccountingResult,
    *,
    ax: Axes | None = None,
    start_s: float | None = None,
    window_s: float = 60.0,
    bin_s: float = 0.5,
    title: str | None = None,
    fontsize: float = FONT_SIZE,
) -> Axes:
    """The five kinds of one run over simulated time, stacked, as shares of the arena.

    Shows ``window_s`` seconds from ``start_s`` (default: the start of the measured window), each
    point the mean over the iterations of a ``bin_s``-second bin — the same per-iteration average
    the shares use, over a short stretch. ``title`` defaults to the scheme's label.
    """
    if not isinstance(result, AccountingResult):
        raise TypeError(f"result must be an AccountingResult, got {result!r}")
    if not window_s > 0 or not bin_s > 0:
        raise ValueError(f"window_s and bin_s must be positive, got {window_s!r}, {bin_s!r}")
    t = result.timeline.time_s
    start = float(t[0]) if start_s is None else float(start_s)
    keep = (t >= start) & (t < start + window_s)
    if not keep.any():
        raise ValueError(
            f"no measured iteration between {start:g} s and {start + window_s:g} s; the run "
            f"measured {t[0]:g} s to {t[-1]:g} s"
        )
    bins = ((t[keep] - start) // bin_s).astype(np.int64)
    count = np.bincount(bins)
    used = count > 0
    centres = (np.arange(len(count)) + 0.5)[used] * bin_s
    layers = []
    for kind in KINDS:
        sums = np.bincount(bins, weights=getattr(result.timeline, kind)[keep])
        layers.append(100 * sums[used] / count[used] / result.num_slots)
    if ax is None:
        ax = Figure(figsize=(8.0, 3.0), layout="constrained").add_subplot()
    ax.stackplot(
        centres,
        layers,
        colors=[KIND_COLORS[k] for k in KINDS],
        labels=[KIND_LABELS[k] for k in KINDS],
        linewidth=0,
    )
    ax.set_xlim(0, window_s)
    ax.set_ylim(0, 100)
    ax.set_ylabel("% of slots", fontsize=fontsize)
    ax.set_xlabel(f"seconds after {start:.0f} s", fontsize=fontsize)
    despine(ax)
    ax.set_title(result.label if title is None else title, loc="left", fontsize=fontsize)
    return ax


def rate_sweep_plot(
    sweep: Mapping[float, Mapping[str, AccountingResult]],
    *,
    axes: Sequence[Axes] | None = None,
    title: str | None = None,
    mark: Sequence[float] = (),
    fontsize: float = FONT_SIZE,
) -> tuple[Axes, Axes]:
    """Concurrency and throughput against the request rate, one line per scheme.

    ``sweep`` maps a request rate (requests per second) to the results of one workload at that
    rate. Left axes: mean running requests. Right axes: finished requests per second, with the
    dashed line "finished = arrived" — a scheme on that line keeps up with the arrivals (it is
    rate-bound); below it, requests pile up in the queue. ``mark`` draws dotted verticals at
    chosen rates. Returns the two axes (of a new figure when ``axes`` is None).
    """
    if not isinstance(sweep, Mapping) or not sweep:
        raise ValueError("sweep must be a non-empty dict: rate -> {scheme name: AccountingResult}")
    rates = sorted(float(r) for r in sweep)
    by_rate = {float(r): _as_results(res) for r, res in sweep.items()}
    if axes is None:
        fig = Figure(figsize=(8.0, 3.4), layout="constrained")
        axes = fig.subplots(1, 2)
    if len(axes) != 2:
        raise ValueError(f"axes must be two Axes, got {len(axes)}")
    left, right = axes
    names = [r.scheme for r in by_rate[rates[0]]]
    for name in names:
        picked = [next(r for r in by_rate[rate] if r.scheme == name) for rate in rates]
        color = SCHEME_COLORS.get(name, "0.3")
        kw = {"color": color, "marker": "o", "ms": 4.5, "lw": 2, "label": picked[0].label}
        left.plot(rates, [r.mean_running for r in picked], **kw)
        right.plot(rates, [r.throughput_rps for r in picked], **kw)
    right.plot(
        [0, rates[-1]], [0, rates[-1]], ls="--", color="0.5", lw=1.2, label="finished = arrived"
    )
    for ax, ylabel in (
        (left, "requests running at once"),
        (right, "requests finished per second"),
    ):
        for rate in mark:
            ax.axvline(rate, color="0.6", lw=1, ls=":")
        ax.set_xlim(0, rates[-1] * 1.04)
        ax.set_ylim(bottom=0)
        ax.set_xlabel("request rate (req/s)", fontsize=fontsize)
        ax.set_ylabel(ylabel, fontsize=fontsize)
        ax.grid(alpha=0.3)
        despine(ax)
    right.legend(frameon=False, fontsize=fontsize - 2, loc="upper left")
    if title:
        left.set_title(title, loc="left", fontsize=fontsize + 1)
    return left, right


#: How :func:`ratio_sweep_plot` draws the published figures it is given, in order.
_REFERENCE_MARKERS = (("D", 7.5), ("*", 12.0), ("s", 7.0), ("P", 9.0))
_RATIOS = (("paged/oracle", "Paged ÷ Oracle", "Oracle"), ("paged/max", "Paged ÷ Max", "Max"))


def ratio_sweep_plot(
    sweep: Mapping[float, Mapping[str, AccountingResult]],
    *,
    ax: Axes | None = None,
    references: Mapping[str, tuple[float, Mapping[str, float]]] | None = None,
    knee: float | None = None,
    title: str | None = None,
    fontsize: float = FONT_SIZE,
) -> Axes:
    """How many times as many requests Paged runs at once as Oracle and as Max (§3.4), against
    the request rate: one line per ratio of :func:`~kvcourse.serving.concurrency_ratios`.

    ``sweep`` is what :func:`rate_sweep_plot` takes (rate → the three schemes' results).
    ``references`` maps a source to the rate it measured at and its two ratios, e.g.
    ``{"vLLM paper": (2.0, {"paged/oracle": 2.2, "paged/max": 4.3})}``; each source gets its own
    marker, in the colour of the ratio. ``knee`` (a rate, e.g. where Paged stops keeping up)
    draws a dashed vertical there. A dotted line at 1 is "no gain". Returns the axes.
    """
    if not isinstance(sweep, Mapping) or not sweep:
        raise ValueError("sweep must be a non-empty dict: rate -> {scheme name: AccountingResult}")
    rates = sorted(float(r) for r in sweep)
    ratios = {float(r): concurrency_ratios(dict(res)) for r, res in sweep.items()}
    references = dict(references or {})
    if len(references) > len(_REFERENCE_MARKERS):
        raise ValueError(f"at most {len(_REFERENCE_MARKERS)} references, got {len(references)}")
    if ax is None:
        ax = Figure(figsize=(7.0, 3.6), layout="constrained").add_subplot()
    for key, label, scheme in _RATIOS:
        ax.plot(
            rates,
            [ratios[r][key] for r in rates],
            color=SCHEME_COLORS[scheme],
            marker="o",
            ms=4.5,
            lw=2,
            label=label,
        )
    for (source, (rate, values)), (marker, size) in zip(
        references.items(), _REFERENCE_MARKERS, strict=False
    ):
        missing = [key for key, _, _ in _RATIOS if key not in values]
        if missing:
            raise ValueError(f"reference {source!r} lacks {missing}")
        for key, _, scheme in _RATIOS:
            ax.plot(
                [float(rate)],
                [float(values[key])],
                ls="none",
                marker=marker,
                ms=size,
                mfc="white",
                mec=SCHEME_COLORS[scheme],
                mew=2,
                zorder=4,
            )
        # The legend shows the source's marker in neutral grey: the colour belongs to the ratio.
        proxy = {"marker": marker, "ms": size, "mfc": "white", "mec": "0.3", "mew": 2}
        ax.plot([], [], ls="none", label=source, **proxy)
    ax.axhline(1.0, color="0.5", lw=1, ls=":")
    if knee is not None:
        ax.axvline(float(knee), color="0.35", lw=1.2, ls="--")
        ax.annotate(
            "Paged\nsaturates",
            xy=(float(knee), 0.0),
            xycoords=("data", "axes fraction"),
            xytext=(4, 4),
            textcoords="offset points",
            ha="left",
            va="bottom",
            fontsize=fontsize - 1,
            color="0.25",
        )
    ax.set_xlim(0, rates[-1] * 1.04)
    ax.set_ylim(bottom=0)
    ax.set_xlabel("request rate (req/s)", fontsize=fontsize)
    ax.set_ylabel("ratio of requests running at once", fontsize=fontsize)
    ax.grid(alpha=0.3)
    despine(ax)
    ax.legend(frameon=False, fontsize=fontsize - 1, loc="upper left")
    if title:
        ax.set_title(title, loc="left", fontsize=fontsize + 1)
    return ax


def _legend_width_in(labels: Sequence[str], ncols: int, fontsize: float) -> float:
    """About how wide (inches) a frameless legend of ``labels`` in ``ncols`` columns is: each
    column as wide as its longest label (≈ 0.58 em a character) plus its handle (2.8 em), and 2 em
    between columns; matplotlib fills the columns top to bottom."""
    rows = -(-len(labels) // ncols)
    columns = [labels[i : i + rows] for i in range(0, len(labels), rows)]
    ems = sum(0.58 * max(map(len, col)) + 2.8 for col in columns) + 2.0 * (len(columns) - 1)
    return ems * fontsize / 72


def _as_results(results: object) -> list[AccountingResult]:
    """``results`` (a dict or list of simulator results) as a non-empty list, checked."""
    if isinstance(results, Mapping):
        results = list(results.values())
    if isinstance(results, (str, bytes)) or not isinstance(results, Sequence) or not results:
        raise ValueError(
            "results must be a non-empty dict or list of AccountingResult, such as what "
            "a100_accounting() returns"
        )
    results = list(results)
    if not all(isinstance(r, AccountingResult) for r in results):
        raise TypeError("results must contain only AccountingResult records")
    return results
