"""Drawings of §4's block tables: a sequence's logical blocks, its block table and the physical
block pool (the vLLM paper's Figure 6), for one step or a whole run.

Everything draws with matplotlib on an ``Axes`` you pass in, or returns a ``Figure`` built
without pyplot (so a loop of frames leaves no open pyplot windows behind and a notebook shows a
figure only when it is displayed or glued).

* :func:`draw_block_table` draws a live :class:`~kvcourse.blocks.table.BlockTable` or its rows,
  :func:`draw_block_table_frame` one frame recorded by
  :func:`~kvcourse.viz.block_table_frames.block_table_frames`;
* :func:`block_table_frames_figure` and :func:`block_table_animation` render the frames of a run
  for a static page (small multiples, or a ``FuncAnimation`` whose ``to_jshtml()`` needs no
  kernel); :mod:`kvcourse.viz.widgets` steps through the same frames in JupyterLab.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from matplotlib.animation import FuncAnimation
from matplotlib.artist import Artist
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.patches import FancyArrowPatch, Patch, Rectangle
from matplotlib.path import Path

from kvcourse._checks import check_positive_int
from kvcourse.blocks.pool import BlockPool
from kvcourse.blocks.table import BlockTable, BlockTableEntry
from kvcourse.viz.block_table_frames import BlockTableFrame, PoolState, check_frames
from kvcourse.viz.phone import phone_figure, phone_font_size
from kvcourse.viz.style import (
    BLUE,
    CHANGED,
    FONT_SIZE,
    OTHERS,
    OURS_EMPTY,
    OURS_FILL,
    center_text,
    figure_legend,
    finish_diagram,
    legend_below,
    new_block_outline,
    slot,
)

__all__ = [
    "BlockTableArtists",
    "block_table_animation",
    "block_table_frames_figure",
    "block_table_legend_handles",
    "draw_block_table",
    "draw_block_table_frame",
]


@dataclass
class BlockTableArtists:
    """What :func:`draw_block_table` put on the axes, for tests and for later restyling."""

    logical_slots: list[Rectangle] = field(default_factory=list)
    physical_slots: list[Rectangle] = field(default_factory=list)
    arrows: list[FancyArrowPatch] = field(default_factory=list)


def block_table_legend_handles() -> list[Patch]:
    """Legend entries for :func:`draw_block_table`'s colours."""
    return [
        Patch(fc=OURS_FILL, ec=BLUE, label="this sequence's token"),
        Patch(fc=OURS_EMPTY, ec=BLUE, hatch="..", label="allocated, still empty"),
        Patch(fc=OTHERS, ec="0.45", hatch="///", label="held by other requests"),
        Patch(fc="white", ec="0.45", label="free"),
        Patch(fc="white", ec=CHANGED, lw=2.2, label="changed in this step"),
    ]


