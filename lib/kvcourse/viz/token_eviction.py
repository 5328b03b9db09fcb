"""The drawings of §10's heavy hitters (H2O): where a model's attention goes, and what each
eviction rule costs against the full cache.

* :func:`attention_map_figure` draws, for each model, its attention map (query row against key
  column, averaged over heads, log colour scale) under each token's accumulated attention, the
  column sums H2O ranks tokens by: a trained model's columns at the start (sinks) and a few
  others (heavy hitters) stand out, a seeded random model's do not;
* :func:`eviction_plot` draws the mean KL divergence from the full cache's next-token
  distribution (left) and the top-1 agreement with it (right) against the token budget, one line
  per rule (:mod:`kvcourse.generation.token_eviction`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import torch
from matplotlib.colors import LogNorm
from matplotlib.figure import Figure

from kvcourse.generation.token_eviction import EvictionPoint
from kvcourse.viz.style import FONT_SIZE, ORANGE, SERIES_COLORS, despine

__all__ = ["attention_map_figure", "eviction_plot"]

_RULE_LABELS = {"sink_window": "sinks + window", "h2o": "H2O (heavy hitters + recent)"}
_FLOOR = 1e-3  # attention below this shows as the lightest colour


def attention_map_figure(
    maps: Mapping[str, torch.Tensor | np.ndarray],
    *,
    top: int = 3,
    fontsize: float = FONT_SIZE,
) -> Figure:
    """One panel per model in ``maps`` (title → square attention map, query × key): the map on a
    log colour scale from 0.001 to 1, and above it each key's accumulated attention (its
    column's sum, scaled to the panel's tallest) as a filled step line, with the first token's
    bar in dark grey and the ``top`` largest after it in orange."""
    if not maps:
        raise ValueError("maps must hold at least one attention map, e.g. {'trained': a}")
    top = int(top)
    panels = []
    for title, a in maps.items():
        a = np.asarray(a, dtype=float)
        if a.ndim != 2 or a.shape[0] != a.shape[1] or a.shape[0] < 2:
            raise ValueError(f"{title!r}: an attention map is square (query × key), got {a.shape}")
        panels.append((title, a))
    fig = Figure(figsize=(4.4 * len(panels), 5.2), layout="constrained")
    axes = fig.subplots(1, len(panels), squeeze=False)[0]
    for (title, a), ax in zip(panels, axes, strict=True):
        n = a.shape[0]
        strip = 0.3 * n  # the column sums' height, in rows of the map
        shown = np.ma.masked_where(np.triu(np.ones_like(a, dtype=bool), k=1), a)
        ax.imshow(
            np.clip(shown, _FLOOR, 1.0),
            norm=LogNorm(_FLOOR, 1.0),
            cmap="viridis_r",
            interpolation="nearest",
            extent=(-0.5, n - 0.5, n - 0.5, -0.5),
        )
        sums = a.sum(axis=0)
        height = sums / sums.max() * strip
        base = -1.5  # just above the map's first row
        edges = np.arange(n + 1) - 0.5
        ax.stairs(base - height, edges, baseline=base, fill=True, color="0.6")
        marked = (np.argsort(-sums[1:], kind="stable")[:top] + 1).tolist()
        ax.bar(0, -height[0], bottom=base, width=1.0, color="0.2")
        ax.bar(marked, -height[marked], bottom=base, width=1.0, color=ORANGE)
        ax.text(
            n - 1,
            base - strip,
            "accumulated attention",
            ha="right",
            va="top",
            fontsize=fontsize - 1.5,
            color="0.3",
        )
        ax.set_ylim(n - 0.5, base - strip - 0.08 * n)
        ax.set_xlim(-0.5, n - 0.5)
        ax.set_yticks([t for t in ax.get_xticks() if 0 <= t < n])
        ax.set_title(title, fontsize=fontsize)
        ax.set_xlabel("key position", fontsize=fontsize)
        ax.set_ylabel("query position", fontsize=fontsize)
        ax.tick_params(labelsize=fontsize - 1)
        despine(ax)
    return fig


def eviction_plot(points: Sequence[EvictionPoint], *, fontsize: float = FONT_SIZE) -> Figure:
    """Mean KL(full ‖ rule) in nats (left) and top-1 agreement with the full cache (right)
    against the budget in tokens per layer and KV head, a line per rule in ``points``; the full
    cache is the dashed line (KL 0, agreement 1)."""
    if not points:
        raise ValueError("points must hold at least one EvictionPoint (see eviction_sweep)")
    fig = Figure(figsize=(8.6, 3.7), layout="constrained")
    left, right = fig.subplots(1, 2)
    budgets = sorted({p.budget for p in points})
    rules = list(dict.fromkeys(p.rule for p in points))
    for i, rule in enumerate(rules):
        mine = sorted((p for p in points if p.rule == rule), key=lambda p: p.budget)
        xs = [p.budget for p in mine]
        style = {"color": SERIES_COLORS[i % len(SERIES_COLORS)], "lw": 2, "marker": "o"}
        label = _RULE_LABELS.get(rule, rule)
        left.plot(xs, [p.mean_kl for p in mine], label=label, **style)
        right.plot(xs, [100 * p.top1_agreement for p in mine], label=label, **style)
    left.axhline(0.0, color="0.25", ls="--", lw=1.2, label="full cache")
    right.axhline(100.0, color="0.25", ls="--", lw=1.2, label="full cache")
    left.set_ylabel("mean KL from full (nats)", fontsize=fontsize)
    right.set_ylabel("top-1 agrees with full (%)", fontsize=fontsize)
    right.set_ylim(0, 104)
    for ax in (left, right):
        ax.set_xscale("log", base=2)
        ax.set_xticks(budgets, [str(b) for b in budgets])
        ax.minorticks_off()
        ax.set_xlabel("budget (tokens kept per layer and KV head)", fontsize=fontsize)
        ax.grid(alpha=0.3)
        ax.tick_params(labelsize=fontsize - 1)
        despine(ax)
    left.legend(fontsize=fontsize - 1.5, frameon=False, loc="upper right")
    return fig
