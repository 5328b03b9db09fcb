"""The page helpers render the tables the book shows."""

import pytest

from kvcourse.viz import html_table, markdown_table


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
