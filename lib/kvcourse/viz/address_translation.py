"""§2's drawing of one address translated through a page table: the virtual address split into
virtual page number (VPN) and offset, the row of the page table the VPN selects, and the physical
address built from that row's frame and the unchanged offset.

The colours are :mod:`kvcourse.viz.os_paging`'s: the process in its colour, the row the
translation used outlined in red, the offset grey on both sides since it is copied as is.
"""

from __future__ import annotations

from matplotlib.axes import Axes

from kvcourse.os_paging import AddressSpace, TranslationResult
from kvcourse.viz.os_paging import PageTableArtists, _arrow
from kvcourse.viz.phone import PHONE_MIN_FONT_PT, phone_font_size
from kvcourse.viz.style import (
    FONT_SIZE,
    SEQUENCE_COLORS,
    center_text,
    finish_diagram,
    light_fill,
    slot,
)

__all__ = ["OFFSET_FILL", "draw_translation"]

#: The fill of an address's offset field: the same grey on both sides, since it is copied as is.
OFFSET_FILL = "#EEEEEE"


def draw_translation(
    ax: Axes,
    process: AddressSpace,
    result: TranslationResult,
    *,
    color: str = SEQUENCE_COLORS[0],
    fontsize: float = FONT_SIZE,
    phone: bool = False,
) -> PageTableArtists:
    """Draw how ``process`` translated one address, ``result`` (from its ``translate``).

    Left, the virtual address as two fields, VPN and offset; middle, the process's page table
    (every virtual page, unmapped ones marked "–"), with the row of ``result.vpn`` outlined in
    red; right, the physical address as frame and offset. Arrows lead from the VPN to its row
    and from the row to the frame; a grey arrow carries the offset across unchanged. The
    formula ``frame × page size + offset`` is written underneath. ``phone=True`` stacks the three
    top to bottom for a phone's column (:func:`~kvcourse.viz.phone.phone_figure`).
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
    h, row_h, top, first_w = 0.8, 0.7, 3.2, 1.4
    fill = light_fill(color)
    fontsize = phone_font_size(fontsize) if phone else fontsize
    # Where things go: the virtual address (x, y of its fields' lower left), the page table's
    # left edge and header top, the physical address; the phone stacks them.
    if phone:
        va, x0, table_top, pa = (0.8, -h), 2.4, -1.8, (5.0, -2.5 - process.num_pages * row_h - h)
    else:
        va, x0, table_top, pa = (0.0, top - h), 5.0, top, (9.2, top - h)

    def field_pair(x: float, y: float, first: str, caption: str) -> None:
        slot(ax, x, y, first_w, h, fill=fill, edge="0.3", text=first, fontsize=fontsize)
        offset = f"offset {result.offset:#0{digits + 2}x}"
        slot(
            ax,
            x + first_w,
            y,
            2.0 + 0.2 * phone,
            h,
            fill=OFFSET_FILL,
            edge="0.3",
            text=offset,
            fontsize=fontsize,
        )
        artists.texts.append(
            ax.text(
                x + (first_w + 2.0) / 2,
                y + h + 0.2,
                caption,
                ha="center",
                va="bottom",
                fontsize=fontsize,
                weight="bold",
            )
        )

    field_pair(*va, f"VPN {result.vpn}", f"virtual address {result.virtual_address:#x}")
    field_pair(*pa, f"frame {result.frame}", f"physical address {result.physical_address:#x}")

    # The page table: a header, then one row per virtual page.
    col = 1.3
    for i, head in enumerate(("VPN", "frame")):
        slot(
            ax,
            x0 + i * col,
            table_top,
            col,
            0.5,
            fill="0.92",
            edge="0.3",
            text=head,
            fontsize=fontsize,
        )
    artists.texts.append(
        center_text(
            ax,
            x0 + col,
            table_top + 0.8,
            f"page table of {process.name}",
            fontsize=fontsize,
            weight="bold",
            color=color,
        )
    )
    row_y = 0.0
    for vpn in range(process.num_pages):
        y = table_top - (vpn + 1) * row_h
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

    # VPN down and into its row; the row's frame into the physical address.
    vpn_x, frame_x = va[0] + first_w / 2, pa[0] + first_w / 2
    frame_edge = pa[1] + h if phone else pa[1]
    artists.arrows.append(_arrow(ax, [(vpn_x, va[1]), (vpn_x, row_y), (x0, row_y)], color))
    artists.arrows.append(
        _arrow(ax, [(right, row_y), (frame_x, row_y), (frame_x, frame_edge)], color)
    )
    # The offset goes around everything, unchanged, into the right end of the physical address.
    if phone:
        across, mid, end = pa[0] + first_w + 2.5, va[1] + h / 2, pa[0] + first_w + 2.2
        offset_path = [(va[0] + first_w + 2.2, mid), (across, mid), (across, pa[1] + h / 2)]
        offset_path.append((end, pa[1] + h / 2))
        label_at, label, ha = (across - 0.15, mid + 0.25), "offset copied\nunchanged", "right"
        formula_at = (4.3, pa[1] - 0.35)
    else:
        high = top + 1.3
        offset_path = [(3.4, top - h / 2), (3.9, top - h / 2), (3.9, high), (13.0, high)]
        offset_path += [(13.0, top - h / 2), (12.6, top - h / 2)]
        label_at, label, ha = (8.45, high + 0.25), "offset copied unchanged", "center"
        formula_at = (6.3, -0.3)
    artists.arrows.append(_arrow(ax, offset_path, "0.45", lw=1.3))
    artists.texts.append(
        ax.text(
            *label_at,
            label,
            ha=ha,
            va="bottom" if phone else "center",
            fontsize=max(fontsize - 1, PHONE_MIN_FONT_PT) if phone else fontsize - 1,
            color="0.35",
        )
    )
    sep = "\n= " if phone else " = "
    formula = (
        f"frame × page size + offset{sep}{result.frame} × {page} + "
        f"{result.offset:#x} = {result.physical_address:#x}"
    )
    artists.texts.append(
        ax.text(
            *formula_at, formula, ha="center", va="top" if phone else "center", fontsize=fontsize
        )
    )
    if phone:
        finish_diagram(ax, (-0.2, pa[0] + first_w + 2.7), (pa[1] - 1.5, 0.9))
    else:
        finish_diagram(ax, (-0.2, 13.3), (-0.7, high + 0.6))
    return artists
