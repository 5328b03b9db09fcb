"""Drawings of §2's toy virtual memory: one address translated, and page tables pointing into the
physical frames.

* :func:`draw_translation` draws one access of an :class:`~kvcourse.os_paging.AddressSpace`: the
  virtual address split into virtual page number (VPN) and offset, the row of the page table the
  VPN selects, and the physical address built from that row's frame and the unchanged offset;
* :func:`draw_page_tables` draws one or two page tables (left and right) with an arrow from
  each resident page to its frame, and between them the physical frames, each labelled with the
  processes that use it and, when shared, its reference count.

The colours are the book's (:mod:`kvcourse.viz.style`): each process in its own colour, a frame
listed by more than one page table yellow like §5's shared blocks, another process's frame grey,
and the row a translation used outlined in red. Both functions draw on an ``Axes`` you pass in.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from matplotlib.axes import Axes
from matplotlib.patches import FancyArrowPatch, Patch, Rectangle
from matplotlib.path import Path
from matplotlib.text import Text

from kvcourse.os_paging import AddressSpace, PhysicalMemory, TranslationResult
from kvcourse.viz.style import (
    FONT_SIZE,
    FREE_EDGE,
    OTHERS,
    SEQUENCE_COLORS,
    SHARED,
    center_text,
    finish_diagram,
    legend_below,
    light_fill,
    slot,
)

__all__ = [
    "PageTableArtists",
    "draw_page_tables",
    "draw_translation",
    "page_table_legend_handles",
]

#: The fill of an address's offset field: the same grey on both sides, since it is copied as is.
OFFSET_FILL = "#EEEEEE"


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


def draw_translation(
    ax: Axes,
    process: AddressSpace,
    result: TranslationResult,
    *,
    color: str = SEQUENCE_COLORS[0],
    fontsize: float = FONT_SIZE,
) -> PageTableArtists:
    """Draw how ``process`` translated one address, ``result`` (from its ``translate``).

    Left, the virtual address as two fields, VPN and offset; middle, the process's page table
    (every virtual page, unmapped ones marked "–"), with the row of ``result.vpn`` outlined in
    red; right, the physical address as frame and offset. Arrows lead from the VPN to its row
    and from the row to the frame; a grey arrow carries the offset across unchanged. The
    formula ``frame × page size + offset`` is written underneath.
    """
    if not isinstance(process, AddressSpace):
        raise TypeError(f"process must be an AddressSpace, got {process!r}")
    if not isinstance(result, TranslationResult):
        raise TypeError(f"result must be a TranslationResult, got {result!r}")
    table = process.page_table
    entry = table.get(result.vpn)
    if entry is None or entry.frame != result.frame:
        raise ValueError(
            f"process {process.name!r} does not map page {result.vpn} to frame "
            f"{result.frame} now; draw a translation right after making it"
        )
    artists = PageTableArtists(rows={process.name: []})
    page = process.memory.page_size
    digits = max(1, (page.bit_length() - 1 + 3) // 4)  # hex digits of an offset
    h, row_h, top = 0.8, 0.7, 3.2
    fill = light_fill(color)

    def field_pair(x: float, first: str, first_w: float, caption: str) -> None:
        slot(ax, x, top - h, first_w, h, fill=fill, edge="0.3", text=first, fontsize=fontsize)
        offset = f"offset {result.offset:#0{digits + 2}x}"
        slot(ax, x + first_w, top - h, 2.0, h, fill=OFFSET_FILL, edge="0.3", text=offset)
        artists.texts.append(
            ax.text(
                x + (first_w + 2.0) / 2,
                top + 0.2,
                caption,
                ha="center",
                va="bottom",
                fontsize=fontsize,
                weight="bold",
            )
        )

    va_text = f"virtual address {result.virtual_address:#x}"
    field_pair(0.0, f"VPN {result.vpn}", 1.4, va_text)
    pa_text = f"physical address {result.physical_address:#x}"
    field_pair(9.2, f"frame {result.frame}", 1.4, pa_text)

    # The page table: a header, then one row per virtual page.
    x0, col = 5.0, 1.3
    for i, head in enumerate(("VPN", "frame")):
        slot(ax, x0 + i * col, top, col, 0.5, fill="0.92", edge="0.3", text=head)
    artists.texts.append(
        center_text(
            ax,
            x0 + col,
            top + 0.8,
            f"page table of {process.name}",
            fontsize=fontsize,
            weight="bold",
            color=color,
        )
    )
    row_y = 0.0
    for vpn in range(process.num_pages):
        y = top - (vpn + 1) * row_h
        mapped = table.get(vpn)
        used = vpn == result.vpn
        cells = (str(vpn), str(mapped.frame) if mapped else "–")
        for i, text in enumerate(cells):
            rect = slot(
                ax,
                x0 + i * col,
                y,
                col,
                row_h,
                fill=fill if mapped else "white",
                edge="0.3",
                text=text,
                changed=used,
                fontsize=fontsize,
            )
            artists.rows[process.name].append(rect)
        if used:
            row_y = y + row_h / 2
    right = x0 + 2 * col

    # VPN down and into its row; the row's frame up into the physical address.
    artists.arrows.append(_arrow(ax, [(0.7, top - h), (0.7, row_y), (x0, row_y)], color))
    artists.arrows.append(_arrow(ax, [(right, row_y), (9.9, row_y), (9.9, top - h)], color))
    # The offset goes over everything, unchanged.
    high = top + 1.3
    offset_path = [(3.4, top - h / 2), (3.9, top - h / 2), (3.9, high), (13.0, high)]
    offset_path += [(13.0, top - h / 2), (12.6, top - h / 2)]
    artists.arrows.append(_arrow(ax, offset_path, "0.45", lw=1.3))
    artists.texts.append(
        center_text(
            ax,
            8.45,
            high + 0.25,
            "offset copied unchanged",
            fontsize=fontsize - 1,
            color="0.35",
        )
    )
    formula = (
        f"frame × page size + offset = {result.frame} × {page} + "
        f"{result.offset:#x} = {result.physical_address:#x}"
    )
    artists.texts.append(center_text(ax, 6.3, -0.3, formula, fontsize=fontsize))
    finish_diagram(ax, (-0.2, 13.3), (-0.7, high + 0.6))
    return artists


def draw_page_tables(
    ax: Axes,
    shown: Sequence[AddressSpace],
    *,
    others: Sequence[AddressSpace] = (),
    colors: Mapping[str, str] | None = None,
    legend: bool = True,
    fontsize: float = FONT_SIZE,
) -> PageTableArtists:
    """Draw the page tables of ``shown`` (one or two processes of the same memory) and the
    physical frames between them.

    The first table stands left of the frames, the second right. Each row is one virtual page:
    resident pages are filled in the process's colour (hatched while copy-on-write) and point at
    their frame; unmapped ones say so. Each frame is labelled with the processes that map it,
    among ``shown`` and ``others`` (processes whose frames are named but whose tables are left
    out), and with its reference count when shared. ``colors`` maps names to colours (default:
    :func:`process_colors` of ``shown`` then ``others``).
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

    cell_h, table_w, frame_w, gap = 0.8, 3.0, 3.4, 2.0
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
        legend_below(ax, handles, fontsize=fontsize - 1, ncols=min(len(handles), 2) or 1)
    return artists
