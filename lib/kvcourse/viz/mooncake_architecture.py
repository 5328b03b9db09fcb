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

from matplotlib.figure import Figure
from matplotlib.patches import Rectangle

from kvcourse._checks import check_positive_int
from kvcourse.viz.mooncake_pieces import (
    DESKTOP_SMALL,
    MOVE,
    MOVE_TEXT,
    MUTED,
    PITCH,
    SMALL,
    arrow,
    box,
    instance_pool,
    kv_pool,
    label,
    step,
)
from kvcourse.viz.phone import PHONE_WIDTH_IN
from kvcourse.viz.style import BLUE, FONT_SIZE, PURPLE, finish_diagram, light_fill

__all__ = ["DECODE_GID", "MAX_INSTANCES", "PREFILL_GID", "mooncake_architecture_figure"]

#: The most instances a pool is drawn with (more would not stay readable).
MAX_INSTANCES = 6
#: The ``gid`` of every prefill instance's box and of every decode instance's box.
PREFILL_GID = "prefill-instance"
DECODE_GID = "decode-instance"

# Data units are inches, so a length here is a length on the page.
_WIDTH = 9.55
_LEFT, _RIGHT = 0.1, 9.4  # the Messenger and the KV pool span the whole width
_POOL_W, _GAP = 3.45, 1.35  # a pool's width; the space between the two pools (step 3)


def _check_instances(name: str, value: object) -> int:
    value = check_positive_int(name, value, f"a number of instances from 1 to {MAX_INSTANCES}")
    if value > MAX_INSTANCES:
        raise ValueError(
            f"{name} must be at most {MAX_INSTANCES} (more instances do not fit the drawing), "
            f"got {value}; pass a number from 1 to {MAX_INSTANCES}"
        )
    return value


