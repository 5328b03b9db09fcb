"""kvcourse.grading.preprocessors, one cell at a time, without nbgrader's pipeline."""

from __future__ import annotations

from nbformat.v4 import new_code_cell, new_output

from kvcourse.grading.preprocessors import DisablePartialCredit, RedactHiddenTests


def test_redact_hidden_tests_keeps_comment_and_replaces_outputs():
    cell = new_code_cell(
        "# Part 9, hidden tests\n### BEGIN HIDDEN TESTS\nassert secret() == 42\n"
        "### END HIDDEN TESTS",
        outputs=[
            new_output("stream", name="stdout", text="secret() was called with 42\n"),
            new_output("error", ename="AssertionError", evalue="42", traceback=["secret() == 42"]),
        ],
    )
    cell, _ = RedactHiddenTests().preprocess_cell(cell, {}, 0)
    assert cell.source == "# Part 9, hidden tests"
    assert [o.text for o in cell.outputs] == [RedactHiddenTests().failed_text]
    visible = new_code_cell("assert f() == 1", outputs=[new_output("stream", text="hi\n")])
    visible, _ = RedactHiddenTests().preprocess_cell(visible, {}, 1)
    assert visible.outputs[0].text == "hi\n"


def test_disable_partial_credit_only_touches_test_cells():
    result = new_output("execute_result", data={"text/plain": "'full marks'"}, execution_count=3)
    test = new_code_cell("check()", outputs=[result])
    test.metadata["nbgrader"] = {"grade": True, "solution": False, "grade_id": "t", "points": 1}
    answer = new_code_cell("answer", outputs=[result])
    test, _ = DisablePartialCredit().preprocess_cell(test, {}, 0)
    answer, _ = DisablePartialCredit().preprocess_cell(answer, {}, 1)
    assert test.outputs[0].output_type == "display_data"
    assert answer.outputs[0].output_type == "execute_result"
