"""The map of a Mooncake cluster (§9.2; Figs. 1 and 4 of the Mooncake paper's arXiv v5, which the
lecture follows, Figs. 2 and 3 of its FAST '25 version): disaggregated prefill and decode pools
over a distributed KV pool, with the four steps of one request numbered.

The drawing, top to bottom: the Conductor, the global scheduler that receives every request,
picks a prefill instance and a decode instance for it and decides which KV blocks to replicate
or swap; the prefill pool and the decode pool, GPU nodes each with its own KV cache in HBM (a
decode instance runs a continuous batch); the Messenger, the RDMA transfer engine on every node
that moves KV blocks; and the distributed KV pool, built from the nodes' otherwise idle CPU DRAM
and SSD, whose blocks are named by chained hashes (:mod:`kvcourse.blocks.hashing`).

The request's path is numbered on its arrows: (1) reuse: the cached prefix is loaded from the
pool (maybe from another node) into the chosen prefill instance; (2) incremental prefill of the
rest, its new KV written back to the pool; (3) the KV sent to the decode instance layer by layer,
overlapped with the prefill; (4) decode in the continuous batch, the tokens going out. Colours
follow §8: the cached prefix is shaded as shared, the new blocks are outlined as changed, other
requests' blocks are grey.
"""

from __future__ import annotations

from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.patches import Circle, FancyArrowPatch, FancyBboxPatch, Rectangle
from matplotlib.path import Path
from matplotlib.text import Text

from kvcourse._checks import check_positive_int
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
    finish_diagram,
    light_fill,
)

__all__ = ["DECODE_GID", "MAX_INSTANCES", "PREFILL_GID", "mooncake_architecture_figure"]

#: The most instances a pool is drawn with (more would not stay readable).
MAX_INSTANCES = 6
#: The ``gid`` of every prefill instance's box and of every decode instance's box.
PREFILL_GID = "prefill-instance"
DECODE_GID = "decode-instance"

# Data units are inches, so a length here is a length on the page.
_WIDTH = 9.6
_LEFT, _RIGHT = 0.1, 9.5  # the Messenger and the KV pool span the whole width
_POOL_W, _GAP = 3.3, 1.6  # a pool's width; the space between the two pools (step 3)
_PITCH, _BLOCK_W, _BLOCK_H = 0.62, 0.5, 0.32  # a KV-pool block and its spacing
_CELL, _CELL_STEP = 0.2, 0.27  # a block (or a request) drawn inside an instance
_MOVE = PURPLE  # the Messenger and every KV move it makes
_MOVE_TEXT = "#6E3F63"
_MUTED = "0.35"
_SMALL = FONT_SIZE - 1.5  # notes; never under 9 pt
_CHAIN_TOKENS = list(range(100, 120))  # the request's prompt: 5 blocks of 4 tokens


def _check_instances(name: str, value: object) -> int:
    value = check_positive_int(name, value, f"a number of instances from 1 to {MAX_INSTANCES}")
    if value > MAX_INSTANCES:
        raise ValueError(
            f"{name} must be at most {MAX_INSTANCES} (more instances do not fit the drawing), "
            f"got {value}; pass a number from 1 to {MAX_INSTANCES}"
        )
    return value


