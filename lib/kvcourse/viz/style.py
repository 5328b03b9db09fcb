"""The one look of the book's drawings: the palette, the font size and the pieces every figure
is built from.

The pieces are slots and table cells, block outlines, centred labels, legends and percent
ticks. The hues are Tableau 10's, each with one job across the chapters: blue is the sequence
being followed (and stored tokens), red what a step changed (and external fragmentation), grey
what belongs to somebody else. Every drawing module takes its colours from here, so a figure of
§3 and one of §5 agree on what a colour means.
"""

from __future__ import annotations

from collections.abc import Sequence

from matplotlib.axes import Axes
from matplotlib.colors import to_rgb
from matplotlib.figure import Figure
from matplotlib.legend import Legend
from matplotlib.patches import Patch, Rectangle
from matplotlib.text import Text
from matplotlib.ticker import FuncFormatter

from kvcourse.serving.records import KINDS

#: The text size of every drawing, in points (the book's body text is 11 pt).
FONT_SIZE = 11

# The hues.
BLUE = "#4C78A8"
ORANGE = "#F58518"
RED = "#E45756"
TEAL = "#72B7B2"
GREEN = "#54A24B"
YELLOW = "#EECA3B"
PURPLE = "#B279A2"
PINK = "#FF9DA6"
BROWN = "#9D755D"

#: Outlines and text of whatever the current step wrote, allocated or changed.
CHANGED = RED
CHANGED_TEXT = "#B22222"
#: A request that could not be served (a failed allocation).
FAILED = "#C0392B"
#: The thick outline of a block or a run of slots.
OUTLINE = "0.2"
#: §4: the followed sequence's filled and still-empty slots, and blocks held by other requests.
OURS_FILL = "#C9D9EC"
OURS_EMPTY = "#EEF3F9"
OTHERS = "#BDBDBD"
#: §5: a physical block listed by more than one block table, and the edge of a free block.
SHARED = "#FFE7A8"
FREE_EDGE = "0.6"
#: §5: the steps of a beam search whose token opens a new block.
NEW_BLOCK_SHADE = "#E8F0E0"

#: One colour per kind of KV memory (§3), the same in every figure.
KIND_COLORS: dict[str, str] = {
    "stored": BLUE,
    "reserved": "#9ECAE9",
    "internal": ORANGE,
    "external": RED,
    "free": "#EFEFEF",
}
#: How the legends name the five kinds.
KIND_LABELS: dict[str, str] = {
    "stored": "stored tokens",
    "reserved": "reserved for future tokens",
    "internal": "internal fragmentation",
    "external": "external fragmentation",
    "free": "free",
}
#: The three schemes as the vLLM paper colours them (Orca Max red, Orca Oracle green, vLLM blue).
SCHEME_COLORS: dict[str, str] = {"Max": "#D62728", "Oracle": "#2CA02C", "Paged": "#1F77B4"}
#: Owners of the buddy walk-through's blocks (§3), in order of appearance.
OWNER_COLORS: tuple[str, ...] = (BLUE, TEAL, PURPLE, YELLOW, BROWN, PINK)
#: One colour per sequence of a sharing picture (§5), in order.
SEQUENCE_COLORS: tuple[str, ...] = (BLUE, GREEN, PURPLE, TEAL, BROWN, PINK)
#: The curves of one plot, in order (one per workload).
SERIES_COLORS: tuple[str, ...] = (BLUE, ORANGE, GREEN, PURPLE)

# The sequence colours mixed with white, for the fills of their slots.
_LIGHT_FILLS = {
    BLUE: "#D2DEEC",
    GREEN: "#D4E8D1",
    PURPLE: "#ECDDE8",
    TEAL: "#DCEEED",
    BROWN: "#E9DFD8",
    PINK: "#FFE5E8",
}


def light_fill(color: str) -> str:
    """The pale version of a sequence colour that fills that sequence's slots (light grey for a
    colour outside :data:`SEQUENCE_COLORS`)."""
    return _LIGHT_FILLS.get(color, "#EEEEEE")


def text_color_on(color: str) -> str:
    """Black or white, whichever reads better on a fill of ``color``."""
    r, g, b = to_rgb(color)
    return "black" if 0.299 * r + 0.587 * g + 0.114 * b > 0.6 else "white"


