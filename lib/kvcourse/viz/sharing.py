"""Drawings of §5's shared blocks: block tables that point at the same physical blocks, their
reference counts, and copy-on-write.

* :func:`draw_sharing_frame` draws one frame of :mod:`kvcourse.viz.sharing_frames`, a
  copy-on-write as a dashed arrow from the copied block to its copy;
  :func:`sharing_frames_figure` stacks several frames, with one legend for all.

Like :mod:`kvcourse.viz.block_tables`, everything draws on an ``Axes`` you pass in or returns a
``Figure`` built without pyplot, with the same colours: the step's changes in red, shared blocks
yellow, each sequence in its own colour.
"""

from __future__ import annotations

import textwrap
from collections.abc import Sequence
from dataclasses import dataclass, field

from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.patches import FancyArrowPatch, Patch, Rectangle
from matplotlib.path import Path
from matplotlib.text import Text

from kvcourse.viz.phone import PHONE_MIN_FONT_PT, phone_figure
from kvcourse.viz.sharing_frames import SharingFrame
from kvcourse.viz.style import (
    CHANGED,
    CHANGED_TEXT,
    FONT_SIZE,
    FREE_EDGE,
    SHARED,
    center_text,
    figure_legend,
    finish_diagram,
    light_fill,
    new_block_outline,
    slot,
)

__all__ = [
    "SharingArtists",
    "draw_sharing_frame",
    "sharing_frames_figure",
    "sharing_legend_handles",
]

# Geometry of a frame, in data units (the axes have an equal aspect ratio).
_SLOT_W, _SLOT_H, _PITCH, _SEQ_GAP = 1.6, 0.6, 0.75, 0.45


@dataclass
class SharingArtists:
    """What :func:`draw_sharing_frame` put on the axes, for tests and for restyling."""

    logical_slots: list[Rectangle] = field(default_factory=list)
    physical_slots: list[Rectangle] = field(default_factory=list)
    table_arrows: list[FancyArrowPatch] = field(default_factory=list)
    copy_arrows: list[FancyArrowPatch] = field(default_factory=list)
    ref_labels: list[Text] = field(default_factory=list)


def sharing_legend_handles(*, copies: bool = True) -> list[Patch | Line2D]:
    """Legend entries for :func:`draw_sharing_frame` (without the copy arrow if not
    ``copies``)."""
    handles: list[Patch | Line2D] = [
        Patch(fc=SHARED, ec="0.35", label="shared block (ref > 1)"),
        Patch(fc="white", ec=FREE_EDGE, label="free block"),
        Patch(fc="white", ec=CHANGED, lw=2.2, label="written or allocated in this step"),
    ]
    if copies:
        handles.append(Line2D([], [], color=CHANGED, lw=1.8, ls="--", label="copy-on-write"))
    return handles


