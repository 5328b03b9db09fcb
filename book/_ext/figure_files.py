"""A Sphinx extension that stores the book's figures as image files instead of inside the pages.

Each figure a page glues with ``kvcourse.viz.book_figure`` arrives as HTML: a ``<picture
class="kv-figure">`` whose desktop and phone renderings are SVG data URIs, so the output works in
any notebook too. Left inline, every page would carry all of its figures twice over in its HTML,
and a phone would download the desktop renderings it never shows. This extension writes each
rendering to ``_images/<sha256>.svg`` (as Sphinx names image files) and points the picture at it;
the browser then fetches only the rendering its window width selects.
"""

from __future__ import annotations

import base64
import hashlib
import re
from pathlib import Path

from docutils import nodes

#: A base64 SVG data URI inside the book's figure pictures.
DATA_URI = re.compile(r"data:image/svg\+xml;base64,([A-Za-z0-9+/=]+)")
MARKER = 'class="kv-figure"'


def _write_image(outdir: Path, encoded: str) -> str:
    """Write one data URI's SVG under ``_images/``; return its path relative to the output."""
    data = base64.b64decode(encoded)
    name = f"_images/{hashlib.sha256(data).hexdigest()}.svg"
    target = outdir / name
    if not target.exists():
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data)
    return name


def store_figure_files(app, doctree, docname: str) -> None:
    """Replace the SVG data URIs of this page's figure pictures by files."""
    if app.builder.format != "html":
        return
    outdir = Path(app.outdir)
    up = "../" * docname.count("/")  # from the page's folder back to the output root
    for node in list(doctree.findall(nodes.raw)):
        text = node.astext()
        if MARKER not in text or "html" not in node.get("format", "").split():
            continue
        linked = DATA_URI.sub(lambda m: up + _write_image(outdir, m[1]), text)
        replacement = nodes.raw("", linked, format=node["format"])
        replacement["classes"] = list(node.get("classes", []))
        node.replace_self(replacement)


def setup(app):
    app.connect("doctree-resolved", store_figure_files)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
