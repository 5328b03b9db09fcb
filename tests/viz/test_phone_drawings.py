"""Every diagram of the book drawn for a phone (``phone=True``): as wide as a phone rendering, its
text at least 9 px in the phone's column, no two labels on top of each other, nothing outside the
figure, and the desktop drawing of the same call left as it was."""

from __future__ import annotations

import itertools

import pytest
from IPython.core.pylabtools import print_figure
from matplotlib.figure import Figure

from kvcourse.blocks import WALKTHROUGH_REQUESTS, RadixCache, buddy_walkthrough
from kvcourse.os_paging import AddressSpace, PhysicalMemory
from kvcourse.viz import (
    PREEMPTION_DEMO,
    ArenaRun,
    block_table_frames_figure,
    book_figure,
    chained_hash_figure,
    draw_arena,
    draw_buddy_walkthrough,
    draw_page_tables,
    draw_system_overview,
    draw_translation,
    fork_cow_frames,
    four_score_frames,
    mooncake_architecture_figure,
    phone_figure,
    preemption_frames,
    preemption_frames_figure,
    radix_tree_figure,
    shared_prefix_frame,
    sharing_frames_figure,
)
from kvcourse.viz.figure_pair import svg_size_pt
from kvcourse.viz.mooncake_architecture import MAX_INSTANCES
from kvcourse.viz.phone import MIN_TEXT_PX, PHONE_MIN_FONT_PT, PHONE_WIDTH_IN


def on_axes(draw, desktop_size, **kwargs):
    """The same drawing on a desktop figure and on a phone figure."""
    desktop = Figure(figsize=desktop_size, layout="constrained")
    draw(desktop.add_subplot(), **kwargs)
    phone = phone_figure()
    draw(phone.add_subplot(), **kwargs, phone=True)
    return desktop, phone


def overlapping_labels(fig):
    """Pairs of visible texts whose boxes overlap (tick labels of hidden axes aside)."""
    fig.draw_without_rendering()
    renderer = fig._get_renderer()
    texts = [
        t
        for ax in fig.axes
        for t in [*ax.texts, ax.title, ax._left_title]
        if t.get_visible() and t.get_text().strip()
    ]
    boxes = [(t.get_text(), t.get_window_extent(renderer).shrunk(0.98, 0.9)) for t in texts]
    return [
        (a, b)
        for (a, box_a), (b, box_b) in itertools.combinations(boxes, 2)
        if box_a.overlaps(box_b)
    ]


def check(desktop, phone):
    pair = book_figure(desktop, phone)  # refuses a phone rendering with text under 9 px
    assert pair.phone_text_px >= MIN_TEXT_PX
    assert pair.phone_min_font_pt >= PHONE_MIN_FONT_PT
    assert phone.get_figwidth() == PHONE_WIDTH_IN
    # everything drawn lies inside the figure: the image is cropped to it, plus the margin
    assert svg_size_pt(pair.phone_svg)[0] <= (PHONE_WIDTH_IN + 0.2) * 72 + 2
    assert overlapping_labels(phone) == []
    return pair


def address_spaces():
    memory = PhysicalMemory(num_frames=8, page_size=4096)
    a, b = AddressSpace(memory, "A", num_pages=4), AddressSpace(memory, "B", num_pages=4)
    touches = [(a, 0x0123), (b, 0x0040), (a, 0x3ABC), (b, 0x2008), (a, 0x1FF0), (a, 0x0124)]
    results = [p.translate(va) for p, va in touches]
    return a, b, results


def test_translation_and_page_tables():
    a, b, results = address_spaces()
    check(*on_axes(draw_translation, (8.0, 3.3), process=a, result=results[2]))
    check(*on_axes(draw_page_tables, (8.0, 4.6), shown=[a, b]))
    a.write(0x1000, 7)
    child = a.fork("A′")
    child.write(0x1000, 8)
    check(*on_axes(draw_page_tables, (8.0, 4.9), shown=[a, child], others=[b]))


