"""The shared look (kvcourse.viz.style): one palette, and the pieces the drawings are built from."""

import matplotlib
import pytest
from matplotlib.colors import to_hex

from kvcourse.serving import KINDS
from kvcourse.viz import KIND_COLORS, KIND_LABELS, OWNER_COLORS, kind_legend_handles
from kvcourse.viz.style import (
    BLUE,
    CHANGED,
    CHANGED_TEXT,
    SEQUENCE_COLORS,
    center_text,
    despine,
    finish_diagram,
    light_fill,
    new_block_outline,
    percent_formatter,
    slot,
    text_color_on,
)


def test_one_palette_shared_by_the_chapters():
    # The followed sequence, stored tokens and the first owner and sequence are one blue.
    assert KIND_COLORS["stored"] == OWNER_COLORS[0] == SEQUENCE_COLORS[0] == BLUE
    assert KIND_COLORS["external"] == CHANGED
    assert list(KIND_COLORS) == list(KINDS) == list(KIND_LABELS)
    assert all(matplotlib.colors.is_color_like(c) for c in KIND_COLORS.values())


def test_text_colour_reads_on_its_fill():
    assert text_color_on("white") == "black" and text_color_on("black") == "white"
    # White on the two dark kinds, black on the others (the breakdown bars' labels).
    assert [text_color_on(KIND_COLORS[k]) for k in KINDS] == [
        "white",
        "black",
        "black",
        "white",
        "black",
    ]


def test_light_fills_are_paler_than_their_colour():
    for color in SEQUENCE_COLORS:
        light = matplotlib.colors.to_rgb(light_fill(color))
        assert sum(light) > sum(matplotlib.colors.to_rgb(color))
    assert light_fill("#123456") == "#EEEEEE"


def test_slot_marks_a_changed_slot(new_axes):
    _, ax = new_axes()
    plain = slot(ax, 0, 0, 1, 1, fill="white", edge="0.4", text="a")
    changed = slot(ax, 1, 0, 1, 1, fill="white", edge="0.4", changed=True, text="b")
    empty = slot(ax, 2, 0, 1, 1, fill="white", edge="0.4", hatch="..")
    assert plain.get_linewidth() == 1.0 and changed.get_linewidth() > 2
    assert to_hex(changed.get_edgecolor()) == CHANGED.lower()
    assert changed.get_zorder() > plain.get_zorder()
    assert empty.get_hatch() == ".."
    texts = {t.get_text(): t for t in ax.texts}
    assert set(texts) == {"a", "b"}  # no text for the empty slot
    assert to_hex(texts["b"].get_color()) == CHANGED_TEXT.lower()
    outline = new_block_outline(ax, 0, 0, 3, 1)
    assert outline.get_facecolor()[3] == 0 and outline.get_zorder() == 3  # a frame, no fill


def test_diagram_and_plot_helpers(new_axes):
    _, ax = new_axes()
    label = center_text(ax, 1, 2, "x", fontsize=9)
    assert (label.get_ha(), label.get_va(), label.get_fontsize()) == ("center", "center", 9)
    finish_diagram(ax, (0, 4), (-1, 1))
    assert ax.get_xlim() == (0, 4) and ax.get_ylim() == (-1, 1)
    assert ax.get_aspect() == 1.0 and not ax.axison
    _, plot = new_axes()
    despine(plot, ("top", "left"))
    assert not plot.spines["top"].get_visible() and plot.spines["right"].get_visible()
    assert percent_formatter()(0.5, 0) == "0.5 %"


def test_kind_legend_handles():
    assert [h.get_label() for h in kind_legend_handles()] == [KIND_LABELS[k] for k in KINDS]
    assert len(kind_legend_handles(["stored", "free"])) == 2
    with pytest.raises(ValueError, match="unknown"):
        kind_legend_handles(["stored", "wasted"])
