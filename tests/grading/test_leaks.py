"""What keeps hidden tests' text out of a student's outputs (kvcourse_grader.leaks): which pieces
count as hidden, which disguises are seen through, which outputs are replaced and flagged."""

from __future__ import annotations

import base64
import json

import nbformat
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook, new_output

from kvcourse_grader import leaks

HIDDEN_CELL = """# Part 1, hidden tests: other sizes
### BEGIN HIDDEN TESTS
from kvcourse.assignment_checks.harness import (
    calls_on_result,
    switched_off,
)
assert kv_bytes_per_token(48, 8, 128, 2) == 196608, "the 13B model is wrong"
expected_share = 0.39285714285714285
assert share(7) == expected_share
### END HIDDEN TESTS"""


def notebook() -> nbformat.NotebookNode:
    return new_notebook(
        cells=[
            new_markdown_cell("Part 1 asks for 4096 tokens."),
            new_code_cell("def share(n):\n    return n / 16"),
            new_code_cell("assert share(16) == 1.0\nprint('visible 12345.5')"),
            new_code_cell(HIDDEN_CELL),
            new_code_cell("print(stash)"),
        ]
    )


def test_hidden_pieces_are_its_lines_and_literals_seen_nowhere_else():
    hidden = leaks.hidden_text(notebook())
    assert "expected_share = 0.39285714285714285" in hidden.lines
    assert {"196608", "0.39285714285714285", "the 13B model is wrong"} <= hidden.literals
    assert not {"4096", "12345.5", "128", "48"} & hidden.literals  # visible, or too short
    # One name on a line of its own (a long import's) tells nothing; the library is full of them.
    assert not {"switched_off,", "calls_on_result,"} & hidden.lines


def test_a_library_name_in_a_string_is_no_hidden_piece():
    """A hidden test that names a library method as a string (``calls_on``'s calls) shows
    nothing a traceback through the library does not show too."""
    nb = notebook()
    nb.cells[3].source = nb.cells[3].source.replace(
        "### END", 'calls = [("fork_sequence", (0, 1)), ("free_sequence", (0,))]\n### END'
    )
    literals = leaks.hidden_text(nb).literals
    assert "fork_sequence" in leaks.library_names()
    assert not {"fork_sequence", "free_sequence"} & literals and "196608" in literals
    # A line the library has too (a beam helper's) shows in any traceback through it.
    nb.cells[3].source = nb.cells[3].source.replace("### END", "k = len(parents[0])\n### END")
    assert "k = len(parents[0])" in leaks.library_lines()
    assert "k = len(parents[0])" not in leaks.hidden_text(nb).lines


def test_disguises_are_seen_through():
    hidden = leaks.hidden_text(notebook())
    line = "assert share(7) == expected_share"
    assert hidden.found_in(f"In: ['{line}']") == [line]
    assert hidden.found_in(f"x = {line[::-1]}") == [line]
    assert "196608" in hidden.found_in(base64.b64encode(b"(None, 196608)").decode())
    assert "196608" in hidden.found_in(b"(None, 196608)".hex())
    assert hidden.found_in("a share of 0.4 and 4096 tokens") == []


def test_only_outputs_after_the_first_hidden_cell_are_replaced():
    nb = notebook()
    nb.cells[2].outputs = [new_output("stream", name="stdout", text="196608 before the tests\n")]
    nb.cells[4].outputs = [
        new_output("stream", name="stdout", text="stash: 0.39285714285714285\n"),
        new_output("display_data", data={"text/plain": "fine"}),
        new_output("error", ename="AssertionError", evalue="196608", traceback=["196608"]),
    ]
    assert list(leaks.redact_notebook(nb)) == [4]
    assert nb.cells[2].outputs[0].text == "196608 before the tests\n"  # nothing to leak yet
    stream, display, error = nb.cells[4].outputs
    assert stream.text == leaks.REMOVED
    assert display.data["text/plain"] == "fine"
    assert error.output_type == "error" and "196608" not in json.dumps(error)  # still fails
    flags = leaks.removal_flags(json.loads(nbformat.writes(nb)))
    assert flags == ["cell 4: printed text of a hidden test (removed from its output)"]


def test_a_notebook_without_hidden_tests_is_left_alone():
    nb = new_notebook(cells=[new_code_cell("print(1)")])
    nb.cells[0].outputs = [new_output("stream", name="stdout", text="1\n")]
    assert leaks.redact_notebook(nb) == {}
    assert leaks.removal_flags(json.loads(nbformat.writes(nb))) == []


def test_a_failed_property_is_named_only_when_the_cell_declares_it():
    from kvcourse_grader.preprocessors import RedactHiddenTests

    cell = new_code_cell(
        "# Part 2, hidden tests\n### BEGIN HIDDEN TESTS\n"
        'with checking("ties between instances"):\n    assert pick([1, 1]) == 0\n'
        "### END HIDDEN TESTS"
    )
    assert leaks.declared_properties(cell.source) == {"ties between instances"}
    redact = RedactHiddenTests()
    for evalue, shown in [
        ("ties between instances", "Hidden tests: failed: ties between instances.\n"),
        ("assert pick([1, 1]) == 0", redact.failed_text),  # raised by student code: not shown
    ]:
        cell.outputs = [new_output("error", ename="PropertyFailed", evalue=evalue, traceback=[])]
        out, _ = redact.preprocess_cell(nbformat.from_dict(dict(cell)), {}, 0)
        assert out.outputs[0].text == shown
        assert "pick" not in out.source


def test_checking_names_the_property_and_keeps_the_cause():
    import pytest

    from kvcourse.assignment_checks.harness import PropertyFailed, checking

    with pytest.raises(PropertyFailed, match="^the caller's list left unchanged$") as caught:
        with checking("the caller's list left unchanged"):
            assert [1, 2] == [1], "expected [1]"
    assert isinstance(caught.value.__cause__, AssertionError)
    with checking("nothing wrong"):
        pass


def test_a_hidden_line_inside_a_visible_one_is_no_secret():
    """A hidden call such as ``f(*args)`` that the visible ``got = f(*args)`` holds shows in every
    feedback page: it is not a hidden line (or the feedback of every student would be removed)."""
    nb = nbformat.v4.new_notebook()
    nb.cells = [
        new_code_cell("got = kv_token_slots(*args)\nprint('visible')"),
        new_code_cell(
            "# Part 3, hidden tests\n### BEGIN HIDDEN TESTS\ntry:\n    kv_token_slots(*args)\n"
            "except OverflowError:\n    pass\n### END HIDDEN TESTS"
        ),
    ]
    assert "kv_token_slots(*args)" not in leaks.hidden_text(nb).lines
    assert "except OverflowError:" in leaks.hidden_text(nb).lines
