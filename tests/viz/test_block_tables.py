"""§4's block-table drawings (kvcourse.viz.block_tables), headless: one slot per cell, one arrow
per row, the step's changes marked, and the frames as small multiples or an animation."""

import pytest
from matplotlib.colors import to_hex

from kvcourse.blocks import BlockPool, BlockTable
from kvcourse.viz import (
    BlockTableFrame,
    PoolState,
    block_table_animation,
    block_table_frames_figure,
    block_table_legend_handles,
    draw_block_table,
    draw_block_table_frame,
    four_score_frames,
)
from kvcourse.viz.style import CHANGED


@pytest.mark.parametrize("index, logical_slots, arrows", [(0, 8, 2), (1, 8, 2), (2, 12, 3)])
def test_draw_block_table_draws_one_slot_per_cell_and_one_arrow_per_row(
    index, logical_slots, arrows, new_axes, render
):
    frame = four_score_frames(2)[index]
    fig, ax = new_axes()
    drawn = draw_block_table(ax, frame.entries, frame.pool, tokens=frame.tokens, title=frame.label)
    assert len(drawn.logical_slots) == logical_slots
    assert len(drawn.physical_slots) == 8 * 4  # the whole pool
    assert len(drawn.arrows) == arrows
    texts = {t.get_text() for t in ax.texts}
    assert set(frame.tokens) <= texts
    assert ax.get_title(loc="left") == frame.label
    render(fig, "png")


def test_the_step_s_changes_are_outlined(new_axes):
    frame = four_score_frames(2)[2]  # "brought" goes into the new block 7
    _, ax = new_axes()
    drawn = draw_block_table_frame(ax, frame, legend=True)
    thick = [r for r in drawn.logical_slots + drawn.physical_slots if r.get_linewidth() > 2]
    assert len(thick) == 2  # the new token, in its logical and its physical slot
    assert all(to_hex(r.get_edgecolor()) == CHANGED.lower() for r in thick)
    new_arrow = [a for a in drawn.arrows if to_hex(a.get_edgecolor()) == CHANGED.lower()]
    assert len(new_arrow) == 1
    legend = [t.get_text() for t in ax.get_legend().get_texts()]
    assert legend == [h.get_label() for h in block_table_legend_handles()]


def test_draw_block_table_takes_a_live_table_and_pool(new_axes, render):
    pool = BlockPool(num_blocks=6, block_size=2, taken=[1])
    table = BlockTable(pool)
    table.append(3)
    fig, ax = new_axes()
    drawn = draw_block_table(ax, table, pool, legend=True)
    assert len(drawn.logical_slots) == 4 and len(drawn.arrows) == 2
    assert len(drawn.physical_slots) == 12
    render(fig)


def test_an_empty_table_says_so(new_axes):
    _, ax = new_axes()
    drawn = draw_block_table(ax, [], PoolState(4, 4, frozenset({1})))
    assert drawn.logical_slots == [] and len(drawn.physical_slots) == 16
    assert "(no blocks yet)" in {t.get_text() for t in ax.texts}


def test_draw_block_table_rejects_mismatched_tokens(new_axes):
    frame = four_score_frames(0)[0]
    _, ax = new_axes()
    with pytest.raises(ValueError, match="tokens"):
        draw_block_table(ax, frame.entries, frame.pool, tokens=["only", "two"])
    with pytest.raises(TypeError):
        draw_block_table(ax, frame.entries, "pool")
    with pytest.raises(TypeError):
        draw_block_table(ax, "entries", frame.pool)
    with pytest.raises(TypeError):
        draw_block_table(ax, [(0, 1, 4)], frame.pool)
    small = PoolState(num_blocks=2, block_size=4, used=frozenset())
    with pytest.raises(ValueError, match="outside"):
        draw_block_table(ax, frame.entries, small)


def test_frames_figure_and_animation_render(render):
    frames = four_score_frames(2)
    fig = block_table_frames_figure(frames)
    assert len([ax for ax in fig.axes if ax.patches]) == 3
    assert len(fig.legends) == 1
    render(fig)
    grid = block_table_frames_figure(four_score_frames(4), ncols=2)
    assert len(grid.axes) == 6 and len([ax for ax in grid.axes if ax.patches]) == 5
    html = block_table_animation(frames[:2]).to_jshtml()
    assert "<img" in html or "img" in html


def test_frames_figure_and_animation_reject_bad_frames():
    with pytest.raises(ValueError):
        block_table_frames_figure([])
    with pytest.raises(ValueError):
        block_table_animation(["frame"])
    with pytest.raises(ValueError, match="ncols"):
        block_table_frames_figure(four_score_frames(1), ncols=0)
    assert isinstance(four_score_frames(0)[0], BlockTableFrame)
