"""The drawings of §10 (making KV smaller): what a sink-and-window rule keeps, in memory and in
blocks.

* :func:`window_memory_plot` draws one request's KV memory against its length: the full cache
  grows in a straight line while a StreamingLLM-style rule (:mod:`kvcourse.kv_formats`) levels
  off at its sinks plus window; a second panel zooms in on one window's edge, where paged blocks
  make the held memory a saw-tooth between ``W`` and ``W + B − 1`` tokens' worth;
* :func:`window_blocks_figure` draws a sequence as rows of paged blocks at successive lengths:
  the sinks' block, the window's blocks, and the middle blocks freed whole as the window slides.
"""

from __future__ import annotations

from collections.abc import Sequence

from matplotlib.figure import Figure
from matplotlib.patches import Patch, Rectangle
from matplotlib.ticker import MultipleLocator

from kvcourse._checks import ceil_div, check_positive_int, check_positive_number
from kvcourse.kv_formats import (
    sink_window_blocks,
    sink_window_kept_blocks,
    sink_window_tokens,
)
from kvcourse.viz.style import (
    FONT_SIZE,
    FREE_EDGE,
    ORANGE,
    OURS_EMPTY,
    OURS_FILL,
    SERIES_COLORS,
    center_text,
    despine,
    figure_legend,
    finish_diagram,
)

__all__ = ["window_blocks_figure", "window_memory_plot"]

_SINK_FILL = "#FBD3A6"  # ORANGE mixed with white


