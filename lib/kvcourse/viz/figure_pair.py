"""Every figure of the book in two renderings, the desktop one and one for a phone, shown together
so that each reader gets the one drawn for their window.

:func:`book_figure` pairs a desktop figure with its phone rendering
(:mod:`kvcourse.viz.phone`) and renders both to SVG at once. Glued on a page
(``glue(name, book_figure(fig), display=False)``), the pair shows as one ``<picture>``: the
browser takes the phone rendering in windows :data:`PHONE_MEDIA` and the desktop one otherwise,
and the caption stays under it. Each rendering states in ``data-min-text-px`` the size of its
smallest text, in CSS pixels at the image's natural width, so the browser tests check the size a
reader actually gets; :class:`BookFigure` refuses a phone rendering whose text would be under
9 px in the phone column.
"""

from __future__ import annotations

import base64
import html
import math
import re
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

from IPython.core.pylabtools import print_figure
from matplotlib.backends.backend_svg import RendererSVG
from matplotlib.figure import Figure

from kvcourse.viz.phone import MIN_TEXT_PX, PHONE_COLUMN_PX, fit_height, phone_layout

__all__ = ["PHONE_MEDIA", "BookFigure", "book_figure", "render_svg", "shown_text_px", "svg_size_pt"]

#: The windows that get the phone rendering: up to 720 px, where the text column is too narrow
#: for the desktop renderings' smallest labels to stay at 9 px (the stylesheet,
#: ``_static/course.css``, uses the same width).
PHONE_MEDIA = "(max-width: 720px)"

_SVG_SIZE = re.compile(r'<svg[^>]*?\swidth="([\d.]+)pt"[^>]*?\sheight="([\d.]+)pt"')


@contextmanager
def _recording_text_sizes(sizes: list[float]) -> Iterator[None]:
    """While active, every text the SVG renderer draws adds its size in points to ``sizes``."""
    original = RendererSVG.draw_text

    def draw_text(self, gc, x, y, s, prop, angle, ismath=False, mtext=None):
        if s.strip():
            sizes.append(prop.get_size_in_points())
        return original(self, gc, x, y, s, prop, angle, ismath=ismath, mtext=mtext)

    RendererSVG.draw_text = draw_text
    try:
        yield
    finally:
        RendererSVG.draw_text = original


def render_svg(fig: Figure) -> tuple[str, float]:
    """``fig`` as the SVG a notebook shows it (IPython's inline rendering, cropped to what is
    drawn), and the size in points of the smallest text drawn in it (``inf`` when none)."""
    if not isinstance(fig, Figure):
        raise TypeError(f"expected a matplotlib Figure, got {type(fig).__name__}")
    sizes: list[float] = []
    with _recording_text_sizes(sizes):
        svg = print_figure(fig, "svg")
    if svg is None:
        raise ValueError("the figure is empty (no axes): nothing to show")
    return svg, min(sizes, default=math.inf)


def svg_size_pt(svg: str) -> tuple[float, float]:
    """The width and height of an SVG drawn by matplotlib, in points."""
    found = _SVG_SIZE.search(svg)
    if not found:
        raise ValueError("not an SVG with its width and height in points")
    return float(found[1]), float(found[2])


def shown_text_px(min_font_pt: float, svg_width_pt: float, shown_px: float) -> float:
    """How many CSS pixels high text of ``min_font_pt`` points is when an SVG ``svg_width_pt``
    points wide is shown ``shown_px`` CSS pixels wide (a point is 4/3 px at natural size)."""
    return min_font_pt * shown_px / svg_width_pt


# ---------------------------------------------------------------------------- the pair