def mooncake_architecture_figure(*, num_prefill: int = 3, num_decode: int = 3) -> Figure:
    """Mooncake's architecture as one figure: the Conductor on top, ``num_prefill`` prefill and
    ``num_decode`` decode instances (1 to :data:`MAX_INSTANCES` each) below it, the Messenger and
    the distributed KV pool under both, and one request's four steps numbered on its arrows.

    The request is served by the last prefill and the last decode instance, outlined in blue.
    Every instance box carries the ``gid`` :data:`PREFILL_GID` or :data:`DECODE_GID`, so a page
    or a test can find them.
    """
    num_prefill = _check_instances("num_prefill", num_prefill)
    num_decode = _check_instances("num_decode", num_decode)
    rows = max(num_prefill, num_decode)
    row_h, row_gap = (0.42, 0.1) if rows <= 3 else (0.34, 0.08)

    # Heights from the bottom up: KV pool, Messenger, steps 1-2's labels, pools, Conductor.
    kv_y, kv_h = 0.1, 1.42
    msg_y, msg_h = kv_y + kv_h + 0.2, 0.36
    pool_y = msg_y + msg_h + 0.5
    pool_h = 0.14 + rows * row_h + (rows - 1) * row_gap + 0.62
    cond_y, cond_h = pool_y + pool_h + 0.42, 0.78
    height = cond_y + cond_h + 0.1
    fig = Figure(figsize=(_WIDTH, height))
    ax = fig.add_axes((0, 0, 1, 1))
    px, dx = _LEFT, _LEFT + _POOL_W + _GAP  # left edges of the two pools
    pools_right = dx + _POOL_W

    # The Conductor; requests come in from the left.
    c_left, c_right = 1.45, pools_right - 0.1
    _box(ax, c_left, cond_y, c_right - c_left, cond_h, fc="#F3F6FA", ec=BLUE, lw=1.6)
    cx, cy = (c_left + c_right) / 2, cond_y + cond_h / 2
    _text(ax, cx, cy + 0.15, "Conductor: global scheduler", weight="bold")
    _text(
        ax,
        cx,
        cy - 0.17,
        "picks a prefill and a decode instance per request · replicates or swaps hot KV blocks",
        size=_SMALL,
        color=_MUTED,
    )
    _text(ax, 0.62, cy, "requests")
    _arrow(ax, [(1.07, cy), (c_left - 0.02, cy)], color="0.25")

    # The pools; the Conductor's choice points at each.
    def rows_y(n: int) -> list[float]:  # lower edges, top row first, the last at the bottom
        return [pool_y + 0.14 + (n - 1 - i) * (row_h + row_gap) for i in range(n)]

    pool = (row_h, pool_y, pool_h)
    chosen_p = _pool(
        ax,
        px,
        ("Prefill pool", "GPU nodes · chunked, pipelined prefill"),
        "prefill",
        rows_y(num_prefill),
        pool,
        PREFILL_GID,
    )
    chosen_d = _pool(
        ax,
        dx,
        ("Decode pool", "continuous batch · TBT SLO at admission"),
        "decode",
        rows_y(num_decode),
        pool,
        DECODE_GID,
    )
    for x in (px + _POOL_W - 0.55, dx + _POOL_W - 0.55):
        _arrow(ax, [(x, cond_y - 0.02), (x, pool_y + pool_h + 0.02)], color="0.45", ls="--")

    # The Messenger, which every KV move goes through, and the KV pool under it.
    ax.add_patch(
        Rectangle((_LEFT, msg_y), _RIGHT - _LEFT, msg_h, fc=light_fill(PURPLE), ec=_MOVE, lw=1.2)
    )
    _text(
        ax,
        _RIGHT - 0.15,
        msg_y + msg_h / 2,
        "Messenger: RDMA transfer engine on every node",
        ha="right",
        color=_MOVE_TEXT,
    )
    a1 = 2.3  # x of step 1's arrow, over the cached prefix's last block
    dram_top = _kv_pool(ax, kv_y, kv_h, a1)

    # Steps 1 and 2 between the KV pool and the prefill instance.
    label_y = msg_y + msg_h + 0.25
    a2 = a1 + _PITCH
    p_bottom = chosen_p.get_y()
    _arrow(ax, [(a1, dram_top + 0.02), (a1, p_bottom - 0.02)], color=_MOVE, lw=2.0)
    _arrow(ax, [(a2, p_bottom - 0.02), (a2, dram_top + 0.02)], color=_MOVE, lw=2.0)
    _step(ax, a1, label_y, 1)
    _step(ax, a2, label_y, 2)
    _text(
        ax,
        a1 - 0.24,
        label_y,
        "reuse the cached prefix,\nfrom any node",
        ha="right",
        size=FONT_SIZE - 1,
    )
    _text(
        ax,
        a2 + 0.24,
        label_y,
        "prefill the rest,\nwrite its KV back",
        ha="left",
        size=FONT_SIZE - 1,
    )

    # Step 3 across to the decode instance, step 4 out of it.
    y3 = p_bottom + row_h / 2
    x3a, x3b = px + _POOL_W - 0.12, dx + 0.12
    _arrow(ax, [(x3a + 0.02, y3), (x3b - 0.02, y3)], color=_MOVE, lw=2.0)
    _step(ax, (x3a + x3b) / 2, y3, 3)
    _text(
        ax,
        (x3a + x3b) / 2,
        y3 + 0.5,
        "KV transfer,\nlayer by layer,\nduring prefill",
        size=FONT_SIZE - 1,
    )
    y4, x4, top4 = chosen_d.get_y() + row_h / 2, pools_right + 0.42, cy - 0.12
    _arrow(ax, [(pools_right - 0.1, y4), (x4, y4), (x4, top4)], color=BLUE, lw=2.0)
    mid4 = (y4 + pool_y + pool_h) / 2
    _step(ax, x4, mid4, 4, color=BLUE)
    _text(ax, x4 + 0.22, mid4, "decode", ha="left", size=FONT_SIZE - 1)
    _text(ax, x4, top4 + 0.2, "tokens")
    finish_diagram(ax, (0, _WIDTH), (0, height))
    return fig


