"""The drawings of §10's heavy hitters (H2O): where a model's attention goes, and what each
eviction rule costs against the full cache.

* :func:`attention_map_figure` draws, for each model, its attention map (query row against key
  column, averaged over heads, log colour scale) beside each token's accumulated attention, the
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
    """One row per model in ``maps`` (title → square attention map, query × key): the map on a
    log colour scale from 0.001 to 1, and each key's accumulated attention (its column's sum)
    as bars, the ``top`` largest after the first token marked in orange, the first token's bar
    in dark grey."""
    if not maps:
        raise ValueError("maps must hold at least one attention map, e.g. {'trained': a}")
    top = int(top)
    rows = []
    for title, a in maps.items():
        a = np.asarray(a, dtype=float)
        if a.ndim != 2 or a.shape[0] != a.shape[1] or a.shape[0] < 2:
            raise ValueError(f"{title!r}: an attention map is square (query × key), got {a.shape}")
        rows.append((title, a))
    fig = Figure(figsize=(9.6, 3.4 * len(rows)), layout="constrained")
    axes = fig.subplots(len(rows), 2, width_ratios=(1, 1.35), squeeze=False)
    for (title, a), (left, right) in zip(rows, axes, strict=True):
        n = a.shape[0]
        shown = np.ma.masked_where(np.triu(np.ones_like(a, dtype=bool), k=1), a)
        left.imshow(
            np.clip(shown, _FLOOR, 1.0),
            norm=LogNorm(_FLOOR, 1.0),
            cmap="viridis_r",
            interpolation="nearest",
            aspect="equal",
        )
        left.set_title(title, fontsize=fontsize)
        left.set_xlabel("key position", fontsize=fontsize)
        left.set_ylabel("query position", fontsize=fontsize)
        sums = a.sum(axis=0)
        colors = ["0.6"] * n
        colors[0] = "0.2"
        for i in (np.argsort(-sums[1:], kind="stable")[:top] + 1).tolist():
            colors[i] = ORANGE
        right.bar(range(n), sums, width=1.0, color=colors)
        right.set_xlim(-0.5, n - 0.5)
        right.set_xlabel("key position", fontsize=fontsize)
        right.set_ylabel("accumulated attention", fontsize=fontsize)
        right.set_title(f"{title}: column sums", fontsize=fontsize)
        right.grid(axis="y", alpha=0.3)
        despine(right)
        for ax in (left, right):
            ax.tick_params(labelsize=fontsize - 1)
    return fig


def eviction_plot(points: Sequence[EvictionPoint], *, fontsize: float = FONT_SIZE) -> Figure:
    """Mean KL(full ‖ rule) in nats (left) and top-1 agreement with the full cache (right)
    against the budget in tokens per layer and KV head, a line per rule in ``points``; the full
    cache is the dashed line (KL 0, agreement 1)."""
    if not points:
        raise ValueError("points must hold at least one EvictionPoint (see eviction_sweep)")
    fig = Figure(figsize=(9.6, 3.7), layout="constrained")
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
