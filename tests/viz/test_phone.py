"""The phone rendering of a figure: plots restacked by themselves, diagrams fitted to the width,
and no text under the phone's floor."""

import numpy as np
import pytest
from IPython.core.pylabtools import print_figure
from matplotlib.figure import Figure
from matplotlib.patches import Rectangle

from kvcourse.viz import figure_pair, phone
from kvcourse.viz.phone import (
    PHONE_MIN_FONT_PT,
    PHONE_WIDTH_IN,
    fit_height,
    phone_figure,
    phone_font_size,
    phone_layout,
)


def two_panels(sharey=False, legend_inside=True):
    """A desktop figure of two plots side by side, the second with a legend in its corner."""
    fig = Figure(figsize=(8.0, 3.4), layout="constrained")
    left, right = fig.subplots(1, 2, sharey=sharey)
    x = np.linspace(0, 1, 20)
    left.plot(x, x, label="a straight line")
    left.set_ylabel("tokens per second")
    left.set_title("A rather long title that would not fit on a phone's narrow column", loc="left")
    for i in range(4):
        right.plot(x, x**i, label=f"the curve of degree {i}")
    if legend_inside:
        right.legend(loc="upper left", ncols=2, fontsize=10)
    return fig


def positions(fig):
    fig.draw_without_rendering()
    return [ax.get_position() for ax in fig.axes]


def test_phone_font_size_is_a_little_smaller_with_a_floor():
    assert phone_font_size(11) == pytest.approx(9.9)
    assert phone_font_size(20) == pytest.approx(18.0)
    assert phone_font_size(8) == PHONE_MIN_FONT_PT
    assert phone_font_size(PHONE_MIN_FONT_PT) == PHONE_MIN_FONT_PT


def test_phone_figure_is_the_phone_width():
    assert tuple(phone_figure(2.5).get_size_inches()) == (PHONE_WIDTH_IN, 2.5)
    assert phone_figure().get_layout_engine() is not None
    with pytest.raises(ValueError, match="positive"):
        phone_figure(0)


def test_side_by_side_panels_are_stacked_and_the_original_kept():
    fig, twin = two_panels(), two_panels()
    small = phone_layout(fig)
    assert small is not fig
    assert small.get_figwidth() == PHONE_WIDTH_IN
    top, bottom = positions(small)
    assert top.y0 > bottom.y1  # one above the other, in reading order
    assert top.width > 0.7 and bottom.width > 0.7  # each takes the width
    # the desktop figure is untouched: its first drawing is its twin's
    assert tuple(fig.get_size_inches()) == (8.0, 3.4)
    assert print_figure(fig, "png") == print_figure(twin, "png")


def test_no_text_is_under_the_floor_and_the_title_is_broken():
    small = phone_layout(two_panels())
    _, smallest = figure_pair.render_svg(small)
    assert smallest >= PHONE_MIN_FONT_PT
    title = small.axes[0].get_title(loc="left")
    assert "\n" in title and title.replace("\n", " ") == (
        "A rather long title that would not fit on a phone's narrow column"
    )


def test_a_legend_inside_a_panel_hangs_under_it_in_columns_that_fit():
    small = phone_layout(two_panels())
    small.draw_without_rendering()
    ax = small.axes[1]
    legend = ax.get_legend()
    box = legend.get_window_extent()
    assert box.y1 <= ax.bbox.y0  # under the panel: it covers no curve
    assert box.width <= ax.bbox.width + 1  # never wider than its panel
    assert legend._ncols == 1
    assert [t.get_text() for t in legend.texts] == [f"the curve of degree {i}" for i in range(4)]
    assert box.y0 >= 0  # the figure grew to hold it


def test_a_shared_y_axis_shows_its_labels_again_once_stacked():
    small = phone_layout(two_panels(sharey=True))
    right = small.axes[1]
    assert right.get_ylabel() == "tokens per second"
    assert right.yaxis.get_tick_params()["labelleft"]


def test_a_label_too_wide_for_its_bar_is_dropped_on_the_phone():
    fig = Figure(figsize=(8.0, 2.0), layout="constrained")
    ax = fig.subplots()
    ax.barh([0], [3], color="C0")
    ax.barh([0], [97], left=[3], color="C1")
    thin = ax.text(1.5, 0, "3 %", ha="center", va="center")
    wide = ax.text(51.5, 0, "97 %", ha="center", va="center")
    ax.set_xlim(0, 100)
    small = phone_layout(fig)
    texts = {t.get_text(): t.get_visible() for t in small.axes[0].texts}
    assert texts == {"3 %": False, "97 %": True}
    assert thin.get_visible() and wide.get_visible()  # the desktop keeps both


def diagram(height):
    fig = Figure(figsize=(PHONE_WIDTH_IN, height), layout="constrained")
    ax = fig.subplots()
    ax.add_patch(Rectangle((0, 0), 10, 2))
    ax.set_xlim(0, 10)
    ax.set_ylim(0, 2)
    ax.set_aspect("equal")
    ax.axis("off")
    return fig


@pytest.mark.parametrize("height", [0.6, 3.0, 6.0])
def test_fit_height_gives_a_diagram_drawn_to_scale_the_whole_width(height):
    fig = fit_height(diagram(height))
    fig.draw_without_rendering()
    drawn, given = fig.axes[0].get_position(), fig.axes[0].get_position(original=True)
    # the diagram fills the box the layout gives it: no narrower strip, no blank band
    assert drawn.width == pytest.approx(given.width, rel=0.02)
    assert drawn.height == pytest.approx(given.height, rel=0.02)
    assert drawn.width > 0.95
    assert fig.get_figheight() == pytest.approx(PHONE_WIDTH_IN / 5, rel=0.1)


def test_fit_height_leaves_plots_alone():
    fig = two_panels()
    assert tuple(fit_height(fig).get_size_inches()) == (8.0, 3.4)


def test_phone_layout_checks_its_arguments():
    with pytest.raises(TypeError, match="Figure"):
        phone_layout("a figure")
    with pytest.raises(ValueError, match="positive"):
        phone_layout(two_panels(), width=-1)
    with pytest.raises(TypeError, match="Figure"):
        fit_height(None)


def test_the_legend_rebuild_keeps_entries_and_anchor():
    # phone._rebuild uses two private steps of matplotlib's Legend (pinned by the constraints):
    # if an upgrade changes them, this fails first.
    fig = two_panels()
    legend = fig.axes[1].get_legend()
    anchor = legend.get_bbox_to_anchor()
    phone._rebuild(legend, 1)
    fig.draw_without_rendering()
    assert legend._ncols == 1
    assert legend.get_bbox_to_anchor() is anchor
    assert len(legend.texts) == 4 and len(legend.legend_handles) == 4
    box, panel = legend.get_window_extent(), fig.axes[1].bbox
    assert panel.x0 - 1 <= box.x0 and box.y1 <= panel.y1 + 1  # still in the upper left corner