def test_arena():
    runs = [ArenaRun("A", 0, 16, 9, 12), ArenaRun("B", 20, 8, 3, 5)]
    check(*on_axes(draw_arena, (7.0, 2.2), runs=runs, num_slots=32, waiting=("C", 6), fontsize=12))


def test_buddy_walkthrough_puts_each_verdict_under_its_row():
    steps = buddy_walkthrough(16, [*WALKTHROUGH_REQUESTS, ("B", None), ("D", 6)])
    desktop = draw_buddy_walkthrough(steps)
    phone = draw_buddy_walkthrough(steps, phone=True)
    check(desktop.labels[0].figure, phone.labels[0].figure)
    for label, note in zip(phone.labels, phone.notes, strict=True):
        assert note.get_position()[1] < label.get_position()[1]


def test_block_tables_put_the_pool_under_the_table():
    frames = four_score_frames(decode_steps=2)
    check(block_table_frames_figure(frames), block_table_frames_figure(frames, phone=True))


def test_system_overview():
    check(*on_axes(draw_system_overview, (8.0, 3.0), num_workers=2, num_heads=40))


@pytest.mark.parametrize("frames", [fork_cow_frames(), [shared_prefix_frame()]])
def test_sharing_frames(frames):
    check(sharing_frames_figure(frames), sharing_frames_figure(frames, phone=True))


def test_preemption_frames_put_the_queue_under_the_blocks():
    frames = preemption_frames(PREEMPTION_DEMO, block_size=4, num_blocks=6)
    check(preemption_frames_figure(frames), preemption_frames_figure(frames, phone=True))


def test_chained_hashes():
    a = list(range(100, 120))
    rows = [("A", a), ("A, token 9 changed", [*a[:9], 7, *a[10:]]), ("B", [*a[:10], 0, 0, 0])]
    check(chained_hash_figure(rows), chained_hash_figure(rows, phone=True))


@pytest.mark.parametrize(
    ("num_prefill", "num_decode"), [(3, 3), (1, MAX_INSTANCES), (MAX_INSTANCES, 2)]
)
def test_mooncake_architecture_stacks_the_pools(num_prefill, num_decode):
    kwargs = {"num_prefill": num_prefill, "num_decode": num_decode}
    phone = mooncake_architecture_figure(**kwargs, phone=True)
    check(mooncake_architecture_figure(**kwargs), phone)
    texts = {t.get_text(): t for t in phone.axes[0].texts}
    # the decode pool above the prefill pool, the Conductor above both
    y = {
        name: texts[name].get_position()[1]
        for name in (
            "Conductor: global scheduler",
            "Decode pool",
            "Prefill pool",
            "Distributed KV pool",
        )
    }
    assert list(y) == sorted(y, key=y.get, reverse=True)


def test_radix_tree_snapshots_stack_as_outlines():
    cache = RadixCache(32)
    cache.insert([5, 8, 2, 9, 4, 7, 3])
    cache.acquire("B", [5, 8, 2, 9, 4, 1, 1])
    first = cache.tree()
    cache.release("B", [5, 8, 2, 9, 4, 1, 1, 0, 2])
    cache.insert([5, 8, 2, 9, 4, 1, 1, 6, 6, 6, 6, 6, 6, 6, 6])
    snaps = [("1 · split", first), ("2 · three leaves", cache.tree())]
    check(radix_tree_figure(snaps), radix_tree_figure(snaps, phone=True))


def test_phone_false_is_the_desktop_drawing():
    # phone defaults to False, and passing it changes nothing on the desktop
    frames = four_score_frames(decode_steps=1)
    plain, explicit = (
        block_table_frames_figure(frames),
        block_table_frames_figure(frames, phone=False),
    )
    assert print_figure(plain, "png") == print_figure(explicit, "png")
