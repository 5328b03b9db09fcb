"""Drawings of §2's toy virtual memory: page tables pointing into the physical frames (one address
translated is :mod:`kvcourse.viz.address_translation`).

* :func:`draw_page_tables` draws one or two page tables (left and right) with an arrow from
  each resident page to its frame, and between them the physical frames, each labelled with the
  processes that use it and, when shared, its reference count.

The colours are the book's (:mod:`kvcourse.viz.style`): each process in its own colour, a frame
listed by more than one page table yellow like §5's shared blocks, another process's frame grey,
and the row a translation used outlined in red. The functions draw on an ``Axes`` you pass in.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from matplotlib.axes import Axes
from matplotlib.patches import FancyArrowPatch, Patch, Rectangle
from matplotlib.path import Path
from matplotlib.text import Text

from kvcourse.os_paging import AddressSpace, PhysicalMemory
from kvcourse.viz.phone import PHONE_MIN_FONT_PT
from kvcourse.viz.style import (
    FONT_SIZE,
    FREE_EDGE,
    OTHERS,
    SEQUENCE_COLORS,
    SHARED,
    center_text,
    figure_legend,
    finish_diagram,
    legend_below,
    light_fill,
    slot,
)

__all__ = [
    "PageTableArtists",
    "draw_page_tables",
    "page_table_legend_handles",
]


@dataclass
class PageTableArtists:
    """What a drawing put on the axes, for tests and for restyling: the page-table rows (per
    process), the frames, the arrows and the labels."""

    rows: dict[str, list[Rectangle]] = field(default_factory=dict)
    frames: list[Rectangle] = field(default_factory=list)
    arrows: list[FancyArrowPatch] = field(default_factory=list)
    texts: list[Text] = field(default_factory=list)


def process_colors(processes: Sequence[AddressSpace]) -> dict[str, str]:
    """One colour per process name, from :data:`~kvcourse.viz.style.SEQUENCE_COLORS` in order."""
    names = list(dict.fromkeys(p.name for p in processes))
    return {n: SEQUENCE_COLORS[i % len(SEQUENCE_COLORS)] for i, n in enumerate(names)}


def page_table_legend_handles(
    *, shared: bool = True, cow: bool = True, others: bool = True, free: bool = True
) -> list[Patch]:
    """Legend entries for :func:`draw_page_tables`, leaving out the kinds a drawing lacks."""
    entries = [
        (shared, Patch(fc=SHARED, ec="0.35", label="frame in two page tables")),
        (cow, Patch(fc="white", ec="0.35", hatch="//", label="copy-on-write entry")),
        (others, Patch(fc=OTHERS, ec="0.35", label="another process's frame")),
        (free, Patch(fc="white", ec=FREE_EDGE, label="free frame")),
    ]
    return [patch for wanted, patch in entries if wanted]


def _arrow(
    ax: Axes, points: Sequence[tuple[float, float]], color: str, lw: float = 1.6
) -> FancyArrowPatch:
    """An arrow along a polyline through ``points`` (data units), head at the last point."""
    codes = [Path.MOVETO] + [Path.LINETO] * (len(points) - 1)
    arrow = FancyArrowPatch(
        path=Path(points, codes),
        arrowstyle="-|>",
        mutation_scale=14,
        color=color,
        lw=lw,
        zorder=4,
    )
    ax.add_patch(arrow)
    return arrow


def _check_processes(processes: Sequence[AddressSpace], memory: PhysicalMemory) -> None:
    for p in processes:
        if not isinstance(p, AddressSpace):
            raise TypeError(f"expected AddressSpace processes, got {p!r}")
        if p.memory is not memory:
            raise ValueError(f"process {p.name!r} lives in another PhysicalMemory")


def draw_page_tables(
    ax: Axes,
    shown: Sequence[AddressSpace],
    *,
    others: Sequence[AddressSpace] = (),
    colors: Mapping[str, str] | None = None,
    legend: bool = True,
    fontsize: float = FONT_SIZE,
    phone: bool = False,
) -> PageTableArtists:
    """Draw the page tables of ``shown`` (one or two processes of the same memory) and the
    physical frames between them.

    The first table stands left of the frames, the second right. Each row is one virtual page:
    resident pages are filled in the process's colour (hatched while copy-on-write) and point at
    their frame; unmapped ones say so. Each frame is labelled with the processes that map it,
    among ``shown`` and ``others`` (processes whose frames are named but whose tables are left
    out), and with its reference count when shared. ``colors`` maps names to colours (default:
    :func:`process_colors` of ``shown`` then ``others``). ``phone=True`` draws them for a phone's
    column (:func:`~kvcourse.viz.phone.phone_figure`): wider boxes, shorter arrows, the legend
    the figure's.
    """
    shown, others = list(shown), list(others)
    if not 1 <= len(shown) <= 2:
        raise ValueError(f"draw one or two page tables, got {len(shown)}")
    memory = shown[0].memory
    _check_processes(shown + others, memory)
    palette = dict(process_colors(shown + others))
    palette.update(colors or {})
    users: dict[int, list[str]] = {f: [] for f in range(memory.num_frames)}
    for p in shown + others:
        for entry in p.page_table.values():
            users[entry.frame].append(p.name)
    shown_names = {p.name for p in shown}

    cell_h, table_w, frame_w, gap = (0.8, 3.7, 3.7, 0.9) if phone else (0.8, 3.0, 3.4, 2.0)
    fontsize = PHONE_MIN_FONT_PT if phone else fontsize
    frame_x = table_w + gap
    n = memory.num_frames
    artists = PageTableArtists()
    for f in range(n):
        y = -(f + 1) * cell_h
        names, refs = users[f], memory.refcount(f)
        if refs == 0:
            fill, edge, label, color = "white", FREE_EDGE, f"{f}: free", "0.5"
        else:
            if refs > 1:
                fill = SHARED
            elif names and names[0] in shown_names:
                fill = light_fill(palette[names[0]])
            else:
                fill = OTHERS
            label = f"{f}: {' + '.join(names)}" + (f", ref {refs}" if refs > 1 else "")
            edge, color = "0.3", "black"
        rect = slot(ax, frame_x, y, frame_w, cell_h, fill=fill, edge=edge)
        artists.frames.append(rect)
        artists.texts.append(
            center_text(
                ax, frame_x + frame_w / 2, y + cell_h / 2, label, fontsize=fontsize, color=color
            )
        )
    artists.texts.append(
        center_text(
            ax, frame_x + frame_w / 2, 0.45, "physical frames", fontsize=fontsize, weight="bold"
        )
    )

    for side, p in enumerate(shown):
        x = 0.0 if side == 0 else frame_x + frame_w + gap
        color = palette[p.name]
        y_top = -(n - p.num_pages) * cell_h / 2  # centred on the frames
        artists.texts.append(
            center_text(
                ax,
                x + table_w / 2,
                y_top + 0.45,
                f"page table of {p.name}",
                fontsize=fontsize,
                weight="bold",
                color=color,
            )
        )
        table = p.page_table
        rows = artists.rows.setdefault(p.name, [])
        for vpn in range(p.num_pages):
            y = y_top - (vpn + 1) * cell_h
            entry = table.get(vpn)
            if entry is None:
                rows.append(slot(ax, x, y, table_w, cell_h, fill="white", edge="0.3"))
                artists.texts.append(
                    center_text(
                        ax,
                        x + table_w / 2,
                        y + cell_h / 2,
                        f"page {vpn}: –",
                        fontsize=fontsize,
                        color="0.5",
                    )
                )
                continue
            text = f"page {vpn} → {entry.frame}" + (" CoW" if entry.copy_on_write else "")
            rows.append(
                slot(
                    ax,
                    x,
                    y,
                    table_w,
                    cell_h,
                    fill=light_fill(color),
                    edge="0.3",
                    hatch="//" if entry.copy_on_write else None,
                )
            )
            label = center_text(ax, x + table_w / 2, y + cell_h / 2, text, fontsize=fontsize)
            label.set_bbox({"fc": "white", "ec": "none", "pad": 1.0, "alpha": 0.85})
            artists.texts.append(label)
            fy = -(entry.frame + 0.5) * cell_h
            start = (x + table_w, y + cell_h / 2) if side == 0 else (x, y + cell_h / 2)
            end = (frame_x, fy) if side == 0 else (frame_x + frame_w, fy)
            artists.arrows.append(_arrow(ax, [start, end], color))
    right = frame_x + frame_w + (gap + table_w if len(shown) == 2 else 0.0)
    finish_diagram(ax, (-0.2, right + 0.2), (-n * cell_h - 0.2, 0.9))
    if legend:
        entries = [e for p in shown for e in p.page_table.values()]
        refs = [memory.refcount(f) for f in range(n)]
        handles = page_table_legend_handles(
            shared=any(r > 1 for r in refs),
            cow=any(e.copy_on_write for e in entries),
            others=any(r and not set(users[f]) & shown_names for f, r in enumerate(refs)),
            free=0 in refs,
        )
        ncols, small = min(len(handles), 2) or 1, max(fontsize - 1, PHONE_MIN_FONT_PT * phone)
        if phone:
            figure_legend(ax.figure, handles, fontsize=small, ncols=ncols)
        else:
            legend_below(ax, handles, fontsize=small, ncols=ncols)
    return artists