def mooncake_architecture_figure(
    *, num_prefill: int = 3, num_decode: int = 3, phone: bool = False
) -> Figure:
    """Mooncake's architecture as one figure: the Conductor on top, ``num_prefill`` prefill and
    ``num_decode`` decode instances (1 to :data:`MAX_INSTANCES` each) below it, the Messenger and
    the distributed KV pool under both, and one request's four steps numbered on its arrows.

    The request is served by the last prefill and the last decode instance, outlined in blue.
    Every instance box carries the ``gid`` :data:`PREFILL_GID` or :data:`DECODE_GID`, so a page
    or a test can find them. ``phone=True`` draws it :data:`~kvcourse.viz.phone.PHONE_WIDTH_IN`
    wide for a phone's column: the decode pool above the prefill pool instead of beside it.
    """
    num_prefill = _check_instances("num_prefill", num_prefill)
    num_decode = _check_instances("num_decode", num_decode)
    rows = max(num_prefill, num_decode)
    row_h, row_gap = (0.42, 0.1) if rows <= 3 else (0.34, 0.08)
    if phone:
        return _phone_figure(num_prefill, num_decode, row_h, row_gap)

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
    box(ax, c_left, cond_y, c_right - c_left, cond_h, fc="#F3F6FA", ec=BLUE, lw=1.6)
    cx, cy = (c_left + c_right) / 2, cond_y + cond_h / 2
    label(ax, cx, cy + 0.15, "Conductor: global scheduler", weight="bold")
    label(
        ax,
        cx,
        cy - 0.17,
        "picks a prefill and a decode instance per request · replicates or swaps hot KV blocks",
        size=DESKTOP_SMALL,
        color=MUTED,
    )
    label(ax, 0.62, cy, "requests")
    arrow(ax, [(1.07, cy), (c_left - 0.02, cy)], color="0.25")

    # The pools; the Conductor's choice points at each.
    def rows_y(n: int) -> list[float]:  # lower edges, top row first, the last at the bottom
        return [pool_y + 0.14 + (n - 1 - i) * (row_h + row_gap) for i in range(n)]

    pool = (row_h, pool_y, pool_h)
    chosen_p = instance_pool(
        ax,
        px,
        ("Prefill pool", "GPU nodes · chunked, pipelined prefill"),
        "prefill",
        rows_y(num_prefill),
        pool,
        PREFILL_GID,
        width=_POOL_W,
        small=DESKTOP_SMALL,
    )
    chosen_d = instance_pool(
        ax,
        dx,
        ("Decode pool", "continuous batch · TBT SLO at admission"),
        "decode",
        rows_y(num_decode),
        pool,
        DECODE_GID,
        width=_POOL_W,
        small=DESKTOP_SMALL,
    )
    for x in (px + _POOL_W - 0.55, dx + _POOL_W - 0.55):
        arrow(ax, [(x, cond_y - 0.02), (x, pool_y + pool_h + 0.02)], color="0.45", ls="--")

    # The Messenger, which every KV move goes through, and the KV pool under it.
    ax.add_patch(
        Rectangle((_LEFT, msg_y), _RIGHT - _LEFT, msg_h, fc=light_fill(PURPLE), ec=MOVE, lw=1.2)
    )
    label(
        ax,
        _RIGHT - 0.15,
        msg_y + msg_h / 2,
        "Messenger: RDMA transfer engine on every node",
        ha="right",
        color=MOVE_TEXT,
    )
    a1 = 2.3  # x of step 1's arrow, over the cached prefix's last block
    dram_top = kv_pool(ax, kv_y, kv_h, a1, right=_RIGHT, small=DESKTOP_SMALL)

    # Steps 1 and 2 between the KV pool and the prefill instance.
    label_y = msg_y + msg_h + 0.25
    a2 = a1 + PITCH
    p_bottom = chosen_p.get_y()
    arrow(ax, [(a1, dram_top + 0.02), (a1, p_bottom - 0.02)], color=MOVE, lw=2.0)
    arrow(ax, [(a2, p_bottom - 0.02), (a2, dram_top + 0.02)], color=MOVE, lw=2.0)
    step(ax, a1, label_y, 1)
    step(ax, a2, label_y, 2)
    label(
        ax,
        a1 - 0.24,
        label_y,
        "reuse the cached prefix,\nfrom any node",
        ha="right",
        size=FONT_SIZE - 0.5,
    )
    label(
        ax,
        a2 + 0.24,
        label_y,
        "prefill the rest,\nwrite its KV back",
        ha="left",
        size=FONT_SIZE - 0.5,
    )

    # Step 3 across to the decode instance, step 4 out of it.
    y3 = p_bottom + row_h / 2
    x3a, x3b = px + _POOL_W - 0.12, dx + 0.12
    arrow(ax, [(x3a + 0.02, y3), (x3b - 0.02, y3)], color=MOVE, lw=2.0)
    step(ax, (x3a + x3b) / 2, y3, 3)
    label(
        ax,
        (x3a + x3b) / 2,
        y3 + 0.5,
        "KV transfer,\nlayer by layer,\nduring prefill",
        size=FONT_SIZE - 0.5,
    )
    y4, x4, top4 = chosen_d.get_y() + row_h / 2, pools_right + 0.38, cy - 0.12
    arrow(ax, [(pools_right - 0.1, y4), (x4, y4), (x4, top4)], color=BLUE, lw=2.0)
    mid4 = (y4 + pool_y + pool_h) / 2
    step(ax, x4, mid4, 4, color=BLUE)
    label(ax, x4 + 0.22, mid4, "decode", ha="left", size=FONT_SIZE - 0.5)
    label(ax, x4, top4 + 0.2, "tokens")
    finish_diagram(ax, (0, _WIDTH), (0, height))
    return fig


