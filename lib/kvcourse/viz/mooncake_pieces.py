"""The pieces §9.2's map of a Mooncake cluster is drawn from
(:mod:`kvcourse.viz.mooncake_architecture` lays them out, for the desktop or a phone): a pool of
instances, the distributed KV pool with the request's chain of blocks, labels, boxes, arrows along
polylines and the numbered steps. Lengths are in inches, so a length here is a length on the page.
"""

from __future__ import annotations

from matplotlib.axes import Axes
from matplotlib.patches import Circle, FancyArrowPatch, FancyBboxPatch, Rectangle
from matplotlib.path import Path
from matplotlib.text import Text

from kvcourse.blocks.hashing import chained_block_hashes, short_hash
from kvcourse.viz.style import (
    BLUE,
    CHANGED,
    FONT_SIZE,
    OTHERS,
    OURS_EMPTY,
    OURS_FILL,
    PURPLE,
    SHARED,
    TEAL,
    light_fill,
)

__all__ = [
    "BLOCK_H",
    "BLOCK_W",
    "PITCH",
    "MOVE",
    "MOVE_TEXT",
    "MUTED",
    "DESKTOP_SMALL",
    "SMALL",
    "arrow",
    "box",
    "instance_pool",
    "kv_pool",
    "label",
    "step",
]

PITCH, BLOCK_W, BLOCK_H = 0.62, 0.5, 0.32  # a KV-pool block and its spacing
_CELL, _CELL_STEP = 0.2, 0.27  # a block (or a request) drawn inside an instance
#: The Messenger and every KV move it makes, and their text.
MOVE, MOVE_TEXT = PURPLE, "#6E3F63"
#: Secondary text.
MUTED = "0.35"
#: The size of notes; never under 9 pt. The desktop drawing, shown narrower than it is drawn in
#: the book's column, takes :data:`DESKTOP_SMALL` so its notes stay above 10 px there.
SMALL = FONT_SIZE - 1.5
DESKTOP_SMALL = FONT_SIZE - 0.5
_CHAIN_TOKENS = list(range(100, 120))  # the request's prompt: 5 blocks of 4 tokens


def instance_pool(
    ax: Axes,
    x: float,
    titles: tuple[str, str],
    kind: str,
    ys: list[float],
    geometry: tuple[float, float, float],
    gid: str,
    *,
    width: float = 3.3,
    small: float = SMALL,
) -> Rectangle:
    """One pool ``width`` wide at ``x`` and its instances, one row at each of ``ys`` (``kind``
    "prefill" shows KV blocks, "decode" a batch of requests); ``geometry`` is the row height, the
    pool's lower edge and its height; ``small`` is the size of its notes. Returns the last (the
    chosen) instance's box."""
    row_h, pool_y, pool_h = geometry
    box(ax, x, pool_y, width, pool_h, fc="#F7F7F7", ec="0.4", lw=1.2)
    top = pool_y + pool_h
    label(ax, x + 0.14, top - 0.2, titles[0], ha="left", weight="bold")
    label(ax, x + 0.14, top - 0.45, titles[1], ha="left", size=small, color=MUTED)
    boxes = []
    for i, y in enumerate(ys):
        ours = i == len(ys) - 1
        row = Rectangle(
            (x + 0.12, y),
            width - 0.24,
            row_h,
            fc=OURS_EMPTY if ours else "white",
            ec=BLUE if ours else "0.55",
            lw=2.0 if ours else 1.0,
            gid=gid,
        )
        ax.add_patch(row)
        boxes.append(row)
        label(
            ax,
            x + 0.26,
            y + row_h / 2,
            f"{kind} {i + 1}",
            ha="left",
            size=FONT_SIZE - 0.5,
            weight="bold" if ours else "normal",
        )
        cells_x, yc = x + 1.2, y + row_h / 2
        if kind == "prefill":
            _kv_cells(ax, cells_x, yc, i, ours)
        else:
            _batch_dots(ax, cells_x, yc, i, ours)
    return boxes[-1]


def _kv_cells(ax: Axes, x: float, yc: float, i: int, ours: bool) -> None:
    """A prefill instance's KV blocks in HBM: ours are the cached prefix and the new blocks."""
    used = (3 + i) % 4 + 3
    for k in range(7):
        if ours:
            fc, ec, lw = (SHARED, "0.3", 0.8) if k < 3 else (OURS_FILL, CHANGED, 1.6)
            fc, ec, lw = ("white", "0.6", 0.8) if k >= 5 else (fc, ec, lw)
        else:
            fc, ec, lw = (OTHERS, "0.45", 0.8) if k < used else ("white", "0.6", 0.8)
        ax.add_patch(
            Rectangle((x + k * _CELL_STEP, yc - _CELL / 2), _CELL, _CELL, fc=fc, ec=ec, lw=lw)
        )


