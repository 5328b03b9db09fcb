"""The student's feedback page: what a test cell that lost points said comes first, under its part
in the table and above the cell's code, escaped; rendered with the course's template."""

from __future__ import annotations

from pathlib import Path

import nbformat
import pytest
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook, new_output

from kvcourse_grader.feedback_page import (
    SHORT_FAILURE,
    TEMPLATE_FILE,
    TEMPLATE_NAME,
    FailureFirst,
    failure_message,
    template_dirs,
)


def graded_cell(grade_id: str, score: float, points: float, outputs=(), source="# Part 1, tests"):
    cell = new_code_cell(source, outputs=list(outputs))
    cell.metadata.nbgrader = {
        "grade": True,
        "solution": False,
        "locked": True,
        "grade_id": grade_id,
        "points": points,
        "score": score,
    }
    return cell


def error(name: str, value: str):
    return new_output("error", ename=name, evalue=value, traceback=[f"{name}: {value}"])


def test_the_message_is_the_assertion_text_or_the_error_with_its_name():
    lost = graded_cell("test_f", 0, 1, [error("AssertionError", "f(2): expected 4, got 5")])
    assert failure_message(lost) == "f(2): expected 4, got 5"
    crashed = graded_cell("test_f", 0, 1, [error("NameError", "name 'g' is not defined")])
    assert failure_message(crashed) == "NameError: name 'g' is not defined"
    coloured = graded_cell("test_f", 0, 1, [error("\x1b[0;31mKeyError\x1b[0m", "\x1b[1m3\x1b[0m")])
    assert failure_message(coloured) == "KeyError: 3"


def test_hidden_notes_and_stderr_are_messages_too():
    note = "Hidden tests: failed: every block back in the pool.\n"
    hidden = graded_cell("hidden_f", 0, 2, [new_output("stream", name="stdout", text=note)])
    assert failure_message(hidden) == note.strip()
    noisy = graded_cell("test_f", 0, 1, [new_output("stream", name="stderr", text="warning!\n")])
    assert failure_message(noisy) == "it wrote to stderr, which counts as a failure: warning!"


def test_cells_that_kept_their_points_or_are_answers_say_nothing():
    assert failure_message(graded_cell("test_f", 1, 1, [error("AssertionError", "x")])) is None
    answer = graded_cell("f", 0, 1, [error("AssertionError", "x")])
    answer.metadata.nbgrader["solution"] = True
    assert failure_message(answer) is None
    assert failure_message(new_markdown_cell("text")) is None
    assert failure_message(graded_cell("test_f", 0, 1)) is None  # lost, but said nothing


def test_the_table_gets_a_short_note_and_a_planted_note_is_dropped():
    long = "x" * (SHORT_FAILURE + 50)
    hidden = graded_cell(
        "hidden_f", 0, 1, [new_output("stream", name="stdout", text=f"Hidden tests: {long}\n")]
    )
    kept = graded_cell("test_g", 1, 1)
    kept.metadata["kvcourse"] = {"failure": "planted", "failure_short": "planted"}
    odd = graded_cell("test_h", 1, 1)
    odd.metadata["kvcourse"] = "not a mapping"
    nb = new_notebook(cells=[hidden, kept, odd])
    nb, _ = FailureFirst().preprocess(nb, {})
    short = nb.cells[0].metadata.kvcourse.failure_short
    assert len(short) == SHORT_FAILURE and short.startswith("xxx") and short.endswith("…")
    assert nb.cells[0].metadata.kvcourse.failure == f"Hidden tests: {long}"
    assert "failure" not in nb.cells[1].metadata.kvcourse
    assert nb.cells[2].metadata.kvcourse == {}


@pytest.fixture
def page() -> str:
    """A two-test notebook's feedback page, as nbgrader's generate_feedback renders it with the
    course's preprocessor and template (scores set as GetGrades would)."""
    import nbgrader
    from nbconvert import HTMLExporter

    formgrader = Path(nbgrader.__file__).parent / "server_extensions" / "formgrader"
    css = formgrader / "static" / "node_modules" / "bootstrap" / "dist" / "css"  # as nbgrader sets

    lost = graded_cell(
        "test_f",
        0,
        1,
        [error("AssertionError", "f(2): expected 4, got <script>alert(1)</script>")],
        source="# Part 1, visible tests (1 point)\nassert f(2) == 4",
    )
    kept = graded_cell("hidden_f", 2, 2, source="# Part 1, hidden tests (2 points)")
    nb = new_notebook(cells=[new_markdown_cell("| a | b |\n|---|---|\n| 1 | 2 |"), lost, kept])
    nb = nbformat.from_dict(nb)
    exporter = HTMLExporter(
        template_name=TEMPLATE_NAME,
        template_file=TEMPLATE_FILE,
        extra_template_basedirs=template_dirs(),
        extra_template_paths=[str(css)],
    )
    exporter.register_preprocessor(FailureFirst, enabled=True)
    resources = {"nbgrader": {"notebook": "a9", "score": 2, "max_score": 3, "late_penalty": 0}}
    html, _ = exporter.from_notebook_node(nb, resources=resources)
    return html


def test_the_page_puts_the_failure_first_and_escapes_it(page):
    escaped = "f(2): expected 4, got &lt;script&gt;alert(1)&lt;/script&gt;"
    assert "<script>alert(1)" not in page
    table = page.split("</table>")[0]
    assert f'<div class="why">{escaped}</div>' in table  # under its part in the table
    box = page.index('<div class="failure"><b>What failed:</b>')
    code = page.index("visible tests (1 point)", page.index('name="test_f"'))
    assert box < code, "the message comes before the cell's code"
    assert page.index(escaped, box) < code
    assert page.count('class="failure"') == 1  # the hidden cell kept its points
    assert "a9: 2.0 of 3.0 points" in page