def draw_sharing_frame(
    ax: Axes,
    frame: SharingFrame,
    *,
    title: bool = True,
    fontsize: float = FONT_SIZE,
    phone: bool = False,
) -> SharingArtists:
    """Draw ``frame`` on ``ax``: each sequence's logical blocks (token texts) and block-table
    entry on the left, arrows into the physical pool on the right, and each physical block's
    reference count. Shared blocks are yellow; the step's new tokens, new blocks and changed
    counts are red; a copy-on-write is a dashed red arrow from the copied block to its copy.

    ``phone=True`` draws it for a phone's column: the pool under the sequences, with its counts
    and copies on the left, each table arrow running down the right margin to its block."""
    if not isinstance(frame, SharingFrame):
        raise TypeError(f"frame must be a SharingFrame, got {frame!r}")
    size = frame.block_size
    w, h, pitch, seq_gap = _SLOT_W, _SLOT_H, _PITCH, _SEQ_GAP
    x_log, x_tab, tab_w, x_pool, x_id, x_ref, ref_w, x_end = _columns(size, phone=phone)
    artists = SharingArtists()
    fontsize = PHONE_MIN_FONT_PT if phone else fontsize

    # The sequences on the left, one under the other, and the pool on the right, centred on
    # each other (on a phone, the pool under the sequences).
    rows = sum(len(s.block_ids) for s in frame.sequences)
    left_h = rows * pitch + seq_gap * max(0, len(frame.sequences) - 1)
    pool_h = frame.num_blocks * pitch
    top = 0.0
    left_top = top - max(0.0, (pool_h - left_h) / 2)
    pool_top = top - max(0.0, (left_h - pool_h) / 2)
    if phone:
        left_top, pool_top = top, top - left_h - 0.9
    pool_y = [pool_top - b * pitch for b in range(frame.num_blocks)]  # top edges
    targets = sorted({b for seq in frame.sequences for b in seq.block_ids})

    # Where each table arrow lands: holders of one block spread along its left edge.
    landing: dict[tuple[int, int], float] = {}
    for b in range(frame.num_blocks):
        holders = [n for n, seq in enumerate(frame.sequences) if b in seq.block_ids]
        step = min(0.13, 0.8 * h / max(1, len(holders)))
        for rank, n in enumerate(holders):
            landing[n, b] = pool_y[b] - h / 2 + ((len(holders) - 1) / 2 - rank) * step

    y = left_top
    for number, seq in enumerate(frame.sequences):
        light = light_fill(seq.color)
        first_new = len(seq.tokens) - seq.new_tokens
        n_rows = len(seq.block_ids)
        ax.text(
            x_log - 0.2,
            y - (n_rows * pitch - (pitch - h)) / 2,
            seq.name,
            ha="right",
            va="center",
            fontsize=fontsize,
            color=seq.color,
            weight="bold",
            linespacing=1.0,
        )
        for i, block in enumerate(seq.block_ids):
            yb = y - h
            for s in range(size):
                p = i * size + s
                filled = p < len(seq.tokens)
                rect = slot(
                    ax,
                    x_log + s * w,
                    yb,
                    w,
                    h,
                    fill=light if filled else "white",
                    edge=seq.color,
                    hatch=None if filled else "..",
                    changed=filled and p >= first_new,
                    text=seq.tokens[p] if filled else None,
                    fontsize=fontsize,
                )
                artists.logical_slots.append(rect)
            moved = any(t == block for _, t in frame.copies) or block in frame.new_blocks
            slot(
                ax,
                x_tab,
                yb,
                tab_w,
                h,
                fill="white",
                edge="0.35",
                changed=moved,
                text=str(block),
                fontsize=fontsize,
            )
            if 0 <= block < frame.num_blocks:
                start, end = (x_tab + tab_w, yb + h / 2), (x_pool, landing[number, block])
                path = None
                if phone:  # down a lane of the right margin, the deeper block's farther out
                    lane = x_tab + tab_w + 0.35 + 0.3 * targets.index(block)
                    end = (x_pool + size * w, end[1])
                    points = [start, (lane, start[1]), (lane, end[1]), end]
                    path = Path(points, [Path.MOVETO] + [Path.LINETO] * 3)
                arrow = FancyArrowPatch(
                    *(() if phone else (start, end)),
                    path=path,
                    arrowstyle="-|>",
                    mutation_scale=12,
                    lw=1.4,
                    color=seq.color,
                    shrinkA=1,
                    shrinkB=1,
                    zorder=4,
                )
                ax.add_patch(arrow)
                artists.table_arrows.append(arrow)
            y -= pitch
        y -= seq_gap

    # The physical pool with reference counts.
    for b in range(frame.num_blocks):
        yb = pool_y[b] - h
        count = frame.ref_counts[b]
        texts = frame.block_tokens(b)
        is_new = frame.block_is_new(b)
        holder = next((s for s in frame.sequences if b in s.block_ids), None)
        if count > 1:
            fill = SHARED
        elif holder is not None:
            fill = light_fill(holder.color)
        else:
            fill = "white"
        for s in range(size):
            filled = s < len(texts)
            rect = slot(
                ax,
                x_pool + s * w,
                yb,
                w,
                h,
                fill=fill if filled else "white",
                edge="0.35" if count else FREE_EDGE,
                hatch=".." if (count and not filled) else None,
                changed=filled and is_new[s],
                text=texts[s] if filled else None,
                fontsize=fontsize,
            )
            artists.physical_slots.append(rect)
        if b in frame.new_blocks:
            new_block_outline(ax, x_pool, yb, size * w, h)
        center_text(ax, x_id, yb + h / 2, str(b), fontsize=fontsize, color="0.3")
        changed = b in frame.changed_refs
        label = center_text(
            ax,
            x_ref + ref_w / 2,
            yb + h / 2,
            f"ref {count}" if count else "free",
            fontsize=fontsize,
            color=CHANGED_TEXT if changed else ("black" if count else "0.5"),
            weight="bold" if count > 1 or changed else "normal",
        )
        artists.ref_labels.append(label)

    # Copy-on-write: a dashed arc on the far right (left on a phone), from the copied block to
    # its copy.
    for source, target in frame.copies:
        if not (0 <= source < frame.num_blocks and 0 <= target < frame.num_blocks):
            continue
        x = x_ref - 0.05 if phone else x_ref + ref_w + 0.05
        bend = -0.45 if (target > source) != phone else 0.45
        arrow = FancyArrowPatch(
            (x, pool_y[source] - h / 2),
            (x, pool_y[target] - h / 2),
            connectionstyle=f"arc3,rad={bend}",
            arrowstyle="-|>",
            mutation_scale=13,
            lw=1.8,
            ls="--",
            color=CHANGED,
            zorder=4,
        )
        ax.add_patch(arrow)
        artists.copy_arrows.append(arrow)
        span = abs(target - source) * pitch
        ax.text(
            x + (-1 if phone else 1) * (0.35 + 0.22 * span),
            (pool_y[source] + pool_y[target]) / 2 - h / 2,
            "copy",
            ha="right" if phone else "left",
            va="center",
            fontsize=fontsize,
            color=CHANGED_TEXT,
        )

    # Headings.
    head_y = top + 0.25
    pool_head = pool_top + 0.25 if phone else head_y
    sub = {"ha": "center", "va": "bottom", "fontsize": fontsize, "color": "0.3"}
    ax.text(x_log + size * w / 2, head_y, "logical KV blocks", weight="bold", **sub)
    ax.text(x_tab + tab_w / 2, head_y, "table", weight="bold", **sub)
    ax.text(x_pool + size * w / 2, pool_head, "physical KV blocks", weight="bold", **sub)
    ax.text(x_ref + ref_w / 2, pool_head, "count", weight="bold", **sub)
    bottom = min(left_top - left_h, pool_top - pool_h)
    finish_diagram(ax, (-1.0 if phone else 0.0, x_end), (bottom - 0.1, head_y + 0.6))
    if title:
        label = textwrap.fill(frame.label, 48) if phone else frame.label
        ax.set_title(label, fontsize=fontsize + 1, loc="left", pad=4)
    return artists


