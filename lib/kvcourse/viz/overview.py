"""The map of a vLLM server (§4.5; the vLLM paper's Figure 4): a central
scheduler with its block manager, and the GPU workers it sends token ids and block tables to."""

from __future__ import annotations

from collections.abc import Callable

from matplotlib.axes import Axes
from matplotlib.patches import FancyArrowPatch, FancyBboxPatch
from matplotlib.path import Path

from kvcourse._checks import check_positive_int
from kvcourse.viz.phone import phone_font_size
from kvcourse.viz.style import BLUE, CHANGED, center_text, finish_diagram

__all__ = ["draw_system_overview"]


def draw_system_overview(
    ax: Axes,
    *,
    num_workers: int = 2,
    num_heads: int = 40,
    fontsize: float = 12,
    phone: bool = False,
) -> None:
    """The vLLM layout (paper Fig. 4): a central scheduler whose block manager keeps every
    sequence's block table, sending token ids and block tables to ``num_workers`` tensor-parallel
    GPU workers each step (paper §4.6). Every worker uses the same block ids, and its physical
    blocks hold the K and V of its own ``num_heads / num_workers`` heads.

    The scheduler stands left of the workers; ``phone=True`` puts it above them, for a phone's
    column (:func:`~kvcourse.viz.phone.phone_figure`)."""
    num_workers = check_positive_int("num_workers", num_workers)
    num_heads = check_positive_int("num_heads", num_heads)
    if num_heads % num_workers:
        raise ValueError(
            f"num_heads ({num_heads}) must be a positive multiple of num_workers ({num_workers})"
        )

    def box(x: float, y: float, w: float, h: float, fc: str, ec: str, lw: float = 1.4) -> None:
        ax.add_patch(
            FancyBboxPatch(
                (x, y), w, h, boxstyle="round,pad=0.02,rounding_size=0.15", fc=fc, ec=ec, lw=lw
            )
        )

    def arrow(
        start: tuple[float, float],
        end: tuple[float, float],
        color: str = "0.25",
        style: str = "-|>",
        ls: str = "-",
    ) -> None:
        ax.add_patch(
            FancyArrowPatch(
                start, end, arrowstyle=style, mutation_scale=16, lw=1.6, color=color, ls=ls
            )
        )

    def text(x: float, y: float, line: str, size: float = fontsize, **kwargs: object) -> None:
        center_text(ax, x, y, line, fontsize=size, **kwargs)

    fontsize = phone_font_size(fontsize) if phone else fontsize
    worker_h, worker_gap = 1.9, 0.55
    height = num_workers * worker_h + (num_workers - 1) * worker_gap
    # The scheduler with its block manager, vertically centred on the workers (above them on a
    # phone, with room for the messages in between).
    sx, sw, sh = 0.0, 5.4, 3.3
    sy = height + 1.6 if phone else (height - sh) / 2
    box(sx, sy, sw, sh, "#F3F6FA", BLUE)
    text(sx + sw / 2, sy + sh - 0.35, "Scheduler (CPU)", size=fontsize + 1, weight="bold")
    text(sx + sw / 2, sy + sh - 0.8, "picks each step's sequences", color="0.3")
    bx, bw, bh = sx + 0.25, sw - 0.5, 1.85
    by = sy + 0.3
    box(bx, by, bw, bh, "white", BLUE, lw=1.1)
    text(bx + bw / 2, by + bh - 0.3, "block manager", weight="bold", color=BLUE)
    for k, line in enumerate(
        ("a block table per sequence", "free GPU and CPU blocks", "reference counts")
    ):
        text(bx + bw / 2, by + bh - 0.75 - 0.42 * k, line)

    # The workers, one GPU each, right of a gap wide enough for the message labels.
    wx, ww = (0.0 if phone else sx + sw + 3.0), 5.4
    per = num_heads // num_workers
    centres = []
    for i in range(num_workers):
        y = height - (i + 1) * worker_h - i * worker_gap
        centres.append(y + worker_h / 2)
        box(wx, y, ww, worker_h, "#F7F7F7", "0.35")
        text(wx + ww / 2, y + worker_h - 0.35, f"GPU worker {i}", weight="bold")
        heads = f"heads {i * per}–{(i + 1) * per - 1}"
        text(wx + ww / 2, y + worker_h - 0.85, f"model shard: {heads}")
        text(wx + ww / 2, y + worker_h - 1.3, f"block b: K and V of {heads}")
    if phone:
        _phone_messages(ax, centres, sy, height, fontsize, arrow)
    # Messages: token ids and block tables out to every worker, sampled tokens back from one.
    left, right = sx + sw + 0.08, wx - 0.08
    mid_x = (left + right) / 2
    message = {"ha": "center", "fontsize": fontsize, "linespacing": 1.1}
    for i, c in enumerate([] if phone else centres):
        y = c + 0.3
        arrow((left, y), (right, y), color=BLUE)
        label = "token ids +\nblock tables" if i == 0 else "the same\nblock tables"
        ax.text(mid_x, y + 0.1, label, va="bottom", color=BLUE, **message)
    y = centres[0] - 0.3
    if not phone:
        arrow((right, y), (left, y), color=CHANGED)
        ax.text(mid_x, y - 0.12, "sampled\ntokens", va="top", color=CHANGED, **message)
    if num_workers > 1:
        for a, b in zip(centres, centres[1:], strict=False):
            arrow(
                (wx + ww + 0.2, a - 0.35),
                (wx + ww + 0.2, b + 0.35),
                color="0.45",
                style="<|-|>",
                ls="--",
            )
        ax.text(
            wx + ww + 0.4,
            (centres[0] + centres[-1]) / 2,
            "all-reduce",
            ha="left",
            va="center",
            fontsize=fontsize,
            color="0.35",
            rotation=90,
        )
    if phone:
        finish_diagram(ax, (-1.0, wx + ww + 0.9), (-0.1, sy + sh + 0.1))
    else:
        finish_diagram(ax, (-0.1, wx + ww + 0.9), (-0.1, height + 0.1))


def _phone_messages(
    ax: Axes,
    centres: list[float],
    sy: float,
    height: float,
    fontsize: float,
    arrow: Callable[..., None],
) -> None:
    """The messages of the phone layout: token ids and block tables down to the first worker
    and, along the left margin, to the others; sampled tokens back up."""
    top_worker, mid = height, (height + sy) / 2
    message = {"ha": "left", "va": "center", "fontsize": fontsize, "linespacing": 1.1}
    arrow((1.4, sy - 0.05), (1.4, top_worker + 0.05), color=BLUE)
    ax.text(1.6, mid, "token ids +\nblock tables", color=BLUE, **message)
    arrow((4.1, top_worker + 0.05), (4.1, sy - 0.05), color=CHANGED)
    ax.text(4.3, mid, "sampled\ntokens", color=CHANGED, **message)
    for c in centres[1:]:
        lane = [(-0.02, sy + 0.45), (-0.45, sy + 0.45), (-0.45, c), (-0.02, c)]
        ax.add_patch(
            FancyArrowPatch(
                path=Path(lane, [Path.MOVETO] + [Path.LINETO] * 3),
                arrowstyle="-|>",
                mutation_scale=16,
                lw=1.6,
                color=BLUE,
            )
        )
    if len(centres) > 1:
        ax.text(
            -0.62,
            (sy + 0.45 + centres[-1]) / 2,
            "the same block tables",
            ha="center",
            va="center",
            rotation=90,
            fontsize=fontsize,
            color=BLUE,
        )