def draw_block_table(
    ax: Axes,
    table_or_entries: BlockTable | Sequence[BlockTableEntry],
    pool: BlockPool | PoolState,
    *,
    tokens: Sequence[str] | None = None,
    title: str | None = None,
    new_tokens: int = 0,
    new_blocks: Iterable[int] = (),
    legend: bool = False,
    fontsize: float = FONT_SIZE,
    phone: bool = False,
) -> BlockTableArtists:
    """Draw one sequence's logical blocks, its block table and the physical pool on ``ax``.

    Left to right: the logical KV blocks (with the token text in each filled slot when ``tokens``
    is given; token ``p`` sits in logical block ``p // B``, slot ``p % B``), the block table
    (physical block id and filled slots per row), arrows from each row to its physical block, and
    the pool's ``num_blocks`` physical blocks, where this sequence's blocks show its tokens, blocks
    used by others are shaded grey and free blocks are white. The last ``new_tokens`` tokens and
    the ``new_blocks`` are outlined in red. Returns the slot rectangles and arrows it drew.

    ``phone=True`` draws it for a phone's column: the pool under the logical blocks and the table,
    each arrow running down the right margin to its block, text at
    :func:`~kvcourse.viz.phone.phone_font_size`.
    """
    entries = _entries(table_or_entries)
    state = PoolState.of(pool) if isinstance(pool, BlockPool) else pool
    if not isinstance(state, PoolState):
        raise TypeError(f"pool must be a BlockPool or a PoolState, got {pool!r}")
    size = state.block_size
    num_tokens = sum(e.filled for e in entries)
    if tokens is not None:
        tokens = [str(t) for t in tokens]
        if len(tokens) != num_tokens:
            raise ValueError(
                f"tokens has {len(tokens)} entries but the block table holds {num_tokens} tokens"
            )
    ours = {e.physical: e for e in entries}
    for e in entries:
        if not 0 <= e.physical < state.num_blocks:
            raise ValueError(
                f"block table row {e.logical} points at block {e.physical}, outside the pool's "
                f"blocks 0..{state.num_blocks - 1}"
            )
    new_blocks = set(new_blocks)
    new_from = num_tokens - new_tokens

    # Geometry in data units (the axes get an equal aspect ratio).
    w, h, gap = 1.6, 0.62, 0.14
    pitch = h + gap
    x_log = 0.55  # logical slots start here; their row numbers sit left of it
    x_tab = x_log + size * w + 0.35  # the block table: physical id, filled
    tab_w = 1.45
    x_phys = x_tab + 2 * tab_w + 1.0  # the pool's slots
    top = 0.0
    n_rows = max(state.num_blocks, len(entries))
    offset = ((state.num_blocks - len(entries)) // 2) * pitch if entries else 0.0
    row_y = [top - offset - i * pitch for i in range(len(entries))]  # top edge of each row
    phys_y = [top - b * pitch for b in range(state.num_blocks)]
    fontsize = phone_font_size(fontsize) if phone else fontsize
    if phone:  # the pool under the table, its block ids on the left like the logical blocks'
        x_phys = x_log
        row_y = [top - i * pitch for i in range(len(entries))]
        pool_top = top - max(len(entries), 1) * pitch - 1.25
        phys_y = [pool_top - b * pitch for b in range(state.num_blocks)]
    x_end = x_phys + size * w

    artists = BlockTableArtists()

    def token_slot(x: float, y: float, position: int, filled: bool) -> Rectangle:
        """A slot of this sequence: its token when filled, dotted while still empty."""
        return slot(
            ax,
            x,
            y,
            w,
            h,
            fill=OURS_FILL if filled else OURS_EMPTY,
            edge=BLUE,
            hatch=None if filled else "..",
            changed=filled and position >= new_from,
            text=("" if tokens is None else tokens[position]) if filled else None,
            fontsize=fontsize,
        )

    # Logical blocks.
    for i, e in enumerate(entries):
        y = row_y[i] - h
        center_text(ax, x_log - 0.28, y + h / 2, str(e.logical), fontsize=fontsize, color="0.3")
        for s in range(size):
            position = e.logical * size + s
            rect = token_slot(x_log + s * w, y, position, s < e.filled)
            artists.logical_slots.append(rect)

    # The block table; a cell is changed when it is the id of a new block, or the filled count of
    # a row this step wrote to.
    for i, e in enumerate(entries):
        y = row_y[i] - h
        changed = (
            e.physical in new_blocks,
            new_tokens > 0 and e.logical * size + e.filled > new_from,
        )
        for c, value in enumerate((e.physical, e.filled)):
            slot(
                ax,
                x_tab + c * tab_w,
                y,
                tab_w,
                h,
                fill="white",
                edge="0.35",
                changed=changed[c],
                text=str(value),
                fontsize=fontsize,
            )

    # The physical pool.
    for b in range(state.num_blocks):
        y = phys_y[b] - h
        entry = ours.get(b)
        taken = b in state.used and entry is None
        for s in range(size):
            x = x_phys + s * w
            if entry is not None:
                rect = token_slot(x, y, entry.logical * size + s, s < entry.filled)
            else:
                fill, hatch = (OTHERS, "///") if taken else ("white", None)
                rect = slot(ax, x, y, w, h, fill=fill, edge="0.45", hatch=hatch)
            artists.physical_slots.append(rect)
        if b in new_blocks:
            new_block_outline(ax, x_phys, y, size * w, h)
        id_x = x_log - 0.28 if phone else x_end + 0.28
        center_text(ax, id_x, y + h / 2, str(b), fontsize=fontsize, color="0.3")

    # Arrows: block-table row → physical block (on a phone, down a lane of the right margin: the
    # deeper the block, the farther out its lane, so that the arrows do not cross at the pool).
    depth = sorted(range(len(entries)), key=lambda i: entries[i].physical)
    for i, e in enumerate(entries):
        start = (x_tab + 2 * tab_w, row_y[i] - h / 2)
        end = (x_end if phone else x_phys, phys_y[e.physical] - h / 2)
        path = None
        if phone:
            lane = start[0] + 0.35 + 0.3 * depth.index(i)
            path = Path(
                [start, (lane, start[1]), (lane, end[1]), end], [Path.MOVETO] + [Path.LINETO] * 3
            )
        arrow = FancyArrowPatch(
            *(() if phone else (start, end)),
            path=path,
            arrowstyle="-|>",
            mutation_scale=13,
            lw=1.5,
            color=CHANGED if e.physical in new_blocks else BLUE,
            shrinkA=1,
            shrinkB=1,
            zorder=4,
        )
        ax.add_patch(arrow)
        artists.arrows.append(arrow)

    # Column headings.
    head_y = top + 0.55
    sub_kw = {"ha": "center", "va": "bottom", "fontsize": fontsize, "color": "0.3"}
    ax.text(x_log + size * w / 2, head_y, "logical KV blocks", weight="bold", **sub_kw)
    ax.text(x_tab + tab_w, head_y + 0.42, "block table", weight="bold", **sub_kw)
    ax.text(x_tab + tab_w / 2, head_y - 0.05, "physical", **sub_kw)
    ax.text(x_tab + 1.5 * tab_w, head_y - 0.05, "filled", **sub_kw)
    pool_head = phys_y[0] + 0.55 if phone else head_y
    ax.text(x_phys + size * w / 2, pool_head, "physical KV blocks", weight="bold", **sub_kw)
    if not entries:
        center_text(
            ax, x_log + size * w / 2, top - h / 2, "(no blocks yet)", fontsize=fontsize, color="0.4"
        )

    if phone:
        right = x_tab + 2 * tab_w + 0.55 + 0.3 * len(entries)
        finish_diagram(ax, (0.0, right), (phys_y[-1] - pitch - 0.05, head_y + 0.95))
    else:
        finish_diagram(ax, (0.0, x_end + 0.55), (top - n_rows * pitch - 0.05, head_y + 0.95))
    if title:
        ax.set_title(title, fontsize=fontsize + 1, loc="left", pad=4)
    if legend and phone:
        figure_legend(ax.figure, block_table_legend_handles(), fontsize=fontsize, ncols=2)
    elif legend:
        legend_below(ax, block_table_legend_handles(), fontsize=fontsize)
    return artists


def draw_block_table_frame(
    ax: Axes,
    frame: BlockTableFrame,
    *,
    legend: bool = False,
    fontsize: float = FONT_SIZE,
    phone: bool = False,
) -> BlockTableArtists:
    """:func:`draw_block_table` for one recorded frame, titled with the frame's label."""
    return draw_block_table(
        ax,
        frame.entries,
        frame.pool,
        tokens=frame.tokens,
        title=frame.label,
        new_tokens=frame.new_tokens,
        new_blocks=frame.new_blocks,
        legend=legend,
        fontsize=fontsize,
        phone=phone,
    )


def block_table_frames_figure(
    frames: Sequence[BlockTableFrame],
    *,
    ncols: int = 1,
    panel_size: tuple[float, float] = (8.0, 3.5),
    fontsize: float = FONT_SIZE,
    phone: bool = False,
) -> Figure:
    """All frames as small multiples, ``ncols`` per row, with one legend at the bottom: the static
    stand-in for a stepper on a rendered page. ``phone=True`` draws them one under the other for a
    phone's column (``ncols`` and ``panel_size`` do not apply)."""
    frames = check_frames(frames)
    if phone:
        fig = phone_figure(4.7 * len(frames))  # about their height: fit_height finishes
        axes = fig.subplots(len(frames), 1, squeeze=False)
        for ax, frame in zip(axes.flat, frames, strict=True):
            draw_block_table_frame(ax, frame, fontsize=fontsize, phone=True)
        small = phone_font_size(fontsize)
        figure_legend(fig, block_table_legend_handles(), fontsize=small, ncols=2)
        return fig
    ncols = min(check_positive_int("ncols", ncols), len(frames))
    nrows = math.ceil(len(frames) / ncols)
    legend_h = 0.6
    fig = Figure(
        figsize=(panel_size[0] * ncols, panel_size[1] * nrows + legend_h), layout="constrained"
    )
    axes = fig.subplots(nrows, ncols, squeeze=False)
    for ax, frame in zip(axes.flat, frames, strict=False):
        draw_block_table_frame(ax, frame, fontsize=fontsize)
    for ax in list(axes.flat)[len(frames) :]:
        ax.axis("off")
    figure_legend(fig, block_table_legend_handles(), fontsize=fontsize)
    return fig


def block_table_animation(
    frames: Sequence[BlockTableFrame],
    *,
    figsize: tuple[float, float] = (8.0, 3.6),
    interval_ms: int = 1500,
    fontsize: float = FONT_SIZE,
) -> FuncAnimation:
    """The frames as a matplotlib animation, one frame per step. ``.to_jshtml()`` turns it into a
    self-contained HTML player (play, pause, step) that works on a static page."""
    frames = check_frames(frames)
    fig = Figure(figsize=figsize, layout="constrained")
    ax = fig.add_subplot()

    def update(i: int) -> list[Artist]:
        ax.clear()
        draw_block_table_frame(ax, frames[i], legend=True, fontsize=fontsize)
        return []

    update(0)
    return FuncAnimation(fig, update, frames=len(frames), interval=interval_ms, blit=False)


def _entries(table_or_entries: object) -> list[BlockTableEntry]:
    if isinstance(table_or_entries, BlockTable):
        return table_or_entries.entries()
    if isinstance(table_or_entries, (str, bytes)) or not isinstance(table_or_entries, Sequence):
        raise TypeError(
            f"expected a BlockTable or a list of BlockTableEntry, got {table_or_entries!r}"
        )
    entries = list(table_or_entries)
    if not all(isinstance(e, BlockTableEntry) for e in entries):
        raise TypeError("the entries must be BlockTableEntry rows (BlockTable.entries())")
    return entries
