"""A Sphinx extension that stores the book's figures as image files instead of inside the pages.

Each figure a page glues with ``kvcourse.viz.book_figure`` arrives as HTML: a ``<picture
class="kv-figure">`` whose desktop and phone renderings are SVG data URIs, so the output works in
any notebook too. Left inline, every page would carry all of its figures twice over in its HTML,
and a phone would download the desktop renderings it never shows. This extension writes each
rendering to ``_images/<sha256>.svg`` (as Sphinx names image files) and points the picture at it;
the browser then fetches only the rendering its window width selects.

A figure with a caption also gets **alt text** where the picture has none: the caption's first
sentence, in the edition's language (the Chinese edition's caption is translated by then), so a
screen reader or a search engine reads what the figure shows.
"""

from __future__ import annotations

import base64
import hashlib
import html
import re
from pathlib import Path

from docutils import nodes

#: A base64 SVG data URI inside the book's figure pictures.
DATA_URI = re.compile(r"data:image/svg\+xml;base64,([A-Za-z0-9+/=]+)")
MARKER = 'class="kv-figure"'
EMPTY_ALT = 'alt=""'
#: A caption's first sentence: up to the first full stop that ends a word (not "Fig. 3"'s).
FIRST_SENTENCE = re.compile(r"^(.+?(?:[。！？]|(?<![A-Z][a-z])(?<!\bFig)(?<!\be\.g)\.(?=\s|$)))")
ALT_CHARS = 250


def _write_image(outdir: Path, encoded: str) -> str:
    """Write one data URI's SVG under ``_images/``; return its path relative to the output."""
    data = base64.b64decode(encoded)
    name = f"_images/{hashlib.sha256(data).hexdigest()}.svg"
    target = outdir / name
    if not target.exists():
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data)
    return name


def caption_alt(node: nodes.Node) -> str:
    """The alt text for a figure picture: the first sentence of the caption of the figure that
    holds ``node``, or "" where it has none."""
    parent = node.parent
    while parent is not None and not isinstance(parent, nodes.figure):
        parent = parent.parent
    if parent is None:
        return ""
    caption = next(iter(parent.findall(nodes.caption)), None)
    if caption is None:
        return ""
    text = " ".join(caption.astext().split())
    found = FIRST_SENTENCE.match(text)
    sentence = found.group(1) if found else text
    if len(sentence) > ALT_CHARS:
        sentence = sentence[: ALT_CHARS - 1].rstrip() + "…"
    return sentence


def store_figure_files(app, doctree, docname: str) -> None:
    """Replace the SVG data URIs of this page's figure pictures by files, and give a captioned
    figure's picture its alt text."""
    if app.builder.format != "html":
        return
    outdir = Path(app.outdir)
    up = "../" * docname.count("/")  # from the page's folder back to the output root
    for node in list(doctree.findall(nodes.raw)):
        text = node.astext()
        if MARKER not in text or "html" not in node.get("format", "").split():
            continue
        linked = DATA_URI.sub(lambda m: up + _write_image(outdir, m[1]), text)
        alt = caption_alt(node)
        if alt and EMPTY_ALT in linked:
            linked = linked.replace(EMPTY_ALT, f'alt="{html.escape(alt)}"', 1)
        replacement = nodes.raw("", linked, format=node["format"])
        replacement["classes"] = list(node.get("classes", []))
        node.replace_self(replacement)


def setup(app):
    app.connect("doctree-resolved", store_figure_files)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
