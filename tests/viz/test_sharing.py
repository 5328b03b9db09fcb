"""§5's sharing drawings (kvcourse.viz.sharing), headless: slots, table arrows, reference counts
and copy-on-write arrows, one frame or several."""

import pytest
from matplotlib.figure import Figure

from kvcourse.viz import (
    SharingFrame,
    draw_sharing_frame,
    fork_cow_frames,
    shared_prefix_frame,
    sharing_frames_figure,
    sharing_legend_handles,
)


def test_draw_sharing_frame_artists(render):
    frames = fork_cow_frames()
    fig = Figure()
    ax = fig.add_subplot()
    art = draw_sharing_frame(ax, frames[1])
    # 3 samples x 2 logical blocks x 4 slots; 5 physical blocks x 4 slots.
    assert len(art.logical_slots) == 24 and len(art.physical_slots) == 20
    assert len(art.table_arrows) == 6 and len(art.copy_arrows) == 1
    assert [t.get_text() for t in art.ref_labels] == ["ref 3", "ref 2", "ref 1", "free", "free"]
    texts = {t.get_text() for t in ax.texts}
    assert {"fathers", "copy", "sample 1", "physical KV blocks"} <= texts
    assert ax.get_title(loc="left") == frames[1].label
    # The new token's slots are outlined in red, in the sample's table and in the pool.
    red = [r for r in art.logical_slots + art.physical_slots if r.get_linewidth() > 2]
    assert len(red) == 2
    render(fig)


def test_draw_sharing_frame_without_copies_or_title():
    fig = Figure()
    ax = fig.add_subplot()
    art = draw_sharing_frame(ax, fork_cow_frames()[-1], title=False)
    assert art.copy_arrows == [] and ax.get_title(loc="left") == ""
    with pytest.raises(TypeError):
        draw_sharing_frame(ax, "not a frame")


def test_sharing_frames_figure(render):
    frames = fork_cow_frames()
    fig = sharing_frames_figure(frames)
    assert len(fig.axes) == len(frames)
    assert len(fig.legends) == 1
    labels = [t.get_text() for t in fig.legends[0].get_texts()]
    assert "copy-on-write" in labels
    render(fig)
    alone = sharing_frames_figure([shared_prefix_frame()])
    labels = [t.get_text() for t in alone.legends[0].get_texts()]
    assert "copy-on-write" not in labels  # nothing is copied in that picture
    assert len(sharing_legend_handles(copies=False)) == 3
    render(alone)
    with pytest.raises(ValueError):
        sharing_frames_figure([])
    with pytest.raises(ValueError):
        sharing_frames_figure(["x"])
    assert isinstance(frames[0], SharingFrame)
