"""§6's scheduler drawn: the pool, the queue and the victims, one iteration per row; and
exercise 6's swap against recompute by block size.

* :func:`draw_preemption_frame` draws one :class:`~kvcourse.viz.preemption_frames.PreemptionFrame`
  (recorded from the real scheduler by :func:`~kvcourse.viz.preemption_frames.preemption_frames`)
  as a row: the pool's blocks coloured by owner, the blocks a victim gave back outlined in dashed
  red, the queue on the right, and a sentence under the row saying what happened;
  :func:`preemption_frames_figure` stacks frames, one row per iteration, with one legend.
* :func:`swap_vs_recompute_plot`: swapping out and in against recomputing, by block size.

The colours are those of :mod:`kvcourse.viz.style`: one owner colour per request
(:data:`~kvcourse.viz.style.OWNER_COLORS`), red for what the step took away.
"""

from __future__ import annotations

import math
import textwrap
from collections.abc import Sequence
from dataclasses import dataclass, field

from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.patches import Patch, Rectangle
from matplotlib.patheffects import withStroke
from matplotlib.text import Text

from kvcourse.serving.swap_cost import SwapVsRecompute
from kvcourse.viz.phone import PHONE_MIN_FONT_PT, phone_figure, phone_font_size
from kvcourse.viz.preemption_frames import PreemptionFrame, frame_note
from kvcourse.viz.style import (
    BLUE,
    CHANGED,
    CHANGED_TEXT,
    FONT_SIZE,
    FREE_EDGE,
    ORANGE,
    OUTLINE,
    OWNER_COLORS,
    center_text,
    despine,
    figure_legend,
    finish_diagram,
    light_fill,
)

__all__ = [
    "PreemptionArtists",
    "draw_preemption_frame",
    "preemption_frames_figure",
    "preemption_legend_handles",
    "swap_vs_recompute_plot",
]

# ---------------------------------------------------------------------------- drawing

# Geometry of a row, in data units (equal aspect): one slot is _SLOT wide.
_SLOT, _GAP, _H = 1.0, 0.5, 1.2
_LABEL_W, _QUEUE_GAP, _QUEUE_BOX = 5.0, 2.0, 2.6
# On a phone: the gap between a row's blocks and its queue's line; a note's line length.
_PHONE_SKIP, _PHONE_NOTE_CHARS = 0.45, 50


def _colors(frames: Sequence[PreemptionFrame]) -> dict[str, str]:
    names: list[str] = []
    for f in frames:
        for r in (*f.running, *f.finished, *f.victims, *f.waiting):
            if r.name not in names:
                names.append(r.name)
    names.sort(key=lambda n: (len(n), n))
    return {n: OWNER_COLORS[i % len(OWNER_COLORS)] for i, n in enumerate(names)}


@dataclass
class PreemptionArtists:
    """What :func:`draw_preemption_frame` drew: the block outlines by physical id, the freed
    blocks' dashed outlines, the queue boxes in order, the note under the row and the label."""

    blocks: dict[int, Rectangle] = field(default_factory=dict)
    freed: list[Rectangle] = field(default_factory=list)
    queue: list[Rectangle] = field(default_factory=list)
    note: Text | None = None
    label: Text | None = None


def _row_width(frame: PreemptionFrame, queue_len: int) -> float:
    pool_w = frame.num_blocks * (frame.block_size * _SLOT + _GAP)
    return _LABEL_W + pool_w + _QUEUE_GAP + 3.4 + queue_len * (_QUEUE_BOX + 0.3) + 0.6


