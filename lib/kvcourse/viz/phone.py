"""The phone rendering of a figure: drawn for the text column of a phone 390 px wide, so that the
whole figure shows there with its text at least 9 px high.

A phone shows the book in a column about :data:`PHONE_COLUMN_PX` CSS pixels wide. A figure drawn
8 inches wide and shrunk into that column shows its 11 pt labels at 6 or 7 px, and its
side-by-side panels become strips. A phone rendering is :data:`PHONE_WIDTH_IN` wide with no text
under :data:`PHONE_MIN_FONT_PT`, about 9.5 px when shown across the column.

* :func:`phone_layout` derives the phone rendering of a plot by itself: a copy of the figure,
  narrowed, its side-by-side panels stacked, its text resized by :func:`phone_font_size`, its
  legends re-flowed into the columns that fit (a legend inside a panel hangs under it) and its
  too-long titles broken into lines;
* a diagram drawn to scale with text in its boxes cannot simply be narrowed: its drawing
  function takes ``phone=True`` and lays itself out for the column, on a :func:`phone_figure`;
* :func:`fit_height` gives a figure of diagrams drawn to scale the height at which they fill
  its width.

:mod:`kvcourse.viz.figure_pair` shows the two renderings together.
"""

from __future__ import annotations

import copy
import textwrap
import warnings

from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.gridspec import GridSpec
from matplotlib.legend import Legend
from matplotlib.patches import Rectangle
from matplotlib.text import Text
from matplotlib.transforms import ScaledTranslation

__all__ = [
    "MIN_TEXT_PX",
    "PHONE_COLUMN_PX",
    "PHONE_MIN_FONT_PT",
    "PHONE_WIDTH_IN",
    "fit_height",
    "phone_figure",
    "phone_font_size",
    "phone_layout",
]

#: The width of the book's text column on a phone 390 CSS px wide (measured in Chromium: the
#: theme's padding taken off).
PHONE_COLUMN_PX = 342
#: The smallest text a reader should get, in CSS pixels, on that phone.
MIN_TEXT_PX = 9.0
#: How wide a phone rendering is drawn, in inches: shown across the column, 1 pt of its text is
#: then about 1 CSS px.
PHONE_WIDTH_IN = 4.6
#: No text of a phone rendering is smaller than this (in points): about 9.5 px in the column.
PHONE_MIN_FONT_PT = 9.5
#: How much smaller than on the desktop a phone rendering's text is drawn, before the floor.
PHONE_FONT_SCALE = 0.9


def phone_font_size(size: float) -> float:
    """The size (points) a desktop text of ``size`` points gets in a phone rendering: a little
    smaller, never under :data:`PHONE_MIN_FONT_PT`."""
    return max(PHONE_MIN_FONT_PT, round(size * PHONE_FONT_SCALE, 1))


def phone_figure(height: float = 3.0) -> Figure:
    """An empty figure for a phone rendering: :data:`PHONE_WIDTH_IN` wide, ``height`` inches
    high (:func:`~kvcourse.viz.figure_pair.book_figure` fits the height to a diagram drawn to
    scale), with constrained layout."""
    if not height > 0:
        raise ValueError(f"height must be a positive number of inches, got {height!r}")
    return Figure(figsize=(PHONE_WIDTH_IN, height), layout="constrained")


def fit_height(fig: Figure, *, rounds: int = 4) -> Figure:
    """Give ``fig`` the height at which its diagrams drawn to scale (equal-aspect axes) take the
    full width its layout gives them, with no blank band above or below: too short a figure
    shrinks a diagram, text and all, into a narrower strip. Returns ``fig``, resized in place; a
    figure without such axes is left as it is."""
    if not isinstance(fig, Figure):
        raise TypeError(f"expected a matplotlib Figure, got {type(fig).__name__}")
    diagrams = [ax for ax in fig.axes if ax.get_visible() and ax.get_aspect() == 1.0]
    for _ in range(rounds if diagrams else 0):
        fig.draw_without_rendering()
        width, height = fig.get_size_inches()
        rows: dict[float, float] = {}  # the height each row of diagrams lacks (inches)
        for ax in diagrams:
            box = ax.get_position(original=True)
            lack = box.width * width * ax.get_data_ratio() - box.height * height
            key = round(box.y0, 2)
            rows[key] = max(rows.get(key, lack), lack)
        change = sum(rows.values())
        if abs(change) < 0.03:  # a fiftieth of an inch: two pixels on a phone
            break
        fig.set_size_inches(width, max(0.5, height + change))
    return fig