def window_memory_plot(
    bytes_per_token: float,
    max_len: int = 131_072,
    *,
    windows: Sequence[int] = (1024, 4096),
    sinks: int = 4,
    block_size: int = 16,
    zoom_window: int | None = None,
    fontsize: float = FONT_SIZE,
) -> Figure:
    """One request's KV memory (GB) against its length up to ``max_len`` tokens, at
    ``bytes_per_token``: the full cache, and ``sinks`` + each of ``windows`` held in blocks of
    ``block_size`` (left); the first window's edge token by token, tokens kept against the
    memory its blocks hold (right, ``zoom_window`` defaults to the first window)."""
    per_token = check_positive_number("bytes_per_token", bytes_per_token)
    max_len = check_positive_int("max_len", max_len, "e.g. 131072")
    block_size = check_positive_int("block_size", block_size, "e.g. 16")
    if not windows:
        raise ValueError("windows must list at least one window size, e.g. (1024, 4096)")
    zoom = windows[0] if zoom_window is None else check_positive_int("zoom_window", zoom_window)
    fig = Figure(figsize=(8.6, 3.9), layout="constrained")
    left, right = fig.subplots(1, 2, width_ratios=(1.35, 1))
    gb = per_token * block_size / 1e9  # one block, in GB
    xs = sorted({*range(0, max_len + 1, max(max_len // 512, 1)), max_len})
    left.plot(xs, [n * per_token / 1e9 for n in xs], color="0.25", lw=2, label="full cache")
    for i, window in enumerate(windows):
        held = [sink_window_blocks(n, sinks, window, block_size) * gb for n in xs]
        color = SERIES_COLORS[i % len(SERIES_COLORS)]
        left.plot(xs, held, color=color, lw=2, label=f"{sinks} sinks + window {window:,}")
        left.annotate(
            f"{held[-1]:.2f} GB",
            (xs[-1], held[-1]),
            xytext=(-4, 5 + 12 * i),
            textcoords="offset points",
            ha="right",
            fontsize=fontsize - 1.5,
            color=color,
        )
    left.annotate(
        f"{xs[-1] * per_token / 1e9:.1f} GB",
        (xs[-1], xs[-1] * per_token / 1e9),
        xytext=(-6, -4),
        textcoords="offset points",
        ha="right",
        va="top",
        fontsize=fontsize - 1.5,
        color="0.25",
    )
    left.set_xlim(0, max_len * 1.02)
    left.set_ylim(0, None)
    left.xaxis.set_major_locator(MultipleLocator(2 ** max(max_len.bit_length() - 3, 0)))
    left.xaxis.set_major_formatter(lambda v, _pos: f"{v / 1024:g}K" if v else "0")
    left.set_xlabel("sequence length (tokens)", fontsize=fontsize)
    left.set_ylabel("KV of one request (GB)", fontsize=fontsize)

    # The zoom: just past the point where the first tokens start to leave the window.
    start = sinks + zoom - block_size
    ns = list(range(max(start, 0), start + 5 * block_size + 1))
    tokens = [sink_window_tokens(n, sinks, zoom) for n in ns]
    slots = [sink_window_blocks(n, sinks, zoom, block_size) * block_size for n in ns]
    right.step(ns, slots, where="post", color=SERIES_COLORS[0], lw=2, label="slots in held blocks")
    right.plot(ns, tokens, color=ORANGE, lw=1.6, ls="--", label="tokens kept (sinks + window)")
    right.plot(ns, ns, color="0.25", lw=1.2, ls=":", label="full cache")
    right.set_xlabel("sequence length (tokens)", fontsize=fontsize)
    right.set_ylabel("tokens' worth of KV", fontsize=fontsize)
    right.set_title(f"window {zoom:,}, blocks of {block_size}", fontsize=fontsize)
    for ax in (left, right):
        ax.grid(alpha=0.3)
        ax.tick_params(labelsize=fontsize - 1)
        despine(ax)
    left.legend(fontsize=fontsize - 1.5, frameon=False, loc="upper left")
    right.legend(fontsize=fontsize - 1.5, frameon=False, loc="upper left")
    return fig


def window_blocks_figure(
    lengths: Sequence[int] = (10, 13, 16, 18),
    *,
    sinks: int = 2,
    window: int = 8,
    block_size: int = 4,
    fontsize: float = FONT_SIZE,
) -> Figure:
    """The sequence as rows of paged blocks of ``block_size`` slots, one row per length in
    ``lengths``: sink tokens, tokens in the ``window``, tokens held only because their block is
    still held, empty slots, and freed blocks (dashed), numbered by logical block."""
    if not lengths:
        raise ValueError("lengths must list at least one sequence length, e.g. (10, 14)")
    block_size = check_positive_int("block_size", block_size, "e.g. 4")
    widest = max(ceil_div(check_positive_int("length", n), block_size) for n in lengths)
    s, gap_x, row_h = 0.62, 0.22, 1.25  # slot side, space between blocks, row pitch
    block_w = block_size * s
    width_units = 2.2 + widest * (block_w + gap_x)
    ylim = (-0.15, (len(lengths) - 1) * row_h + s + 0.4)
    fig_w = min(9.0, 0.4 * width_units + 0.8)
    fig_h = fig_w * (ylim[1] - ylim[0]) / width_units + 0.75  # the diagram, then the legend
    fig = Figure(figsize=(fig_w, fig_h), layout="constrained")
    ax = fig.subplots()
    for r, n in enumerate(lengths):
        y = (len(lengths) - 1 - r) * row_h
        held = set(sink_window_kept_blocks(n, sinks, window, block_size))
        kept = sink_window_tokens(n, sinks, window)
        ax.text(1.9, y + s / 2, f"{n} tokens", ha="right", va="center", fontsize=fontsize)
        for b in range(ceil_div(n, block_size)):
            x0 = 2.2 + b * (block_w + gap_x)
            center_text(
                ax, x0 + block_w / 2, y + s + 0.2, str(b), fontsize=fontsize - 2, color="0.35"
            )
            if b not in held:
                ax.add_patch(Rectangle((x0, y), block_w, s, fc="white", ec=FREE_EDGE, ls="--"))
                center_text(
                    ax, x0 + block_w / 2, y + s / 2, "freed", fontsize=fontsize - 2, color="0.45"
                )
                continue
            for k in range(block_size):
                t = b * block_size + k
                if t >= n:
                    fill = OURS_EMPTY
                elif t < sinks:
                    fill = _SINK_FILL
                elif t >= n - window or n <= kept:
                    fill = OURS_FILL
                else:
                    fill = "#E3E3E3"
                ax.add_patch(Rectangle((x0 + k * s, y), s, s, fc=fill, ec="0.55", lw=0.6))
            ax.add_patch(Rectangle((x0, y), block_w, s, fc="none", ec="0.2", lw=1.3))
    finish_diagram(ax, (0, width_units), ylim)
    handles = [
        Patch(fc=_SINK_FILL, ec="0.4", label="sink token"),
        Patch(fc=OURS_FILL, ec="0.4", label="in the window"),
        Patch(fc="#E3E3E3", ec="0.4", label="held with its block"),
        Patch(fc=OURS_EMPTY, ec="0.4", label="empty slot"),
        Patch(fc="white", ec=FREE_EDGE, ls="--", label="freed block"),
    ]
    figure_legend(fig, handles, fontsize=fontsize - 1, ncols=3)
    return fig
