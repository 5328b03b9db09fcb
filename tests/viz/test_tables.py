"""The page helpers render the tables the book shows, §7's latency table among them."""

import math

import pytest

from kvcourse.viz import LatencyCurve, html_table, latency_table, markdown_table


def test_markdown_table_renders_rows_and_escapes_pipes():
    table = markdown_table(["model", "KV per token"], [["OPT-13B", "819,200 B"], ["a|b", 1]])
    assert table.data.splitlines() == [
        "| model | KV per token |",
        "|---|---|",
        "| OPT-13B | 819,200 B |",
        r"| a\|b | 1 |",
    ]


def test_markdown_table_escapes_pipes_in_the_header():
    table = markdown_table(["max |Δ|"], [[1]])
    assert table.data.splitlines()[0] == r"| max \|Δ\| |"


def test_html_table_escapes_cells():
    table = html_table(["x"], [["<b>"]])
    assert "<td>&lt;b&gt;</td>" in table.data and 'class="table"' in table.data


@pytest.mark.parametrize("render", [markdown_table, html_table])
def test_ragged_rows_are_a_clear_error(render):
    with pytest.raises(ValueError, match="row 1 has 1 cells but the header has 2"):
        render(["a", "b"], [[1, 2], [3]])


def curve(name, rates, latencies, max_rate, statistic="mean", target_s=0.05):
    return LatencyCurve(
        scheme=name,
        label=name,
        statistic=statistic,
        target_s=target_s,
        rates=tuple(rates),
        latency_s=tuple(latencies),
        batch_size=tuple(1.0 for _ in rates),
        max_rate=max_rate,
    )


def test_latency_table_puts_each_latency_beside_its_rate():
    curves = {
        "Max": curve("Max", [0.2, 0.5], [0.041, 1.2345], 0.3),
        "Paged": curve("Paged", [0.2, 1.0], [0.040, math.nan], 0.9),
    }
    text = latency_table(curves).data
    lines = text.splitlines()
    assert lines[:5] == [
        "| rate (req/s) | Max (ms/token) | Paged (ms/token) |",
        "|---|---|---|",
        "| 0.2 | 41 | 40 |",
        "| 0.5 | 1,234 | – |",
        "| 1 | – | n/a |",
    ]
    assert lines[-1] == (
        "Mean normalized latency, ms per output token; –: not swept. Highest rate at ≤ 50 "
        "ms/token (interpolated): Max 0.30, Paged 0.90 req/s."
    )


def test_latency_table_rejects_mixed_or_missing_curves():
    with pytest.raises(ValueError, match="non-empty dict of LatencyCurve"):
        latency_table({})
    with pytest.raises(TypeError, match="only LatencyCurve"):
        latency_table({"Max": 1})
    mixed = {"a": curve("a", [1], [0.01], 1), "b": curve("b", [1], [0.01], 1, statistic="p90")}
    with pytest.raises(ValueError, match="one statistic and target"):
        latency_table(mixed)
