"""§3's buddy walk-through drawn (kvcourse.viz.buddy), headless: one row of slots per step, the
blocks outlined, the failed pieces marked, and the verdict of every step."""

import pytest

from kvcourse.blocks import WALKTHROUGH_REQUESTS, buddy_walkthrough
from kvcourse.viz import draw_buddy_walkthrough


def test_walkthrough_draws_sixteen_slots_per_step_and_the_failed_pieces(render):
    steps = buddy_walkthrough()
    drawn = draw_buddy_walkthrough(steps)
    assert len(drawn.slots) == len(steps) == 5
    assert all(len(row) == 16 for row in drawn.slots)
    # Blocks per row: 16 | A 4 8 | A B 2 8 | A B 2 C 4 | the same.
    assert [len(row) for row in drawn.blocks] == [1, 3, 4, 5, 5]
    # Only D's failed step outlines free pieces: the 2 at offset 6 and the 4 at offset 12.
    assert [len(row) for row in drawn.failed_pieces] == [0, 0, 0, 0, 2]
    pieces = sorted((r.get_x(), r.get_width()) for r in drawn.failed_pieces[4])
    assert pieces == [(6, 2), (12, 4)]
    labels = [t.get_text() for t in drawn.labels]
    assert labels[0] == "start" and labels[4].startswith("D asks 6")
    assert drawn.notes[4].get_text() == "needs 8; free 4 + 2"
    ax = drawn.labels[0].axes
    assert {"A", "B", "C"} <= {t.get_text() for t in ax.texts}
    render(ax.figure)


def test_walkthrough_shows_merging_and_rounding(new_axes, render):
    more = (("B", None), ("D", 6), ("A", None), ("D", 6))
    steps = buddy_walkthrough(16, WALKTHROUGH_REQUESTS + more)
    fig, ax = new_axes((10.0, 5.0))
    drawn = draw_buddy_walkthrough(steps, ax=ax)
    assert len(drawn.slots) == 9
    notes = [t.get_text() for t in drawn.notes]
    assert notes[5] == "merges into 4; free 4 + 4"
    assert notes[6] == "needs 8; free 4 + 4"
    assert notes[7] == "merges into 8; free 8 + 4"
    assert notes[8] == "gets 8 at 0, 2 unused; free 4"
    # D asked for 6 of its 8 slots: the last 2 are hatched.
    hatched = [r for r in drawn.slots[8] if r.get_hatch()]
    assert sorted(r.get_x() for r in hatched) == [6, 7]
    render(fig)


def test_walkthrough_notes_a_free_without_merge():
    steps = buddy_walkthrough(8, (("A", 2), ("B", 2), ("A", None)))
    drawn = draw_buddy_walkthrough(steps)
    assert drawn.notes[-1].get_text().startswith("buddy in use, no merge")


def test_walkthrough_rejects_bad_steps():
    with pytest.raises(ValueError, match="non-empty"):
        draw_buddy_walkthrough([])
    with pytest.raises(ValueError, match="non-empty"):
        draw_buddy_walkthrough(["start"])
    mixed = buddy_walkthrough(16)[:2] + buddy_walkthrough(8)[:1]
    with pytest.raises(ValueError, match="same arena"):
        draw_buddy_walkthrough(mixed)