def _batch_dots(ax: Axes, x: float, yc: float, i: int, ours: bool) -> None:
    """A decode instance's continuous batch, one dot per request; ours has just joined."""
    size = 4 if ours else (2 + i) % 4 + 3
    for k in range(7):
        fc, ec = (OTHERS, "0.45") if k < size else ("white", "0.6")
        fc, ec = (BLUE, BLUE) if ours and k == size else (fc, ec)
        ax.add_patch(Circle((x + k * _CELL_STEP + _CELL / 2, yc), _CELL / 2, fc=fc, ec=ec, lw=0.8))


def kv_pool(
    ax: Axes,
    y: float,
    h: float,
    a1: float,
    *,
    left: float = 0.1,
    right: float = 9.5,
    narrow: bool = False,
    small: float = SMALL,
) -> float:
    """The distributed KV pool from ``left`` to ``right``, ``h`` high at ``y``: its DRAM and SSD
    tiers, the request's chain (3 cached blocks, 2 new) with its 3rd block at ``a1``. ``narrow``
    puts the note under the title, in two lines; ``small`` is the size of its notes. Returns the
    top of the DRAM row."""
    ax.add_patch(Rectangle((left, y), right - left, h, fc=light_fill(TEAL), ec=TEAL, lw=1.4))
    label(ax, left + 0.14, y + h - 0.22, "Distributed KV pool", ha="left", weight="bold")
    note = "idle CPU DRAM and SSD of every node · blocks named by chained hashes"
    if narrow:
        note = note.replace(" · ", ",\n")
    label(
        ax,
        left + 0.14 if narrow else right - 0.15,
        y + h - (0.62 if narrow else 0.22),
        note,
        ha="left" if narrow else "right",
        size=small,
        color=MUTED,
    )
    hashes = [short_hash(b, 4) for b in chained_block_hashes(_CHAIN_TOKENS, 4)]
    dram, ssd = y + 0.78, y + 0.24
    first = a1 - 2 * PITCH - BLOCK_W / 2
    for name, ty in (("DRAM", dram), ("SSD", ssd)):
        label(ax, left + 0.14, ty + BLOCK_H / 2, name, ha="left", size=small, color=MUTED)
    for k in range(int((right - 0.1 - BLOCK_W - first) // PITCH) + 1):
        x = first + k * PITCH
        if k < len(hashes):
            cached = k < 3
            fc, ec, lw = (SHARED, "0.3", 1.0) if cached else (OURS_FILL, CHANGED, 2.0)
        else:
            free = k % 4 == 3
            fc, ec, lw = ("white", "0.6", 0.8) if free else (OTHERS, "0.5", 0.8)
        ax.add_patch(Rectangle((x, dram), BLOCK_W, BLOCK_H, fc=fc, ec=ec, lw=lw))
        if k < len(hashes):
            label(
                ax,
                x + BLOCK_W / 2,
                dram + BLOCK_H / 2,
                hashes[k],
                size=small,
                family="monospace",
            )
        if 0 < k < len(hashes):  # the chain: each hash covers its parent's
            yc = dram + BLOCK_H / 2
            arrow(ax, [(x - PITCH + BLOCK_W, yc), (x, yc)], color="0.3", lw=0.8, scale=7)
        cold = k % 3 != 1
        ax.add_patch(
            Rectangle(
                (x, ssd),
                BLOCK_W,
                BLOCK_H,
                fc=OTHERS if cold else "white",
                ec="0.5" if cold else "0.6",
                lw=0.8,
            )
        )
    return dram + BLOCK_H


def label(
    ax: Axes,
    x: float,
    y: float,
    s: str,
    *,
    ha: str = "center",
    size: float = FONT_SIZE,
    **kwargs: object,
) -> Text:
    """A text centred vertically on ``(x, y)``, in the drawing's line spacing."""
    return ax.text(x, y, s, ha=ha, va="center", fontsize=size, linespacing=1.15, **kwargs)


def box(ax: Axes, x: float, y: float, w: float, h: float, *, fc: str, ec: str, lw: float) -> None:
    """A box with rounded corners, lower left at ``(x, y)``."""
    style = "round,pad=0,rounding_size=0.1"
    ax.add_patch(FancyBboxPatch((x, y), w, h, boxstyle=style, fc=fc, ec=ec, lw=lw))


def arrow(
    ax: Axes,
    points: list[tuple[float, float]],
    *,
    color: str,
    lw: float = 1.5,
    ls: str = "-",
    scale: float = 14,
) -> None:
    """An arrow along a polyline through ``points``, head at the last point, over the boxes."""
    path = Path(points, [Path.MOVETO] + [Path.LINETO] * (len(points) - 1))
    ax.add_patch(
        FancyArrowPatch(
            path=path, arrowstyle="-|>", mutation_scale=scale, lw=lw, color=color, ls=ls, zorder=3
        )
    )


def step(ax: Axes, x: float, y: float, number: int, *, color: str = MOVE) -> Text:
    """A step's number in a filled circle, over its arrow."""
    ring = {"boxstyle": "circle,pad=0.25", "fc": color, "ec": "white", "lw": 1.2}
    return label(
        ax,
        x,
        y,
        str(number),
        size=FONT_SIZE - 0.5,
        weight="bold",
        color="white",
        zorder=5,
        bbox=ring,
    )