# ---------------------------------------------------------------------------- building blocks


def center_text(
    ax: Axes, x: float, y: float, text: str, *, fontsize: float = FONT_SIZE, **kwargs: object
) -> Text:
    """A label centred on ``(x, y)`` in data units; ``kwargs`` go to ``Axes.text``."""
    return ax.text(x, y, text, ha="center", va="center", fontsize=fontsize, **kwargs)


def slot(
    ax: Axes,
    x: float,
    y: float,
    w: float,
    h: float,
    *,
    fill: str,
    edge: str,
    hatch: str | None = None,
    changed: bool = False,
    text: str | None = None,
    fontsize: float = FONT_SIZE,
) -> Rectangle:
    """One KV slot (or table cell) with its lower left corner at ``(x, y)``: a rectangle filled
    ``fill`` and edged ``edge``, with ``text`` (a token) centred in it when given.

    A slot the current step ``changed`` gets a thick :data:`CHANGED` outline drawn over its
    neighbours, and its text in :data:`CHANGED_TEXT`. Returns the rectangle.
    """
    rect = Rectangle(
        (x, y),
        w,
        h,
        fc=fill,
        ec=CHANGED if changed else edge,
        lw=2.2 if changed else 1.0,
        hatch=hatch,
        zorder=2 if changed else 1,
    )
    ax.add_patch(rect)
    if text is not None:
        center_text(
            ax,
            x + w / 2,
            y + h / 2,
            text,
            fontsize=fontsize,
            color=CHANGED_TEXT if changed else "black",
        )
    return rect


def new_block_outline(ax: Axes, x: float, y: float, w: float, h: float) -> Rectangle:
    """The thick :data:`CHANGED` frame around a whole physical block the step allocated."""
    rect = Rectangle((x, y), w, h, fc="none", ec=CHANGED, lw=2.4, zorder=3)
    ax.add_patch(rect)
    return rect


def finish_diagram(ax: Axes, xlim: tuple[float, float], ylim: tuple[float, float]) -> None:
    """Turn ``ax`` into a diagram: these data limits, equal aspect (a slot is as wide on the page
    as its data width says), no axis lines or ticks."""
    ax.set_xlim(*xlim)
    ax.set_ylim(*ylim)
    ax.set_aspect("equal")
    ax.axis("off")


def despine(ax: Axes, sides: Sequence[str] = ("top", "right")) -> None:
    """Hide the axes' frame on ``sides``, as every plot of the book does."""
    ax.spines[list(sides)].set_visible(False)


def percent_formatter() -> FuncFormatter:
    """Tick labels like 0.1 %, 1 %, 10 % for an axis in percent (log axes included)."""
    return FuncFormatter(lambda v, _pos: f"{v:g} %")


# ---------------------------------------------------------------------------- legends


def legend_below(
    ax: Axes, handles: Sequence[object], *, fontsize: float = FONT_SIZE, ncols: int = 3
) -> Legend:
    """A frameless legend of ``handles`` hanging under a diagram's axes."""
    return ax.legend(
        handles=handles,
        loc="upper center",
        bbox_to_anchor=(0.5, 0.0),
        ncols=ncols,
        frameon=False,
        fontsize=fontsize,
    )


def figure_legend(
    fig: Figure, handles: Sequence[object], *, fontsize: float = FONT_SIZE, ncols: int = 3
) -> Legend:
    """One frameless legend for a whole figure of small multiples, under all its panels."""
    return fig.legend(
        handles=handles, loc="outside lower center", ncols=ncols, frameon=False, fontsize=fontsize
    )


def kind_legend_handles(kinds: Sequence[str] = KINDS) -> list[Patch]:
    """Legend patches for the kinds of KV memory ``kinds`` (default: all five, in
    :data:`~kvcourse.serving.records.KINDS` order), in :data:`KIND_COLORS`."""
    unknown = [k for k in kinds if k not in KIND_COLORS]
    if unknown:
        raise ValueError(f"unknown kinds {unknown}; the kinds are {list(KINDS)}")
    return [Patch(fc=KIND_COLORS[k], ec="0.4", lw=0.6, label=KIND_LABELS[k]) for k in kinds]