def phone_layout(fig: Figure, *, width: float = PHONE_WIDTH_IN) -> Figure:
    """A phone rendering of a plot: a copy of ``fig`` ``width`` inches wide whose side-by-side
    panels are stacked top to bottom (in reading order), whose text is resized by
    :func:`phone_font_size`, whose legends take as many columns as fit, and whose titles and
    notes too wide for it are broken into lines. ``fig`` is unchanged.

    Meant for plots, whose axes stretch to the new width; a diagram drawn to scale with text in its
    boxes needs its own phone layout (its figure function's ``phone=True``).
    """
    if not isinstance(fig, Figure):
        raise TypeError(f"expected a matplotlib Figure, got {type(fig).__name__}")
    if not width > 0:
        raise ValueError(f"width must be a positive number of inches, got {width!r}")
    phone = copy.deepcopy(fig)
    old_w, old_h = fig.get_size_inches()
    height = _stack_panels(phone, old_w, old_h, width)
    phone.set_size_inches(width, height)
    _resize_text(phone)
    # A text's or a legend's own width does not depend on where the layout puts it, so both are
    # measured on drafts whose layout may still be squeezed by them (hence the quiet warnings).
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        _reflow_legends(phone, width)
        _wrap_long_texts(phone)
        fit_height(phone)
        _drop_labels_wider_than_their_bar(phone)
    return phone


def _stack_panels(fig: Figure, old_w: float, old_h: float, width: float) -> float:
    """Move the panels of ``fig``'s grid into one column; return the new figure height."""
    axes = [ax for ax in fig.axes if ax.get_subplotspec() is not None]
    grids = {id(_top_spec(ax).get_gridspec()) for ax in axes}
    if not axes or len(grids) != 1:
        return old_h
    grid = _top_spec(axes[0]).get_gridspec()
    nrows, ncols = grid.get_geometry()
    if ncols == 1:
        return old_h
    heights, widths = grid.get_height_ratios(), grid.get_width_ratios()
    heights = heights or [1.0] * nrows
    widths = widths or [1.0] * ncols
    # the rows share the figure's height with what is outside the grid (titles, a legend)
    outside = 0.6 if fig.legends or fig.get_suptitle() else 0.25
    grid_h = max(old_h - outside, 0.5 * old_h)
    cells = sorted({_cell(ax) for ax in axes}, key=lambda c: (c[0].start, c[1].start))
    new_heights = []
    for rows, cols in cells:
        panel_w = old_w * sum(widths[c] for c in cols) / sum(widths)
        panel_h = grid_h * sum(heights[r] for r in rows) / sum(heights)
        new_heights.append(_panel_height(panel_w, panel_h, width))
    stacked = GridSpec(len(cells), 1, figure=fig, height_ratios=new_heights)
    for ax in axes:
        ax.set_subplotspec(stacked[cells.index(_cell(ax)), 0])
        _show_shared_labels(ax)
    return sum(new_heights) + (old_h - grid_h)


def _top_spec(ax: Axes):
    return ax.get_subplotspec().get_topmost_subplotspec()


def _cell(ax: Axes) -> tuple[range, range]:
    spec = _top_spec(ax)
    return (spec.rowspan, spec.colspan)


def _panel_height(panel_w: float, panel_h: float, width: float) -> float:
    """The height (inches) of a panel ``panel_w`` by ``panel_h`` inches once stacked in a figure
    ``width`` wide: its shape kept as far as a phone screen allows, neither a thin strip nor
    taller than two thirds of its width."""
    return min(max(panel_h * width / panel_w, 2.2), max(2.2, 0.66 * width), panel_h * 1.2)


def _show_shared_labels(ax: Axes) -> None:
    """A panel that shared its y axis with its left neighbour hid its tick labels and y label;
    stacked, it shows them again."""
    siblings = ax.get_shared_y_axes().get_siblings(ax)
    if len(siblings) > 1:
        ax.yaxis.set_tick_params(which="both", labelleft=True)
        if not ax.get_ylabel():
            ax.set_ylabel(next((s.get_ylabel() for s in siblings if s.get_ylabel()), ""))


def _resize_text(fig: Figure) -> None:
    """Every text of ``fig`` at :func:`phone_font_size` of its size, tick labels included."""
    for ax in fig.axes:
        for axis, name in ((ax.xaxis, "x"), (ax.yaxis, "y")):
            for which in ("major", "minor"):
                ticks = axis.get_major_ticks() if which == "major" else axis.get_minor_ticks()
                if ticks:
                    size = ticks[0].label1.get_fontsize()
                    ax.tick_params(axis=name, which=which, labelsize=phone_font_size(size))
    for text in fig.findobj(Text):
        text.set_fontsize(phone_font_size(text.get_fontsize()))
    for leg in fig.findobj(Legend):
        leg.prop.set_size(phone_font_size(leg.prop.get_size_in_points()))


def _wrap_long_texts(fig: Figure) -> None:
    """Break the lines of horizontal texts (titles, labels, notes) wider than most of the figure.
    A text's width does not depend on where the layout puts it: no drawing is needed."""
    renderer, room = fig._get_renderer(), 0.85 * fig.bbox.width
    for text in fig.findobj(Text):
        if not text.get_visible() or text.get_rotation() % 180 or " " not in text.get_text():
            continue
        wide = text.get_window_extent(renderer).width
        if wide > room:
            lines = text.get_text().split("\n")
            chars = max(len(line) for line in lines) * room / wide
            text.set_text("\n".join(textwrap.fill(line, max(12, int(chars))) for line in lines))