def _phone_figure(num_prefill: int, num_decode: int, row_h: float, row_gap: float) -> Figure:
    """The architecture for a phone's column, bottom up: the KV pool, the Messenger, the prefill
    pool (steps 1 and 2 below it), the decode pool (step 3 up the right margin), the Conductor
    (step 4 out past it)."""
    width, left, pool_w = PHONE_WIDTH_IN, 0.4, 3.45
    right = left + pool_w  # the pools' and the Conductor's right edge; the lanes are beyond
    kv_y, kv_h = 0.1, 2.05
    msg_y, msg_h = kv_y + kv_h + 0.2, 0.55

    def pool_h(n: int) -> float:
        return 0.14 + n * row_h + (n - 1) * row_gap + 0.62

    p_y = msg_y + msg_h + 0.85
    d_y = p_y + pool_h(num_prefill) + 0.75
    cond_y, cond_h = d_y + pool_h(num_decode) + 0.55, 0.95
    height = cond_y + cond_h + 0.75
    fig = Figure(figsize=(width, height))
    ax = fig.add_axes((0, 0, 1, 1))

    def rows_y(y: float, n: int) -> list[float]:  # lower edges, top row first
        return [y + 0.14 + (n - 1 - i) * (row_h + row_gap) for i in range(n)]

    titles = (
        ("Prefill pool", "GPU nodes · chunked, pipelined prefill"),
        ("Decode pool", "continuous batch · TBT SLO at admission"),
    )
    chosen_p = instance_pool(
        ax,
        left,
        titles[0],
        "prefill",
        rows_y(p_y, num_prefill),
        (row_h, p_y, pool_h(num_prefill)),
        PREFILL_GID,
        width=pool_w,
    )
    chosen_d = instance_pool(
        ax,
        left,
        titles[1],
        "decode",
        rows_y(d_y, num_decode),
        (row_h, d_y, pool_h(num_decode)),
        DECODE_GID,
        width=pool_w,
    )

    # The Conductor; requests come in from above; its choices point down at each pool.
    box(ax, left, cond_y, pool_w, cond_h, fc="#F3F6FA", ec=BLUE, lw=1.6)
    cx, top = left + pool_w / 2, cond_y + cond_h
    label(ax, cx, cond_y + cond_h - 0.25, "Conductor: global scheduler", weight="bold")
    note = "picks a prefill and a decode instance per\nrequest · replicates or swaps hot KV blocks"
    label(ax, cx, cond_y + 0.3, note, size=SMALL, color=MUTED)
    label(ax, 1.0, top + 0.45, "requests")
    arrow(ax, [(1.0, top + 0.3), (1.0, top + 0.02)], color="0.25")
    d_top = d_y + pool_h(num_decode)
    arrow(ax, [(right - 0.55, cond_y - 0.02), (right - 0.55, d_top + 0.02)], color="0.45", ls="--")
    lane = [
        (left - 0.02, cond_y + 0.2),
        (0.2, cond_y + 0.2),
        (0.2, p_y + pool_h(num_prefill) - 0.2),
    ]
    arrow(ax, [*lane, (left - 0.02, lane[-1][1])], color="0.45", ls="--")

    # The Messenger and the KV pool; steps 1 and 2 between the KV pool and the prefill instance.
    ax.add_patch(
        Rectangle((0.1, msg_y), width - 0.2, msg_h, fc=light_fill(PURPLE), ec=MOVE, lw=1.2)
    )
    label(
        ax,
        0.24,
        msg_y + msg_h / 2,
        "Messenger: RDMA transfer\nengine on every node",
        ha="left",
        color=MOVE_TEXT,
    )
    a1 = 2.85
    a2 = a1 + PITCH
    dram_top = kv_pool(ax, kv_y, kv_h, a1, left=0.1, right=width - 0.1, narrow=True)
    p_bottom, label_y = chosen_p.get_y(), msg_y + msg_h + 0.42
    arrow(ax, [(a1, dram_top + 0.02), (a1, p_bottom - 0.02)], color=MOVE, lw=2.0)
    arrow(ax, [(a2, p_bottom - 0.02), (a2, dram_top + 0.02)], color=MOVE, lw=2.0)
    step(ax, a1, label_y, 1)
    step(ax, a2, label_y, 2)
    label(
        ax,
        a1 - 0.24,
        label_y,
        "reuse the cached\nprefix, from any node",
        ha="right",
        size=FONT_SIZE - 1,
    )
    label(ax, a2 + 0.24, label_y, "prefill the\nrest, write\nits KV back", ha="left", size=SMALL)

    # Step 3 up the right margin into the decode instance; step 4 out of it, past the Conductor.
    yp, yd = p_bottom + row_h / 2, chosen_d.get_y() + row_h / 2
    x3, x4 = right + 0.22, right + 0.52
    arrow(
        ax,
        [(right - 0.1, yp), (x3, yp), (x3, yd - 0.06), (right - 0.1, yd - 0.06)],
        color=MOVE,
        lw=2.0,
    )
    gap3 = p_y + pool_h(num_prefill) + 0.375
    step(ax, x3, gap3, 3)
    label(ax, cx - 0.15, gap3, "KV transfer, layer by layer, during prefill", size=SMALL)
    arrow(ax, [(right - 0.1, yd + 0.06), (x4, yd + 0.06), (x4, top + 0.25)], color=BLUE, lw=2.0)
    mid4 = (d_top + cond_y) / 2
    step(ax, x4, mid4, 4, color=BLUE)
    label(ax, x4 - 0.22, mid4, "decode", ha="right", size=FONT_SIZE - 1)
    label(ax, x4 - 0.1, top + 0.45, "tokens")
    finish_diagram(ax, (0, width), (0, height))
    return fig
