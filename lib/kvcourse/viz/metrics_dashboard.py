"""A dashboard of vLLM's metrics (vLLM v1 at release v0.33.0, names from
``vllm/v1/metrics/loggers.py``) for simulated runs, the panels a Grafana board would show.

:func:`metrics_dashboard` draws :class:`~kvcourse.serving.vllm_metrics.MetricsRun` runs one
above the other in five panels over time or latency: ``vllm:num_requests_running`` and
``vllm:num_requests_waiting``; ``vllm:kv_cache_usage_perc``; the prefix-cache hit rate
``vllm:prefix_cache_hits_total / vllm:prefix_cache_queries_total`` so far; and the
``vllm:time_to_first_token_seconds`` and ``vllm:inter_token_latency_seconds`` histograms as the
share of observations at or under each of vLLM's bucket bounds (what Prometheus stores: the
``le`` buckets). Each run keeps one colour in every panel. One column, so it stays readable on a
phone.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from matplotlib.figure import Figure
from matplotlib.lines import Line2D

from kvcourse.serving.vllm_metrics import (
    INTER_TOKEN_LATENCY_BUCKETS,
    TIME_TO_FIRST_TOKEN_BUCKETS,
    MetricsRun,
)
from kvcourse.viz.style import BLUE, FONT_SIZE, GREEN, ORANGE, PURPLE, despine, figure_legend

__all__ = ["metrics_dashboard"]

_COLORS = (BLUE, ORANGE, GREEN, PURPLE)


def _cumulative_share(values: np.ndarray, bounds: Sequence[float]) -> np.ndarray:
    """The share of ``values`` at or under each bound (a Prometheus histogram's ``le`` buckets)."""
    if len(values) == 0:
        return np.full(len(bounds), np.nan)
    ordered = np.sort(values)
    return np.searchsorted(ordered, np.asarray(bounds), side="right") / len(ordered)


def metrics_dashboard(
    runs: Sequence[tuple[str, MetricsRun]],
    *,
    fontsize: float = FONT_SIZE,
) -> Figure:
    """Five panels of vLLM's metrics for ``runs``, ``(label, MetricsRun)`` pairs (at most four),
    over each run's time since its first token: running (solid) and waiting (dashed) requests,
    KV-cache usage, prefix-cache hit rate so far (a run that counts no queries, prefix caching
    off, draws none and says so), then the TTFT and inter-token latency histograms as cumulative
    shares at vLLM's bucket bounds (log scale)."""
    if isinstance(runs, (str, bytes)) or not isinstance(runs, Sequence) or not runs:
        raise ValueError(
            f"runs must be a non-empty list of (label, MetricsRun) pairs, got {runs!r}"
        )
    if len(runs) > len(_COLORS):
        raise ValueError(f"at most {len(_COLORS)} runs fit one dashboard, got {len(runs)}")
    for pair in runs:
        if not (isinstance(pair, tuple) and len(pair) == 2 and isinstance(pair[1], MetricsRun)):
            raise TypeError(f"each run must be a (label, MetricsRun) pair, got {pair!r}")
    fig = Figure(figsize=(5.6, 11.5), layout="constrained")
    axes = fig.subplots(5, 1)
    small = fontsize - 1
    for (label, run), color in zip(runs, _COLORS, strict=False):
        t = run.time_s - run.time_s[0]
        axes[0].plot(t, run.running, color=color, lw=1.3)
        axes[0].plot(t, run.waiting, color=color, lw=1.1, ls="--")
        axes[1].plot(t, 100 * run.kv_usage, color=color, lw=1.3)
        queries = run.prefix_queries
        if queries[-1] > 0:
            rate = np.where(queries > 0, run.prefix_hits / np.maximum(queries, 1), np.nan)
            axes[2].plot(t, 100 * rate, color=color, lw=1.3)
        else:
            note = f"{label}: no queries counted"
            axes[2].text(
                0.98,
                0.08,
                note,
                color=color,
                ha="right",
                fontsize=small,
                transform=axes[2].transAxes,
            )
        for ax, values, bounds in (
            (axes[3], run.ttft_s, TIME_TO_FIRST_TOKEN_BUCKETS),
            (axes[4], run.itl_s, INTER_TOKEN_LATENCY_BUCKETS),
        ):
            share = _cumulative_share(values, bounds)
            ax.step(bounds, 100 * share, where="post", color=color, lw=1.3, marker="o", ms=3)
    titles = (
        "vllm:num_requests_running (solid)\nand _waiting (dashed)",
        "vllm:kv_cache_usage_perc (%)",
        "prefix_cache_hits_total /\nprefix_cache_queries_total (%)",
        "vllm:time_to_first_token_seconds:\n% of requests at or under each bucket",
        "vllm:inter_token_latency_seconds:\n% of tokens at or under each bucket",
    )
    for ax, title in zip(axes, titles, strict=True):
        ax.set_title(title, loc="left", fontsize=fontsize)
        ax.tick_params(labelsize=small)
        despine(ax)
    for ax in axes[:3]:
        ax.set_xlabel("time since the first token (s)", fontsize=small)
    axes[1].set_ylim(0, 100)
    axes[2].set_ylim(0, 100)
    for ax in axes[3:]:
        ax.set_xscale("log")
        ax.set_ylim(0, 105)
        ax.set_xlabel("bucket bound le (s)", fontsize=small)
    ttft_hi = max(float(np.max(r.ttft_s)) for _, r in runs if len(r.ttft_s))
    itl_hi = max((float(np.max(r.itl_s)) for _, r in runs if len(r.itl_s)), default=1.0)
    axes[3].set_xlim(0.004, _bound_above(ttft_hi, TIME_TO_FIRST_TOKEN_BUCKETS) * 1.5)
    axes[4].set_xlim(0.008, _bound_above(itl_hi, INTER_TOKEN_LATENCY_BUCKETS) * 1.5)
    handles = [
        Line2D([], [], color=c, lw=2, label=label)
        for (label, _), c in zip(runs, _COLORS, strict=False)
    ]
    figure_legend(fig, handles, fontsize=fontsize, ncols=1)
    return fig


def _bound_above(value: float, bounds: Sequence[float]) -> float:
    """The first bucket bound at or above ``value`` (the last bound if none)."""
    for bound in bounds:
        if bound >= value:
            return bound
    return bounds[-1]