def draw_preemption_frame(
    ax: Axes,
    frame: PreemptionFrame,
    *,
    y: float = 0.0,
    colors: dict[str, str] | None = None,
    fontsize: float = FONT_SIZE,
    note: bool = True,
    phone: bool = False,
) -> PreemptionArtists:
    """Draw ``frame`` as one row at height ``y`` of ``ax``: the iteration on the left; the pool's
    blocks left to right by physical id, each filled by its owner's colour for its stored tokens
    (pale for the empty slots of a last block) and labelled with the owner; the blocks this
    iteration's victims gave back outlined in dashed red with the victim's name in red; the
    blocks of requests that finished hatched; then the waiting queue, head first, a victim's box
    in red with the tokens it will recompute. ``note`` adds :func:`frame_note` under the row.
    The caller sets the limits (:func:`preemption_frames_figure` does). ``phone=True`` draws it
    for a phone's column: the queue on a line of its own under the blocks, the note broken into
    lines under it (:func:`phone_row_height` says how tall the row is then)."""
    if colors is None:
        colors = _colors([frame])
    art = PreemptionArtists()
    small = max(fontsize - 1, PHONE_MIN_FONT_PT) if phone else fontsize - 1
    fontsize = phone_font_size(fontsize) if phone else fontsize
    bs = frame.block_size
    x0 = 0.0
    block_w = bs * _SLOT
    fill: dict[int, tuple[str, int, str]] = {}  # block -> (name, tokens in it, kind)
    for kind, group in (("run", frame.running), ("done", frame.finished), ("gone", frame.victims)):
        for r in group:
            for i, b in enumerate(r.blocks):
                fill[b] = (r.name, min(bs, r.tokens - i * bs), kind)
    for b in range(frame.num_blocks):
        x = x0 + b * (block_w + _GAP)
        name, tokens, kind = fill.get(b, (None, 0, "free"))
        color = colors.get(name, "#BDBDBD") if name else "white"
        for s in range(bs):
            if kind == "run":
                fc = color if s < tokens else light_fill(color)
            elif kind == "done":
                fc = light_fill(color)
            else:
                fc = "white"
            ax.add_patch(
                Rectangle(
                    (x + s * _SLOT, y),
                    _SLOT,
                    _H,
                    fc=fc,
                    ec="0.75",
                    lw=0.5,
                    hatch="////" if kind == "done" else None,
                    zorder=1,
                )
            )
        gone = kind == "gone"
        outline = Rectangle(
            (x, y),
            block_w,
            _H,
            fc="none",
            ec=CHANGED if gone else (OUTLINE if kind == "run" else FREE_EDGE),
            lw=2.4 if gone else (1.6 if kind == "run" else 1.0),
            ls="--" if gone else "-",
            zorder=3,
        )
        ax.add_patch(outline)
        art.blocks[b] = outline
        if gone:
            art.freed.append(outline)
        if name is not None:
            center_text(
                ax,
                x + block_w / 2,
                y + _H / 2,
                name,
                fontsize=fontsize,
                weight="bold",
                color=CHANGED_TEXT if gone else ("black" if kind == "run" else "0.4"),
                path_effects=[withStroke(linewidth=2.5, foreground="white")],
                zorder=4,
            )
    art.label = ax.text(
        x0 - 0.6,
        y + _H / 2,
        f"step {frame.iteration}",
        ha="right",
        va="center",
        fontsize=fontsize,
    )
    qx = x0 + frame.num_blocks * (block_w + _GAP) + _QUEUE_GAP
    qy = y  # the queue's line: beside the blocks, or under them on a phone
    if phone:
        qx, qy = x0, y - _H - _PHONE_SKIP
    ax.text(qx, qy + _H / 2, "queue", ha="left", va="center", fontsize=small, color="0.3")
    qx += 3.4 + 1.4 * phone
    victims = {v.name for v in frame.victims}
    if not frame.waiting:
        ax.text(
            qx,
            qy + _H / 2,
            "empty",
            ha="left",
            va="center",
            fontsize=small,
            color="0.5",
            style="italic",
        )
    for w in frame.waiting:
        hit = w.name in victims
        color = colors.get(w.name, "#BDBDBD")
        box = Rectangle(
            (qx, qy),
            _QUEUE_BOX,
            _H,
            fc=light_fill(color),
            ec=CHANGED if hit else OUTLINE,
            lw=2.2 if hit else 1.0,
            zorder=2,
        )
        ax.add_patch(box)
        art.queue.append(box)
        label = f"{w.name}↻{w.tokens}" if w.recompute else w.name
        center_text(
            ax,
            qx + _QUEUE_BOX / 2,
            qy + _H / 2,
            label,
            fontsize=small if w.recompute else fontsize,
            color=CHANGED_TEXT if hit else "black",
            weight="bold",
            zorder=3,
        )
        qx += _QUEUE_BOX + 0.3
    if note:
        art.note = ax.text(
            x0,
            qy - 0.25,
            _phone_note(frame) if phone else frame_note(frame),
            ha="left",
            va="top",
            fontsize=small,
            color=CHANGED_TEXT if frame.victims else "0.25",
        )
    return art


