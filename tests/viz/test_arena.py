"""§3's arena (kvcourse.viz.arena), headless: the kind of every slot, the runs and gaps drawn,
and clear errors for bad input."""

import matplotlib
import pytest

from kvcourse.serving import KINDS
from kvcourse.viz import KIND_COLORS, KIND_LABELS, ArenaRun, arena_kinds, draw_arena

EXAMPLE = [ArenaRun("A", 0, 16, 9, 12), ArenaRun("B", 20, 8, 3, 5)]


def texts(ax):
    return [t.get_text() for t in ax.texts]


def test_arena_kinds_follow_the_simulator_definitions():
    kinds = arena_kinds(EXAMPLE, 32, waiting=6)
    assert kinds[:9] == ["stored"] * 9
    assert kinds[9:12] == ["reserved"] * 3
    assert kinds[12:16] == ["internal"] * 4
    assert kinds[16:20] == ["external"] * 4  # 8 free in gaps of 4: C (6) is refused
    assert [kinds.count(k) for k in KINDS] == [12, 5, 7, 8, 0]
    # A request that fits a gap, or one larger than all free memory, is no fragmentation.
    assert arena_kinds(EXAMPLE, 32, waiting=4).count("free") == 8
    assert arena_kinds(EXAMPLE, 32, waiting=9).count("free") == 8
    assert arena_kinds(EXAMPLE, 32).count("external") == 0


def test_arena_rejects_bad_runs():
    with pytest.raises(ValueError, match="stored <= final <= size"):
        ArenaRun("A", 0, 4, 3, 5)
    with pytest.raises(ValueError, match="offset"):
        ArenaRun("A", -1, 4, 1, 2)
    with pytest.raises(TypeError, match="size"):
        ArenaRun("A", 0, 4.0, 1, 2)
    with pytest.raises(ValueError, match="overlaps"):
        arena_kinds([ArenaRun("A", 0, 4, 1, 2), ArenaRun("B", 2, 4, 1, 2)], 8)
    with pytest.raises(ValueError, match="does not fit"):
        arena_kinds([ArenaRun("A", 6, 4, 1, 2)], 8)
    with pytest.raises(TypeError):
        arena_kinds([("A", 0, 4, 1, 2)], 8)
    with pytest.raises(ValueError, match="num_slots"):
        arena_kinds(EXAMPLE, 0)


def test_draw_arena_draws_every_slot_in_its_kind_colour(new_axes, render):
    fig, ax = new_axes((9.0, 2.4))
    drawn = draw_arena(ax, EXAMPLE, 32, waiting=("C", 6))
    assert len(drawn.slots) == 32
    colours = [matplotlib.colors.to_hex(r.get_facecolor()) for r in drawn.slots]
    kinds = arena_kinds(EXAMPLE, 32, waiting=6)
    assert colours == [KIND_COLORS[k].lower() for k in kinds]
    # Two runs, two gaps and the waiting request's bar are outlined.
    assert len(drawn.outlines) == 5
    labels = texts(ax)
    assert "A: 16 slots" in labels and "B: 8 slots" in labels
    assert labels.count("gap 4") == 2 and "C waits" in labels and "needs 6" in labels
    legend = [t.get_text() for t in ax.get_legend().get_texts()]
    assert legend == [KIND_LABELS[k] for k in KINDS]
    render(fig)


def test_draw_arena_without_a_waiting_request_or_legend(new_axes):
    _, ax = new_axes()
    drawn = draw_arena(ax, EXAMPLE, 32, legend=False)
    assert len(drawn.outlines) == 4 and ax.get_legend() is None  # two runs, two gaps
    # Nobody is refused, so the gaps are free memory (grey), not external fragmentation (red).
    gaps = [t for t in drawn.texts if t.get_text() == "gap 4"]
    external = KIND_COLORS["external"].lower()
    assert len(gaps) == 2
    assert all(matplotlib.colors.to_hex(t.get_color()) != external for t in gaps)


def test_draw_arena_rejects_a_bad_waiting_request(new_axes):
    _, ax = new_axes()
    with pytest.raises(ValueError, match="waiting"):
        draw_arena(ax, EXAMPLE, 32, waiting=("C", 0))
    with pytest.raises(ValueError, match="waiting"):
        draw_arena(ax, EXAMPLE, 32, waiting=("C", 2.5))
