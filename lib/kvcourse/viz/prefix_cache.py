"""The drawings of §8 (prefix caching): chained block hashes row by row, and hit rate against cache
capacity for several traces under LRU and LFU.

* :func:`chained_hash_figure` draws requests as rows of blocks, each block with its tokens and the
  first hex digits of its chained hash (:mod:`kvcourse.blocks.hashing`); a block whose hash
  equals the first row's at the same position is shaded as shared, one that differs is outlined
  in red, and a partial last block, which gets no hash, is drawn pale and dashed (Ex 10);
* :func:`hit_rate_plot` draws :class:`~kvcourse.cluster.prefix_replay.ReplayResult` curves:
  capacity in blocks on a log axis, block-weighted hit rate up, one colour per trace, LRU solid
  and LFU dashed, the infinite cache as a dotted ceiling, and optional reference points (a
  paper's table).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.patches import Rectangle

from kvcourse.blocks.hashing import chained_block_hashes, short_hash
from kvcourse.cluster.prefix_replay import ReplayResult
from kvcourse.viz.phone import PHONE_MIN_FONT_PT, phone_figure
from kvcourse.viz.style import (
    BLUE,
    CHANGED,
    FONT_SIZE,
    GREEN,
    ORANGE,
    OURS_EMPTY,
    PURPLE,
    SHARED,
    center_text,
    despine,
    finish_diagram,
)

__all__ = ["chained_hash_figure", "hit_rate_plot"]

_TRACE_COLORS = (BLUE, ORANGE, GREEN, PURPLE)


def chained_hash_figure(
    rows: Sequence[tuple[str, Sequence[int]]],
    block_size: int = 4,
    *,
    fontsize: float = FONT_SIZE,
    phone: bool = False,
) -> Figure:
    """Requests as rows of blocks with their chained hashes. ``rows`` are ``(label, tokens)``;
    the first row is the reference the others are compared with, block by block. ``phone=True``
    draws it for a phone's column: each label above its row, a block's tokens two to a line."""
    if not rows:
        raise ValueError("rows must list at least one (label, tokens) pair")
    hashes = [chained_block_hashes(tokens, block_size) for _, tokens in rows]
    widest = max(-(-len(tokens) // block_size) for _, tokens in rows)
    w, h, gap = 2.2, 1.0, 0.9  # block width, block height, space under a row for its hashes
    if phone:
        w, h, gap, label_h = 1.35, 1.3, 0.75, 0.55
        height = len(rows) * (h + gap + label_h)
        xlim, ylim = (-0.1, widest * (w + 0.2)), (gap - 0.75, height + 0.1)
        fig = phone_figure()
        token_size = hash_size = label_size = PHONE_MIN_FONT_PT
    else:
        label_h = 0.0
        height = len(rows) * (h + gap)
        # Blocks 0.12 apart and the labels' margin kept short, so that a 5-block row is 8.1 in
        # wide: shown in the book's 672 px column, its 9 pt tokens stay above 10 px.
        xlim, ylim = (-2.75, widest * (w + 0.12)), (gap - 0.65, height + 0.1)
        width = 1.36 * widest + 1.3
        aspect = (ylim[1] - ylim[0]) / (xlim[1] - xlim[0])
        fig = Figure(figsize=(width, width * aspect + 0.15), layout="constrained")
        token_size, hash_size, label_size = fontsize - 2, fontsize - 2, fontsize
    ax = fig.subplots()
    for r, (label, tokens) in enumerate(rows):
        y = height - (r + 1) * (h + gap + label_h) + gap
        if phone:
            ax.text(0.0, y + h + 0.12, label, ha="left", va="bottom", fontsize=label_size)
        else:
            ax.text(-0.25, y + h / 2, label, ha="right", va="center", fontsize=label_size)
        for b in range(-(-len(tokens) // block_size)):
            part = tokens[b * block_size : (b + 1) * block_size]
            x = b * (w + (0.2 if phone else 0.12))
            full = len(part) == block_size
            same = full and b < len(hashes[0]) and hashes[r][b] == hashes[0][b]
            fill = SHARED if same and r > 0 else ("white" if full else OURS_EMPTY)
            edge = CHANGED if full and r > 0 and not same else "0.3"
            ax.add_patch(
                Rectangle(
                    (x, y),
                    w,
                    h,
                    fc=fill,
                    ec=edge,
                    lw=2.2 if edge == CHANGED else 1.0,
                    ls="-" if full else "--",
                )
            )
            words = [str(t) for t in part]
            text = " ".join(words)
            if phone:
                text = "\n".join(" ".join(words[i : i + 2]) for i in range(0, len(words), 2))
            center_text(ax, x + w / 2, y + h / 2, text, fontsize=token_size)
            tag = short_hash(hashes[r][b], 6) if full else "no hash"
            color = CHANGED if edge == CHANGED else "0.25"
            center_text(
                ax,
                x + w / 2,
                y - (0.35 if phone else 0.32),
                tag,
                fontsize=hash_size,
                color=color,
                family="monospace",
            )
    finish_diagram(ax, xlim, ylim)
    return fig


def hit_rate_plot(
    curves: Mapping[str, Mapping[str, Sequence[ReplayResult]]],
    *,
    ax: Axes | None = None,
    reference: Mapping[str, Sequence[tuple[float, float]]] | None = None,
    fontsize: float = FONT_SIZE,
) -> Axes:
    """Hit rate against capacity: ``curves[trace][eviction]`` lists replays at growing capacities
    (an infinite one, capacity None, becomes the trace's dotted ceiling). ``reference`` maps a
    label to ``(capacity, hit rate)`` points drawn as black crosses (a paper's table)."""
    if ax is None:
        ax = Figure(figsize=(6.6, 4.2), layout="constrained").subplots()
    handles = []
    for i, (trace, by_eviction) in enumerate(curves.items()):
        color = _TRACE_COLORS[i % len(_TRACE_COLORS)]
        for eviction, results in by_eviction.items():
            finite = [r for r in results if r.capacity is not None]
            style = "-" if eviction == "lru" else "--"
            ax.plot(
                [r.capacity for r in finite],
                [r.hit_rate for r in finite],
                ls=style,
                marker="o" if eviction == "lru" else "s",
                ms=4,
                color=color,
                mfc=color if eviction == "lru" else "white",
            )
            ceiling = [r.hit_rate for r in results if r.capacity is None]
            if ceiling and eviction == "lru":
                ax.axhline(ceiling[0], color=color, ls=":", lw=1)
        handles.append(Line2D([], [], color=color, lw=2, label=trace))
    handles += [
        Line2D([], [], color="0.3", ls="-", marker="o", ms=4, label="LRU"),
        Line2D([], [], color="0.3", ls="--", marker="s", ms=4, mfc="white", label="LFU"),
        Line2D([], [], color="0.3", ls=":", lw=1, label="infinite cache"),
    ]
    for label, points in (reference or {}).items():
        xs, ys = zip(*points, strict=True)
        ax.plot(xs, ys, "x", color="black", ms=7, mew=1.6)
        handles.append(Line2D([], [], color="black", marker="x", ls="", ms=7, label=label))
    ax.set_xscale("log")
    ax.set_ylim(0, max(0.05, math.ceil(ax.get_ylim()[1] * 10) / 10))
    ax.set_xlabel("cache capacity (blocks)", fontsize=fontsize)
    ax.set_ylabel("hit rate (share of blocks)", fontsize=fontsize)
    ax.grid(alpha=0.3)
    despine(ax)
    ax.legend(
        handles=handles,
        fontsize=fontsize - 1.5,
        frameon=False,
        loc="upper center",
        bbox_to_anchor=(0.5, -0.16),
        ncols=3,
    )
    return ax