@dataclass
class BookFigure:
    """A figure of the book in its desktop and phone renderings, rendered once when made.

    In a notebook or a page it displays as HTML: one ``<picture>`` whose phone source the browser
    takes in windows :data:`PHONE_MEDIA`; its plain SVG is the desktop rendering. Raises
    ``ValueError`` when the phone rendering's smallest text would be under :data:`MIN_TEXT_PX`
    in the phone column.
    """

    desktop: Figure
    phone: Figure
    alt: str = ""
    desktop_svg: str = field(init=False, repr=False)
    phone_svg: str = field(init=False, repr=False)
    desktop_min_font_pt: float = field(init=False)
    phone_min_font_pt: float = field(init=False)

    def __post_init__(self) -> None:
        self.desktop_svg, self.desktop_min_font_pt = render_svg(self.desktop)
        self.phone_svg, self.phone_min_font_pt = render_svg(self.phone)
        shown = self.phone_text_px
        if shown < MIN_TEXT_PX:
            width = svg_size_pt(self.phone_svg)[0]
            raise ValueError(
                f"the phone rendering's smallest text ({self.phone_min_font_pt:g} pt in an image "
                f"{width:.0f} pt wide) would be {shown:.1f} px in a {PHONE_COLUMN_PX} px column, "
                f"under {MIN_TEXT_PX:g} px: draw it narrower or its text larger"
            )

    @property
    def phone_text_px(self) -> float:
        """The phone rendering's smallest text, in CSS px, shown across the phone column."""
        width = svg_size_pt(self.phone_svg)[0]
        return shown_text_px(self.phone_min_font_pt, width, PHONE_COLUMN_PX)

    def html(self) -> str:
        """The ``<picture>`` that shows the phone rendering in narrow windows, else the desktop
        one; the images are data URIs (the book's ``figure_files`` extension turns them into
        files)."""
        phone_w, phone_h = svg_size_pt(self.phone_svg)
        desk_w, desk_h = svg_size_pt(self.desktop_svg)
        return (
            '<picture class="kv-figure">'
            f'<source media="{PHONE_MEDIA}" srcset="{_data_uri(self.phone_svg)}" '
            f'width="{_px(phone_w)}" height="{_px(phone_h)}" '
            f'data-min-text-px="{_text_px(self.phone_min_font_pt)}">'
            f'<img src="{_data_uri(self.desktop_svg)}" alt="{html.escape(self.alt)}" '
            f'width="{_px(desk_w)}" height="{_px(desk_h)}" '
            f'data-min-text-px="{_text_px(self.desktop_min_font_pt)}">'
            "</picture>"
        )

    def _repr_mimebundle_(self, include=None, exclude=None) -> dict[str, str]:
        return {
            "text/html": self.html(),
            "image/svg+xml": self.desktop_svg,
            "text/plain": repr(self),
        }

    def __repr__(self) -> str:
        d, p = self.desktop.get_size_inches(), self.phone.get_size_inches()
        return (
            f"<BookFigure: desktop {d[0]:g} × {d[1]:g} in, phone {p[0]:g} × {p[1]:g} in, "
            f"phone text ≥ {self.phone_text_px:.1f} px>"
        )


def _data_uri(svg: str) -> str:
    return "data:image/svg+xml;base64," + base64.b64encode(svg.encode("utf-8")).decode("ascii")


def _px(points: float) -> int:
    return round(points * 4 / 3)


def _text_px(points: float) -> str:
    return f"{points * 4 / 3:.2f}" if math.isfinite(points) else "0"


def book_figure(desktop: Figure, phone: Figure | None = None, *, alt: str = "") -> BookFigure:
    """The book's figure: ``desktop`` as drawn, and its phone rendering: ``phone`` (drawn with
    ``phone=True``; its height is fitted by :func:`~kvcourse.viz.phone.fit_height`) or,
    when None, :func:`~kvcourse.viz.phone.phone_layout` of ``desktop``. ``alt`` is the
    image's text for readers who cannot see it (the caption under it says the rest)."""
    if not isinstance(desktop, Figure):
        raise TypeError(f"desktop must be a matplotlib Figure, got {type(desktop).__name__}")
    if phone is not None and not isinstance(phone, Figure):
        raise TypeError(f"phone must be a matplotlib Figure or None, got {type(phone).__name__}")
    phone = phone_layout(desktop) if phone is None else fit_height(phone)
    return BookFigure(desktop, phone, alt=alt)
