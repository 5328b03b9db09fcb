"""The drawings of §9.6 (overload and early rejection): the prefill and decode pools' load over
time, and what each rejection rule wasted, completed and rejected.

* :func:`pd_load_figure` draws the two pools' sampled loads of
  :class:`~kvcourse.cluster.overload.OverloadResult` runs (by default the baseline's and early
  rejection's) in stacked panels over one time axis, each panel titled with its rule and the
  Pearson correlation of the two loads: near 0 when rejecting after prefill, negative (the
  pools in anti-phase) under early rejection;
* :func:`rejection_bars` draws wasted prefills, completions and rejections side by side for
  each rule, the counts written on the bars.

Both build a ``Figure`` without pyplot. The pools keep one colour in every panel (prefill
:data:`~kvcourse.viz.style.BLUE`, decode :data:`~kvcourse.viz.style.ORANGE`), and each rule
one colour (:data:`REJECTION_RULE_COLORS`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.ticker import MaxNLocator

from kvcourse.cluster.overload import OverloadResult
from kvcourse.cluster.rejection import REJECTION_RULE_LABELS
from kvcourse.viz.phone import PHONE_MIN_FONT_PT, phone_figure
from kvcourse.viz.style import (
    BLUE,
    FONT_SIZE,
    GREEN,
    ORANGE,
    PURPLE,
    despine,
    figure_legend,
)

__all__ = ["REJECTION_RULE_COLORS", "pd_load_figure", "rejection_bars"]

#: The colour of each rejection rule's bars: the baseline grey, the two early rules in hues.
REJECTION_RULE_COLORS: dict[str, str] = {
    "baseline": "#9E9E9E",
    "early": GREEN,
    "predictive": PURPLE,
}

_POOL_COLORS = {"prefill": BLUE, "decode": ORANGE}


def pd_load_figure(
    results: Sequence[OverloadResult],
    *,
    rules: Sequence[str] = ("baseline", "early"),
    window_s: tuple[float, float] | None = (600.0, 1200.0),
    fontsize: float = FONT_SIZE,
) -> Figure:
    """The prefill and decode pools' load over time, one panel per rule of ``rules`` taken from
    ``results`` (what :func:`~kvcourse.cluster.overload_sim.compare_rejection_rules` returns),
    stacked over a shared time axis limited to ``window_s`` (None: the whole run).

    Each panel's title gives the rule and the correlation of its two loads over the whole run
    after the warm-up, not only over the window shown."""
    chosen = [_pick(results, rule) for rule in _check_rules(rules)]
    fig = Figure(figsize=(8.5, 0.6 + 2.1 * len(chosen)), layout="constrained")
    axes = fig.subplots(len(chosen), 1, sharex=True, squeeze=False)[:, 0]
    if window_s is not None:
        start, stop = (float(x) for x in window_s)
        if not (math.isfinite(start) and math.isfinite(stop) and start < stop):
            raise ValueError(
                f"window_s must be (start, stop) seconds with start < stop, got {window_s!r}"
            )
    for ax, r in zip(axes, chosen, strict=True):
        t = np.asarray(r.times)
        keep = np.ones(len(t), bool) if window_s is None else (t >= start) & (t <= stop)
        for pool, series in (("prefill", r.prefill_load), ("decode", r.decode_load)):
            ax.plot(t[keep], np.asarray(series)[keep], color=_POOL_COLORS[pool], lw=1.2)
        corr = "undefined" if math.isnan(r.correlation) else f"{r.correlation:+.2f}"
        ax.set_title(
            f"{REJECTION_RULE_LABELS[r.rule]}: correlation {corr}",
            loc="left",
            fontsize=fontsize,
        )
        ax.set_ylim(0, 1.05)
        ax.set_yticks([0, 0.5, 1], ["0", "50 %", "100 %"])
        ax.set_ylabel("load", fontsize=fontsize)
        ax.tick_params(labelsize=fontsize - 1)
        ax.grid(alpha=0.3)
        despine(ax)
    if window_s is not None:
        axes[-1].set_xlim(start, stop)
    axes[-1].set_xlabel("time (s)", fontsize=fontsize)
    handles = [
        Line2D([], [], color=BLUE, lw=2, label="prefill pool: queued work / TTFT SLO"),
        Line2D([], [], color=ORANGE, lw=2, label="decode pool: occupied slots"),
    ]
    figure_legend(fig, handles, fontsize=fontsize - 1, ncols=2)
    return fig


def rejection_bars(
    results: Sequence[OverloadResult], *, fontsize: float = FONT_SIZE, phone: bool = False
) -> Figure:
    """Wasted prefills, completions and rejections (at arrival plus after prefill) of each run
    in ``results`` as grouped bars, one colour per rule, each bar's count written on it.
    ``phone=True`` lays the bars down for a phone's column, each count at its bar's end."""
    results = _check_results(results)
    groups = ("wasted prefills", "completed", "rejected")
    values = np.array([[r.wasted_prefills, r.completed, r.rejected] for r in results], float)
    if phone:
        fig = phone_figure(1.2 + 0.45 * values.size)
    else:
        fig = Figure(figsize=(8.1, 4.0), layout="constrained")
    ax = fig.subplots()
    width = 0.8 / len(results)
    x = np.arange(len(groups), dtype=float)
    top = values.max() if values.size else 1.0
    small = PHONE_MIN_FONT_PT if phone else fontsize - 2
    for i, r in enumerate(results):
        xs = x - 0.4 + width * (i + 0.5)
        color = REJECTION_RULE_COLORS.get(r.rule, "0.5")
        label = REJECTION_RULE_LABELS[r.rule]
        if phone:  # top to bottom: the groups in order, the rules in order within each
            ax.barh(-xs, values[i], width * 0.92, color=color, label=label)
        else:
            ax.bar(xs, values[i], width * 0.92, color=color, label=label)
        for xi, v in zip(xs, values[i], strict=True):
            if phone:
                ax.text(v + 0.015 * top, -xi, f"{v:,.0f}", ha="left", va="center", fontsize=small)
            else:
                ax.text(xi, v + 0.015 * top, f"{v:,.0f}", ha="center", va="bottom", fontsize=small)
    value_axis = ax.xaxis if phone else ax.yaxis
    if phone:
        ax.set_yticks(-x, groups, fontsize=PHONE_MIN_FONT_PT)
        ax.set_xlim(0, 1.3 * top if top > 0 else 1.0)
        ax.set_xlabel("requests", fontsize=PHONE_MIN_FONT_PT)
        ax.tick_params(labelsize=PHONE_MIN_FONT_PT)
        ax.tick_params(axis="y", length=0)
        ax.xaxis.set_major_locator(MaxNLocator(4))  # counts like 15,000 need the room
    else:
        ax.set_xticks(x, groups, fontsize=fontsize)
        ax.set_ylim(0, 1.12 * top if top > 0 else 1.0)
        ax.set_ylabel("requests", fontsize=fontsize)
        ax.tick_params(axis="y", labelsize=fontsize - 1)
    value_axis.set_major_formatter(lambda v, _pos: f"{v:,.0f}")
    ax.grid(axis="x" if phone else "y", alpha=0.3)
    despine(ax)
    ncols, size = (1, PHONE_MIN_FONT_PT) if phone else (len(results), fontsize - 1)
    fig.legend(loc="outside lower center", ncols=ncols, frameon=False, fontsize=size)
    return fig


def _check_results(results: object) -> list[OverloadResult]:
    """``results`` as a non-empty list of :class:`OverloadResult`, checked."""
    if isinstance(results, (str, bytes)) or not isinstance(results, Sequence) or not results:
        raise ValueError(
            "results must be a non-empty sequence of OverloadResult, such as what "
            "compare_rejection_rules() returns"
        )
    if not all(isinstance(r, OverloadResult) for r in results):
        raise TypeError("results must contain only OverloadResult records")
    return list(results)


def _check_rules(rules: Sequence[str]) -> list[str]:
    if isinstance(rules, str) or not rules:
        raise ValueError(f"rules must be a non-empty list of rejection rule names, got {rules!r}")
    return list(rules)


def _pick(results: Sequence[OverloadResult], rule: str) -> OverloadResult:
    """The run of ``rule`` among ``results``; a clear error naming the ones there."""
    for r in _check_results(results):
        if r.rule == rule:
            return r
    there = [r.rule for r in results]
    raise ValueError(f"no {rule!r} run among the results (they hold {there})")
