"""Small display helpers the book pages share: computed tables without pandas."""

from __future__ import annotations

import html
from collections.abc import Iterable, Sequence

from IPython.display import HTML, Markdown

__all__ = ["html_table", "markdown_table"]


def markdown_table(header: Sequence[object], rows: Iterable[Sequence[object]]) -> Markdown:
    """A computed table as Markdown, so it renders like the book's hand-written tables.

    Cells may contain inline Markdown (``**6**``); a ``|`` in a cell or header is escaped. Raises
    ``ValueError`` when a row's length differs from the header's.
    """
    header = [str(h).replace("|", r"\|") for h in header]
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for number, row in enumerate(rows):
        cells = [str(c).replace("|", r"\|") for c in row]
        if len(cells) != len(header):
            raise ValueError(
                f"row {number} has {len(cells)} cells but the header has {len(header)}: {row!r}"
            )
        lines.append("| " + " | ".join(cells) + " |")
    return Markdown("\n".join(lines))


def html_table(header: Sequence[object], rows: Iterable[Sequence[object]]) -> HTML:
    """A computed table as escaped HTML with the theme's table style (cells are plain text)."""
    header = list(header)
    head = "".join(f"<th>{html.escape(str(h))}</th>" for h in header)
    body = []
    for number, row in enumerate(rows):
        if len(row) != len(header):
            raise ValueError(
                f"row {number} has {len(row)} cells but the header has {len(header)}: {row!r}"
            )
        body.append("<tr>" + "".join(f"<td>{html.escape(str(c))}</td>" for c in row) + "</tr>")
    return HTML(
        f'<table class="table"><thead><tr>{head}</tr></thead><tbody>{"".join(body)}</tbody></table>'
    )