def _phone_note(frame: PreemptionFrame) -> str:
    """:func:`frame_note` broken into lines that fit a phone's column under the blocks."""
    return textwrap.fill(frame_note(frame), _PHONE_NOTE_CHARS)


def phone_row_height(frame: PreemptionFrame) -> float:
    """How tall (data units) :func:`draw_preemption_frame` draws ``frame`` with ``phone=True``:
    the blocks, the queue's line and the note's lines, and the space to the next row."""
    lines = _phone_note(frame).count("\n") + 1
    return 2 * _H + _PHONE_SKIP + 0.25 + 1.55 * lines + 0.9


def preemption_legend_handles() -> list[Patch | Line2D]:
    """Legend entries for :func:`draw_preemption_frame`."""
    return [
        Patch(fc=OWNER_COLORS[0], ec="0.4", label="slots holding a request's tokens"),
        Patch(fc=light_fill(OWNER_COLORS[0]), ec="0.4", label="empty slots of its last block"),
        Patch(fc="white", ec=CHANGED, lw=2.2, ls="--", label="blocks a victim gave back"),
        Patch(fc="white", ec="0.5", hatch="////", label="blocks freed by a finished request"),
        Patch(fc="white", ec=FREE_EDGE, label="free block"),
        Line2D([], [], ls="none", label="C↻6 in the queue: C will recompute 6 tokens"),
    ]


def preemption_frames_figure(
    frames: Sequence[PreemptionFrame],
    *,
    fontsize: float = FONT_SIZE,
    legend: bool = True,
    width_in: float | None = None,
    phone: bool = False,
) -> Figure:
    """``frames`` stacked top to bottom, one row (and its note) per iteration, with block ids
    above the first row and one legend under all (unless ``legend`` is False). The figure is
    sized to the rows; ``width_in`` overrides its width. ``phone=True`` draws the rows for a
    phone's column, each queue under its blocks."""
    frames = list(frames)
    if not frames or not all(isinstance(f, PreemptionFrame) for f in frames):
        raise ValueError("frames must be a non-empty list of PreemptionFrame (preemption_frames())")
    if len({(f.num_blocks, f.block_size) for f in frames}) != 1:
        raise ValueError("every frame must show the same pool (num_blocks, block_size)")
    colors = _colors(frames)
    if phone:
        return _phone_frames_figure(frames, colors, fontsize, legend)
    longest_queue = max(len(f.waiting) for f in frames)
    width = _row_width(frames[0], max(longest_queue, 2))
    pitch = _H + 1.6
    height = pitch * len(frames) + 1.6
    unit = 0.16  # inch per data unit
    legend_h = 1.1 if legend else 0.0
    fig = Figure(
        figsize=(width_in or unit * (width + _LABEL_W), unit * height + legend_h),
        layout="constrained",
    )
    ax = fig.add_subplot()
    for row, frame in enumerate(frames):
        draw_preemption_frame(ax, frame, y=-row * pitch, colors=colors, fontsize=fontsize)
    f0 = frames[0]
    block_w = f0.block_size * _SLOT
    for b in range(f0.num_blocks):
        x = b * (block_w + _GAP) + block_w / 2
        ax.text(x, _H + 0.3, str(b), ha="center", va="bottom", fontsize=fontsize - 2, color="0.4")
    ax.text(
        f0.num_blocks * (block_w + _GAP) / 2,
        _H + 1.2,
        "physical block",
        ha="center",
        va="bottom",
        fontsize=fontsize - 1,
    )
    finish_diagram(ax, (-_LABEL_W, width - _LABEL_W), (-(len(frames) - 1) * pitch - 1.4, _H + 2.3))
    if legend:
        figure_legend(fig, preemption_legend_handles(), fontsize=fontsize - 1, ncols=2)
    return fig