def _pool(
    ax: Axes,
    x: float,
    titles: tuple[str, str],
    kind: str,
    ys: list[float],
    geometry: tuple[float, float, float],
    gid: str,
) -> Rectangle:
    # One pool and its instances, one row each; returns the last (the chosen) instance's box.
    row_h, pool_y, pool_h = geometry
    _box(ax, x, pool_y, _POOL_W, pool_h, fc="#F7F7F7", ec="0.4", lw=1.2)
    top = pool_y + pool_h
    _text(ax, x + 0.14, top - 0.2, titles[0], ha="left", weight="bold")
    _text(ax, x + 0.14, top - 0.45, titles[1], ha="left", size=_SMALL, color=_MUTED)
    boxes = []
    for i, y in enumerate(ys):
        ours = i == len(ys) - 1
        box = Rectangle(
            (x + 0.12, y),
            _POOL_W - 0.24,
            row_h,
            fc=OURS_EMPTY if ours else "white",
            ec=BLUE if ours else "0.55",
            lw=2.0 if ours else 1.0,
            gid=gid,
        )
        ax.add_patch(box)
        boxes.append(box)
        _text(
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
    # A prefill instance's KV blocks in HBM: ours are the cached prefix and the new blocks.
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
    # A decode instance's continuous batch, one dot per request; ours has just joined.
    size = 4 if ours else (2 + i) % 4 + 3
    for k in range(7):
        fc, ec = (OTHERS, "0.45") if k < size else ("white", "0.6")
        fc, ec = (BLUE, BLUE) if ours and k == size else (fc, ec)
        ax.add_patch(Circle((x + k * _CELL_STEP + _CELL / 2, yc), _CELL / 2, fc=fc, ec=ec, lw=0.8))


def _kv_pool(ax: Axes, y: float, h: float, a1: float) -> float:
    # The DRAM and SSD tiers; the request's chain (3 cached blocks, 2 new) has its 3rd block at
    # a1. Returns the top of the DRAM row.
    ax.add_patch(Rectangle((_LEFT, y), _RIGHT - _LEFT, h, fc=light_fill(TEAL), ec=TEAL, lw=1.4))
    _text(ax, _LEFT + 0.14, y + h - 0.22, "Distributed KV pool", ha="left", weight="bold")
    _text(
        ax,
        _RIGHT - 0.15,
        y + h - 0.22,
        "idle CPU DRAM and SSD of every node · blocks named by chained hashes",
        ha="right",
        size=_SMALL,
        color=_MUTED,
    )
    hashes = [short_hash(b, 4) for b in chained_block_hashes(_CHAIN_TOKENS, 4)]
    dram, ssd = y + 0.78, y + 0.24
    first = a1 - 2 * _PITCH - _BLOCK_W / 2
    for name, ty in (("DRAM", dram), ("SSD", ssd)):
        _text(ax, _LEFT + 0.14, ty + _BLOCK_H / 2, name, ha="left", size=_SMALL, color=_MUTED)
    for k in range(int((_RIGHT - 0.1 - _BLOCK_W - first) // _PITCH) + 1):
        x = first + k * _PITCH
        if k < len(hashes):
            cached = k < 3
            fc, ec, lw = (SHARED, "0.3", 1.0) if cached else (OURS_FILL, CHANGED, 2.0)
        else:
            free = k % 4 == 3
            fc, ec, lw = ("white", "0.6", 0.8) if free else (OTHERS, "0.5", 0.8)
        ax.add_patch(Rectangle((x, dram), _BLOCK_W, _BLOCK_H, fc=fc, ec=ec, lw=lw))
        if k < len(hashes):
            _text(
                ax,
                x + _BLOCK_W / 2,
                dram + _BLOCK_H / 2,
                hashes[k],
                size=FONT_SIZE - 2,
                family="monospace",
            )
        if 0 < k < len(hashes):  # the chain: each hash covers its parent's
            yc = dram + _BLOCK_H / 2
            _arrow(ax, [(x - _PITCH + _BLOCK_W, yc), (x, yc)], color="0.3", lw=0.8, scale=7)
        cold = k % 3 != 1
        ax.add_patch(
            Rectangle(
                (x, ssd),
                _BLOCK_W,
                _BLOCK_H,
                fc=OTHERS if cold else "white",
                ec="0.5" if cold else "0.6",
                lw=0.8,
            )
        )
    return dram + _BLOCK_H


def _text(
    ax: Axes,
    x: float,
    y: float,
    s: str,
    *,
    ha: str = "center",
    size: float = FONT_SIZE,
    **kwargs: object,
) -> Text:
    return ax.text(x, y, s, ha=ha, va="center", fontsize=size, linespacing=1.15, **kwargs)


def _box(ax: Axes, x: float, y: float, w: float, h: float, *, fc: str, ec: str, lw: float) -> None:
    style = "round,pad=0,rounding_size=0.1"
    ax.add_patch(FancyBboxPatch((x, y), w, h, boxstyle=style, fc=fc, ec=ec, lw=lw))


def _arrow(
    ax: Axes,
    points: list[tuple[float, float]],
    *,
    color: str,
    lw: float = 1.5,
    ls: str = "-",
    scale: float = 14,
) -> None:
    # An arrow along a polyline, head at the last point, drawn over the boxes.
    path = Path(points, [Path.MOVETO] + [Path.LINETO] * (len(points) - 1))
    ax.add_patch(
        FancyArrowPatch(
            path=path, arrowstyle="-|>", mutation_scale=scale, lw=lw, color=color, ls=ls, zorder=3
        )
    )


def _step(ax: Axes, x: float, y: float, number: int, *, color: str = _MOVE) -> Text:
    # A step's number in a filled circle, over its arrow.
    ring = {"boxstyle": "circle,pad=0.25", "fc": color, "ec": "white", "lw": 1.2}
    return _text(
        ax, x, y, str(number), size=FONT_SIZE - 1, weight="bold", color="white", zorder=5, bbox=ring
    )
