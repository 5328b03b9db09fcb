"""§2's drawings (kvcourse.viz.os_paging), headless: a translation and page tables drawn from
the toy virtual memory, with what each part shows, and clear errors for bad input."""

import matplotlib
import pytest

from kvcourse.os_paging import AddressSpace, PhysicalMemory
from kvcourse.viz import draw_page_tables, draw_translation, page_table_legend_handles
from kvcourse.viz.os_paging import process_colors
from kvcourse.viz.style import CHANGED, OTHERS, SHARED, light_fill


def texts(ax):
    return [t.get_text() for t in ax.texts]


def two_processes():
    """The run of §2: A and B take turns touching pages of an 8-frame memory."""
    memory = PhysicalMemory(num_frames=8, page_size=4096)
    a, b = AddressSpace(memory, "A", 4), AddressSpace(memory, "B", 4)
    touches = [(a, 0x0123), (b, 0x0040), (a, 0x3ABC), (b, 0x2008), (a, 0x1FF0)]
    results = [p.translate(va) for p, va in touches]
    return memory, a, b, results


def hexcolor(patch):
    return matplotlib.colors.to_hex(patch.get_facecolor())


def edge(patch):
    return matplotlib.colors.to_hex(patch.get_edgecolor())


def test_translation_shows_both_addresses_and_the_row_used(new_axes, render):
    _, a, _, results = two_processes()
    fig, ax = new_axes((8.0, 3.6))
    drawn = draw_translation(ax, a, results[2])
    labels = texts(ax)
    assert "virtual address 0x3abc" in labels and "physical address 0x2abc" in labels
    assert "VPN 3" in labels and "frame 2" in labels
    assert labels.count("offset 0xabc") == 2  # the offset is the same on both sides
    assert "frame × page size + offset = 2 × 4096 + 0xabc = 0x2abc" in labels
    # One row of two cells per virtual page; only page 3's row is outlined in red.
    rows = drawn.rows["A"]
    assert len(rows) == 2 * a.num_pages
    outlined = [i // 2 for i, r in enumerate(rows) if edge(r) == CHANGED.lower()]
    assert outlined == [3, 3]
    assert "–" in labels  # page 2 is not mapped yet
    assert len(drawn.arrows) == 3
    render(fig)


def test_translation_refuses_a_stale_or_foreign_result(new_axes):
    memory, a, b, results = two_processes()
    _, ax = new_axes()
    with pytest.raises(ValueError, match="does not map page 3"):
        draw_translation(ax, b, results[2])  # B's page 3 is not A's
    with pytest.raises(TypeError, match="AddressSpace"):
        draw_translation(ax, "A", results[2])
    with pytest.raises(TypeError, match="TranslationResult"):
        draw_translation(ax, a, 0x3ABC)


def test_page_tables_point_every_resident_page_at_its_frame(new_axes, render):
    _, a, b, _ = two_processes()
    fig, ax = new_axes((8.0, 5.0))
    colors = {"A": "#4C78A8", "B": "#54A24B"}
    drawn = draw_page_tables(ax, [a, b], colors=colors)
    assert len(drawn.frames) == 8
    assert len(drawn.rows["A"]) == len(drawn.rows["B"]) == 4
    assert len(drawn.arrows) == len(a.page_table) + len(b.page_table) == 5
    labels = texts(ax)
    assert {"0: A", "1: B", "2: A", "3: B", "4: A", "5: free"} <= set(labels)
    assert "page 3 → 2" in labels and "page 2: –" in labels
    # Frames take their owner's pale colour; free ones are white.
    fills = [hexcolor(r) for r in drawn.frames]
    assert (
        fills[0] == light_fill(colors["A"]).lower() and fills[1] == light_fill(colors["B"]).lower()
    )
    assert fills[5] == "#ffffff"
    legend = [t.get_text() for t in ax.get_legend().get_texts()]
    assert legend == ["free frame"]  # nothing shared, no CoW, no other process yet
    render(fig)


def test_after_fork_shared_frames_are_yellow_and_others_grey(new_axes, render):
    memory, a, b, _ = two_processes()
    child = a.fork("A′")
    child.write(0x1000, 42)  # page 1 is copied into the lowest free frame, 5
    fig, ax = new_axes((8.0, 5.0))
    drawn = draw_page_tables(ax, [a, child], others=[b])
    labels = texts(ax)
    assert "0: A + A′, ref 2" in labels and "5: A′" in labels and "1: B" in labels
    assert "page 0 → 0 CoW" in labels and "page 1 → 5" in labels
    fills = [hexcolor(r) for r in drawn.frames]
    assert fills[0] == SHARED.lower() and fills[1] == matplotlib.colors.to_hex(OTHERS)
    hatched = [r.get_hatch() for r in drawn.rows["A′"]]
    assert hatched == ["//", None, None, "//"]
    legend = [t.get_text() for t in ax.get_legend().get_texts()]
    assert legend == [h.get_label() for h in page_table_legend_handles()]
    assert memory.refcount(0) == 2
    render(fig)


def test_page_tables_refuse_bad_input(new_axes):
    memory, a, b, _ = two_processes()
    _, ax = new_axes()
    with pytest.raises(ValueError, match="one or two"):
        draw_page_tables(ax, [])
    with pytest.raises(ValueError, match="one or two"):
        draw_page_tables(ax, [a, b, a])
    stranger = AddressSpace(PhysicalMemory(4), "C", 2)
    with pytest.raises(ValueError, match="another PhysicalMemory"):
        draw_page_tables(ax, [a], others=[stranger])
    with pytest.raises(TypeError, match="AddressSpace"):
        draw_page_tables(ax, [a], others=["B"])


def test_process_colors_are_distinct_and_in_order():
    _, a, b, _ = two_processes()
    colors = process_colors([a, b, a])
    assert list(colors) == ["A", "B"] and colors["A"] != colors["B"]