def _phone_frames_figure(
    frames: list[PreemptionFrame], colors: dict[str, str], fontsize: float, legend: bool
) -> Figure:
    """:func:`preemption_frames_figure` for a phone's column."""
    fig = phone_figure(0.172 * sum(phone_row_height(f) for f in frames))
    ax = fig.add_subplot()
    y = 0.0
    for frame in frames:
        draw_preemption_frame(ax, frame, y=y, colors=colors, fontsize=fontsize, phone=True)
        y -= phone_row_height(frame)
    f0 = frames[0]
    block_w, small = f0.block_size * _SLOT, max(fontsize - 1, PHONE_MIN_FONT_PT)
    for b in range(f0.num_blocks):
        x = b * (block_w + _GAP) + block_w / 2
        ax.text(x, _H + 0.3, str(b), ha="center", va="bottom", fontsize=small, color="0.4")
    pool_w = f0.num_blocks * (block_w + _GAP)
    ax.text(pool_w / 2, _H + 1.9, "physical block", ha="center", va="bottom", fontsize=small)
    finish_diagram(ax, (-_LABEL_W - 0.6, pool_w), (y + 0.6, _H + 3.7))
    if legend:
        figure_legend(fig, preemption_legend_handles(), fontsize=small, ncols=1)
    return fig


def swap_vs_recompute_plot(
    rows: Sequence[SwapVsRecompute],
    *,
    ax: Axes | None = None,
    crossover: float | None = None,
    fontsize: float = FONT_SIZE,
) -> Axes:
    """Exercise 6 against the block size: swapping a sequence out and back in
    (:func:`~kvcourse.serving.swap_cost.swap_vs_recompute`, one row per block size) against
    recomputing it, which does not depend on the block size; ``crossover`` (a block size, e.g.
    :func:`~kvcourse.serving.swap_cost.swap_crossover_block_size`) is marked where the two meet.
    Log axes; times in ms. With ``ax`` None a new figure is made."""
    rows = sorted(rows, key=lambda r: r.block_size)
    if not rows:
        raise ValueError("rows must be a non-empty list of SwapVsRecompute (swap_vs_recompute())")
    if ax is None:
        ax = Figure(figsize=(5.8, 3.6), layout="constrained").add_subplot()
    sizes = [r.block_size for r in rows]
    ax.plot(
        sizes,
        [1e3 * r.swap_round_trip_s for r in rows],
        "o-",
        color=BLUE,
        label="swap out + in",
    )
    ax.plot(
        sizes,
        [1e3 * r.swap_out_s for r in rows],
        "o--",
        color=BLUE,
        alpha=0.55,
        label="swap out only",
    )
    ax.plot(
        sizes,
        [1e3 * r.recompute_s for r in rows],
        "-",
        color=ORANGE,
        lw=2.2,
        label="recompute",
    )
    if crossover is not None and math.isfinite(crossover):
        ax.axvline(crossover, color="0.5", ls=":", lw=1.2)
        ax.text(
            crossover * 1.08,
            ax.get_ylim()[1] * 0.9 if ax.get_yscale() == "linear" else 1e3 * rows[0].swap_out_s,
            f"crossover ≈ {crossover:.1f}",
            fontsize=fontsize - 1,
            color="0.35",
            va="top",
        )
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xticks(sizes, [str(s) for s in sizes])
    ax.set_xlabel("block size (tokens)", fontsize=fontsize)
    ax.set_ylabel("time (ms)", fontsize=fontsize)
    ax.tick_params(labelsize=fontsize - 1)
    ax.legend(frameon=False, fontsize=fontsize - 1)
    despine(ax)
    return ax