def _drop_labels_wider_than_their_bar(fig: Figure) -> None:
    """Hide a plot's label centred in a bar that has become too narrow for it (a value written
    in a thin segment of a stacked bar): narrowed, it would spill over its neighbours."""
    plots = [ax for ax in fig.axes if ax.axison and ax.texts and ax.patches]  # not diagrams
    if not plots:
        return
    fig.draw_without_rendering()
    renderer = fig._get_renderer()
    for ax in plots:
        bars = [p.get_window_extent(renderer) for p in ax.patches if isinstance(p, Rectangle)]
        for text in ax.texts:
            if text.get_ha() != "center" or not text.get_visible():
                continue
            box = text.get_window_extent(renderer)
            x, y = (box.x0 + box.x1) / 2, (box.y0 + box.y1) / 2
            holders = [b for b in bars if b.x0 <= x <= b.x1 and b.y0 <= y <= b.y1]
            if holders and box.width > min(b.width for b in holders) - 2:
                text.set_visible(False)


def _reflow_legends(fig: Figure, width: float) -> None:
    """Each legend in as many columns as fit, its entries in order. A legend inside a plot's
    panel moves under the panel (below its x axis), where it covers no data in a narrow plot; a
    diagram's legend becomes the figure's, at the bottom. The figure grows by what the legends
    added to its height."""
    legends = list(fig.findobj(Legend))
    if not legends:
        return
    renderer = fig._get_renderer()
    grown, hung = 0.0, []
    for leg in legends:
        # Where it is: in its panel, hanging from a point under it, or elsewhere (the figure's).
        # Its anchor says so, wherever the layout will put the panel.
        ax, box = leg.parent, leg.get_window_extent(renderer)
        inside = isinstance(ax, Axes) and leg.get_bbox_to_anchor() is ax.bbox
        under = isinstance(ax, Axes) and leg.get_bbox_to_anchor().y1 <= ax.bbox.y0 + 1
        if (inside or under) and not ax.axison:
            leg = _to_figure_legend(leg)
        elif inside or under:
            hung.append(leg)
        # A panel's legend must not be wider than the panel (the layout would narrow the panel
        # to make room for it), and a plot's panel leaves room for its y axis. A legend's own
        # size does not depend on where it is: measured without drawing the figure.
        margin = 0.75 if isinstance(leg.parent, Axes) and ax.yaxis.get_visible() else 0.0
        room = (0.96 * width - margin) * fig.dpi
        ncols = leg._ncols
        while True:
            _rebuild(leg, ncols)
            if ncols == 1 or leg.get_window_extent(renderer).width <= room:
                break
            ncols -= 1
        after = leg.get_window_extent(renderer).height
        grown += max(0.0, after - (0.0 if inside else box.height)) / fig.dpi
    if grown:
        w, h = fig.get_size_inches()
        fig.set_size_inches(w, h + grown + 0.08 * len(hung))
    if hung:  # hang them now that the panels have their final size
        fig.draw_without_rendering()
        for leg in hung:
            _hang_under(leg, renderer)


def _to_figure_legend(leg: Legend) -> Legend:
    """The same legend made the figure's, under everything (a legend hanging from a diagram's
    axes that is wider than the diagram would make the layout shrink the diagram)."""
    fig = leg.figure
    moved = fig.legend(
        handles=list(leg.legend_handles),
        labels=[t.get_text() for t in leg.texts],
        loc="outside lower center",
        ncols=leg._ncols,
        frameon=leg.get_frame_on(),
        fontsize=leg.prop.get_size_in_points(),
    )
    leg.remove()
    return moved


def _hang_under(leg: Legend, renderer) -> None:
    """Anchor ``leg`` by its top centre just under its panel's x tick labels and label (how far
    they reach under the panel does not depend on where the layout puts it)."""
    ax, fig = leg.parent, leg.figure
    below = _below_axes(ax, renderer) / fig.dpi  # inches
    leg.set_bbox_to_anchor(
        (0.5, 0.0), transform=ax.transAxes + ScaledTranslation(0, -below, fig.dpi_scale_trans)
    )
    leg._loc_real = 9  # "upper center": hanging from that point
    leg.borderaxespad = 0.3


def _below_axes(ax: Axes, renderer) -> float:
    """How far (display units) the x axis's drawn tick labels and label reach under ``ax``."""
    texts = [t for t in ax.get_xticklabels() if t.get_visible() and t.get_text()]
    texts += [ax.xaxis.label] if ax.xaxis.label.get_text() else []
    reach = [ax.bbox.y0 - t.get_window_extent(renderer).y0 for t in texts]
    return max([0.0, *reach])


def _rebuild(leg: Legend, ncols: int) -> None:
    """Lay ``leg`` out again in ``ncols`` columns at its font size. Matplotlib lays a legend out
    once, when it is made: this repeats that step and puts it back where it was anchored (private
    steps of matplotlib's Legend, pinned by ``requirements/constraints.txt`` and tested)."""
    handles = list(leg.legend_handles)
    labels = [t.get_text() for t in leg.texts]
    leg._fontsize = leg.prop.get_size_in_points()  # paddings and spacings are in font sizes
    leg.set_ncols(ncols)
    leg._init_legend_box(handles, labels, markerfirst=True)
    leg._set_loc(leg._get_loc())