def sharing_frames_figure(
    frames: Sequence[SharingFrame],
    *,
    width: float = 9.5,
    fontsize: float = 12,
    legend: bool = True,
    phone: bool = False,
) -> Figure:
    """The frames one under another, each titled with its label, with one legend at the bottom:
    the static stand-in for stepping through a sharing demo. ``phone=True`` draws them for a
    phone's column (``width`` does not apply)."""
    frames = list(frames)
    if not frames or not all(isinstance(f, SharingFrame) for f in frames):
        raise ValueError("frames must be a non-empty list of SharingFrame")
    if phone:
        fig = phone_figure(sum(_frame_height(f, phone=True) for f in frames) * 0.395)
        heights = [_frame_height(f, phone=True) for f in frames]
        axes = fig.subplots(len(frames), 1, squeeze=False, height_ratios=heights)
        for ax, frame in zip(axes[:, 0], frames, strict=True):
            draw_sharing_frame(ax, frame, fontsize=fontsize, phone=True)
        if legend:
            handles = sharing_legend_handles(copies=any(f.copies for f in frames))
            figure_legend(fig, handles, fontsize=PHONE_MIN_FONT_PT, ncols=2)
        return fig
    heights = [_frame_height(f) for f in frames]
    scale = width / _columns(frames[0].block_size)[-1]  # inches per data unit
    legend_h = 0.5 if legend else 0.0
    fig = Figure(
        figsize=(width, sum(h * scale + 0.45 for h in heights) + legend_h),
        layout="constrained",
    )
    axes = fig.subplots(len(frames), 1, squeeze=False, height_ratios=heights)
    for ax, frame in zip(axes[:, 0], frames, strict=True):
        draw_sharing_frame(ax, frame, fontsize=fontsize)
    if legend:
        handles = sharing_legend_handles(copies=any(f.copies for f in frames))
        figure_legend(fig, handles, fontsize=fontsize - 1, ncols=len(handles))
    return fig


def _columns(size: int, *, phone: bool = False) -> tuple[float, ...]:
    """x of: logical slots, table cell, its width, pool slots, block id, ref count, its width,
    and the right edge (room for the copy arrows). On a phone the pool is under the logical
    slots, its ids and counts left of it, and the right edge leaves room for the arrows' lanes."""
    x_log = 2.4
    x_tab = x_log + size * _SLOT_W + 0.25
    tab_w = 0.9
    if phone:
        return x_log, x_tab, tab_w, x_log, x_log - 0.3, 0.45, 1.35, x_tab + tab_w + 2.0
    x_pool = x_tab + tab_w + 2.3
    x_id = x_pool + size * _SLOT_W + 0.35
    x_ref = x_id + 0.45
    ref_w = 1.35
    return x_log, x_tab, tab_w, x_pool, x_id, x_ref, ref_w, x_ref + ref_w + 1.6


def _frame_height(frame: SharingFrame, *, phone: bool = False) -> float:
    """The height of a drawn frame in data units: its taller side (both, on a phone) and the
    headings."""
    rows = sum(len(s.block_ids) for s in frame.sequences)
    left = rows * _PITCH + _SEQ_GAP * max(0, len(frame.sequences) - 1)
    if phone:
        return left + 0.9 + frame.num_blocks * _PITCH + 1.0
    return max(left, frame.num_blocks * _PITCH) + 1.0
