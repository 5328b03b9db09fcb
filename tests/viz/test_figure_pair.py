"""The book's figures as a pair of renderings: the desktop SVG exactly as a notebook shows it, a
phone SVG whose text stays readable, and the HTML picture that holds both."""

import base64
import re
from pathlib import Path

import pytest
from IPython.core.pylabtools import print_figure
from matplotlib.figure import Figure

from kvcourse.viz import BookFigure, book_figure, phone_figure
from kvcourse.viz.figure_pair import PHONE_MEDIA, render_svg, shown_text_px, svg_size_pt
from kvcourse.viz.phone import MIN_TEXT_PX, PHONE_COLUMN_PX, PHONE_MIN_FONT_PT, PHONE_WIDTH_IN


def plot(width=8.0, fontsize=11):
    fig = Figure(figsize=(width, 3.0), layout="constrained")
    ax = fig.subplots()
    ax.plot([0, 1, 2], [1, 3, 2], label="requests")
    ax.set_xlabel("time (s)", fontsize=fontsize)
    ax.tick_params(labelsize=fontsize)
    ax.legend(fontsize=fontsize)
    return fig


def without_ids(svg):
    """An SVG without its date and the random ids matplotlib gives clip paths and markers."""
    svg = re.sub(r"<dc:date>.*?</dc:date>", "", svg)
    return re.sub(r'(id="|#)[a-z]?[0-9a-f]{8,}', r"\1ID", svg)


def test_the_desktop_rendering_is_what_a_notebook_showed_before():
    # The desktop figure must look exactly as it did: the same IPython rendering as the inline
    # backend's (cropped to what is drawn), of a figure nobody drew before.
    ours, twin = plot(), plot()
    pair = book_figure(ours)
    assert without_ids(pair.desktop_svg) == without_ids(print_figure(twin, "svg"))


def test_render_svg_reports_the_smallest_text_drawn():
    fig = plot(fontsize=12)
    fig.axes[0].set_title("small", fontsize=7.5)
    fig.axes[0].text(0.5, 0.5, "   ", fontsize=3)  # blank text is not text
    svg, smallest = render_svg(fig)
    assert smallest == 7.5
    assert svg_size_pt(svg)[0] == pytest.approx(8.0 * 72, rel=0.05)
    with pytest.raises(ValueError, match="empty"):
        render_svg(Figure())
    with pytest.raises(TypeError, match="Figure"):
        render_svg("fig")


def test_shown_text_px():
    # A 9.5 pt text in an image 340 pt wide shown 342 px wide: 9.5 × 342 / 340 px.
    assert shown_text_px(9.5, 340, 342) == pytest.approx(9.556, abs=0.001)
    assert shown_text_px(11, 576, 342) < MIN_TEXT_PX  # an 8-inch figure squeezed into a phone


def test_a_pair_keeps_the_phone_text_at_9_px_in_the_column():
    pair = book_figure(plot())
    assert isinstance(pair, BookFigure)
    assert pair.phone.get_figwidth() == PHONE_WIDTH_IN
    assert pair.phone_min_font_pt >= PHONE_MIN_FONT_PT
    assert pair.phone_text_px >= MIN_TEXT_PX
    width = svg_size_pt(pair.phone_svg)[0]
    assert shown_text_px(pair.phone_min_font_pt, width, PHONE_COLUMN_PX) == pair.phone_text_px


def test_a_phone_rendering_with_small_text_is_refused():
    tiny = plot(width=8.0, fontsize=8)  # drawn for the desktop, passed as the phone's
    with pytest.raises(ValueError, match="px in a 342 px column"):
        book_figure(plot(), tiny)


def test_an_explicit_phone_figure_gets_its_height_fitted():
    phone = phone_figure(9.0)
    ax = phone.subplots()
    ax.plot([0, 1], [0, 1])
    ax.set_xlim(0, 10)
    ax.set_ylim(0, 2)
    ax.set_aspect("equal")
    ax.set_title("a diagram", fontsize=10)
    ax.axis("off")
    pair = book_figure(plot(), phone)
    assert pair.phone is phone
    assert phone.get_figheight() < 2.0  # a 5:1 diagram needs no 9 inches


def test_the_html_is_a_picture_with_both_renderings():
    pair = book_figure(plot(), alt='a "plot"')
    html = pair.html()
    assert html.startswith('<picture class="kv-figure">') and html.endswith("</picture>")
    source = re.search(r"<source ([^>]*)>", html)[1]
    img = re.search(r"<img ([^>]*)>", html)[1]
    assert f'media="{PHONE_MEDIA}"' in source
    assert 'alt="a &quot;plot&quot;"' in img

    def decoded(attrs, name):
        uri = re.search(rf'{name}="data:image/svg\+xml;base64,([^"]+)"', attrs)[1]
        return base64.b64decode(uri).decode()

    assert decoded(source, "srcset") == pair.phone_svg
    assert decoded(img, "src") == pair.desktop_svg
    phone_px = float(re.search(r'data-min-text-px="([\d.]+)"', source)[1])
    desktop_px = float(re.search(r'data-min-text-px="([\d.]+)"', img)[1])
    assert phone_px == pytest.approx(pair.phone_min_font_pt * 4 / 3, abs=0.01)
    assert desktop_px == pytest.approx(11 * 4 / 3, abs=0.01)
    width = int(re.search(r'width="(\d+)"', img)[1])
    assert width == round(svg_size_pt(pair.desktop_svg)[0] * 4 / 3)


def test_the_mimebundle_puts_html_first_and_keeps_the_desktop_svg():
    pair = book_figure(plot())
    bundle = pair._repr_mimebundle_()
    assert set(bundle) == {"text/html", "image/svg+xml", "text/plain"}
    assert bundle["image/svg+xml"] == pair.desktop_svg
    assert "phone text" in bundle["text/plain"]


def test_book_figure_checks_its_arguments():
    with pytest.raises(TypeError, match="desktop"):
        book_figure("figure")
    with pytest.raises(TypeError, match="phone"):
        book_figure(plot(), "figure")


def test_the_stylesheet_switches_at_the_same_width():
    css = (Path(__file__).resolve().parents[2] / "_static" / "course.css").read_text()
    assert f"@media {PHONE_MEDIA}" in css
