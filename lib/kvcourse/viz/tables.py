"""Small display helpers the book pages share: computed tables without pandas, and §7's table of
latency against request rate (:func:`latency_table`)."""

from __future__ import annotations

import html
import math
from collections.abc import Iterable, Mapping, Sequence

from IPython.display import HTML, Markdown

from kvcourse.viz.latency import _STAT_WORDS, LatencyCurve

__all__ = ["html_table", "latency_table", "markdown_table"]


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


def latency_table(curves: Mapping[str, LatencyCurve]) -> Markdown:
    """Latency against request rate as a table, each value beside the rate it belongs to.

    One row per rate any scheme was swept at (req/s), one column per scheme with its latency
    statistic at that rate in ms per output token ("–" where that scheme was not swept; "n/a"
    where no request finished), and under the table a line naming the statistic and giving each
    scheme's highest sustainable rate at the curves' target. ``curves`` comes from
    :func:`~kvcourse.viz.latency_curves`. Raises ``ValueError`` for no curves, or for curves of
    different statistics or targets.
    """
    if not isinstance(curves, Mapping) or not curves:
        raise ValueError("curves must be a non-empty dict of LatencyCurve, from latency_curves()")
    if not all(isinstance(c, LatencyCurve) for c in curves.values()):
        raise TypeError("curves must hold only LatencyCurve values, from latency_curves()")
    kinds = {(c.statistic, c.target_s) for c in curves.values()}
    if len(kinds) > 1:
        raise ValueError(f"the curves must share one statistic and target, got {sorted(kinds)}")
    statistic, target_s = kinds.pop()
    rates = sorted({r for c in curves.values() for r in c.rates})
    rows = []
    for rate in rates:
        row = [f"{rate:g}"]
        for c in curves.values():
            if rate not in c.rates:
                row.append("–")
                continue
            latency = c.latency_s[c.rates.index(rate)]
            row.append(f"{1e3 * latency:,.0f}" if math.isfinite(latency) else "n/a")
        rows.append(row)
    header = ["rate (req/s)"] + [f"{name} (ms/token)" for name in curves]
    tops = ", ".join(f"{name} {c.max_rate:.2f}" for name, c in curves.items())
    note = (
        f"{_STAT_WORDS[statistic].capitalize()} normalized latency, ms per output token; "
        f"–: not swept. Highest rate at ≤ {1e3 * target_s:g} ms/token (interpolated): "
        f"{tops} req/s."
    )
    return Markdown(markdown_table(header, rows).data + "\n\n" + note)
