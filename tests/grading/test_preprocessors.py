"""kvcourse_grader.preprocessors, one cell at a time, without nbgrader's pipeline."""

from __future__ import annotations

import json

import pytest
from nbformat.v4 import new_code_cell, new_output

from kvcourse_grader.preprocessors import DisablePartialCredit, RedactHiddenTests


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


def _stream(text: str, name: str = "stdout") -> dict:
    return {
        "msg_type": "stream",
        "header": {"msg_type": "stream"},
        "parent_header": {"msg_id": "m"},
        "content": {"name": name, "text": text},
    }


def test_output_cap_drops_a_flood_but_keeps_errors_and_the_stderr_failure():
    from kvcourse_grader.preprocessors import RobustExecute

    execute = RobustExecute(max_output_bytes=100)
    execute.reset_execution_trackers()
    execute.clear_before_next_output = False
    execute._kept, execute._noted = {}, set()
    outs: list = []
    for _ in range(50):
        execute.output(outs, _stream("x" * 30), None, 0)
    execute.output(outs, _stream("warning\n" * 20, "stderr"), None, 0)
    error = {
        "msg_type": "error",
        "header": {"msg_type": "error"},
        "parent_header": {"msg_id": "m"},
        "content": {"ename": "AssertionError", "evalue": "e" * 500, "traceback": ["t" * 500]},
    }
    execute.output(outs, error, None, 0)
    kept_text = "".join(o.get("text", "") for o in outs if o.get("name") == "stdout")
    assert kept_text.count("x") == 90  # three messages of 30 fit under 100 characters
    assert sum("the rest was dropped" in o.get("text", "") for o in outs) == 2  # stdout, stderr
    assert any(o.get("name") == "stderr" for o in outs)  # so a test cell still fails
    assert outs[-1].output_type == "error" and len(outs[-1].evalue) == 100
    other: list = []
    execute.output(other, _stream("y" * 30), None, 1)  # each cell has its own allowance
    assert other[0].text == "y" * 30


def test_cells_after_the_last_test_score_nothing_and_are_not_run(tmp_path):
    """The plug-in cell (and anything after the last test) cannot change a grade: autograde does
    not spend a kernel's time on it, and its output says why."""
    from nbformat.v4 import new_notebook

    from kvcourse_grader.preprocessors import RobustExecute

    def cell(source, **nbgrader):
        made = new_code_cell(source)
        if nbgrader:
            made.metadata["nbgrader"] = {"schema_version": 3, "locked": False, **nbgrader}
        return made

    nb = new_notebook(
        cells=[
            cell("x = 6 * 7", solution=True, grade=False, grade_id="answer"),
            cell("print('test', x)", solution=False, grade=True, grade_id="t", points=1),
            cell("print('plug in')", solution=False, grade=False, grade_id="plug_in"),
            cell("print('added by the student')"),
        ]
    )
    ran = RobustExecute(kernel_name="python3").preprocess(nb, {"metadata": {"path": str(tmp_path)}})
    outputs = [[o.get("text") for o in c.outputs] for c in ran[0].cells]
    assert outputs[1] == ["test 42\n"]
    assert outputs[2] == outputs[3] == [RobustExecute.not_run_after_tests]
    everything = RobustExecute(kernel_name="python3", run_after_last_test=True)
    ran = everything.preprocess(nb, {"metadata": {"path": str(tmp_path)}})
    assert [o.get("text") for o in ran[0].cells[2].outputs] == ["plug in\n"]


def test_behaviour_is_recorded_by_what_code_does_not_by_its_names(tmp_path):
    """A computed import, a tracer and a file read, hidden from the static review, are seen by
    the kernel's audit hook, attributed to the student's cell and named by the review."""
    from nbformat.v4 import new_notebook

    from kvcourse_grader.preprocessors import RobustExecute
    from kvcourse_grader.review import behaviour_flags

    def cell(source, **nbgrader):
        made = new_code_cell(source)
        made.metadata["nbgrader"] = {"schema_version": 3, "locked": False, **nbgrader}
        return made

    nb = new_notebook(
        cells=[
            cell("import math, collections", solution=False, grade=False, grade_id="setup"),
            cell(
                "import sys\nm = __import__('line' + 'cache')\nsys.settrace(None)\n"
                "text = open('/etc/hostname').read()\nx = 42",
                solution=True,
                grade=False,
                grade_id="sol_x",
            ),
            cell(
                "import sys\nsys.setprofile(None)\nassert x == 42",
                grade=True,
                grade_id="t",
                solution=False,
                points=1,
            ),
        ]
    )
    nb.cells[0].metadata["nbgrader"]["locked"] = True
    ran, _ = RobustExecute(kernel_name="python3").preprocess(
        nb, {"metadata": {"path": str(tmp_path)}}
    )
    assert not [o for c in ran.cells for o in c.outputs if o.output_type == "error"]
    path = tmp_path / "graded.ipynb"
    path.write_text(json.dumps(ran))
    assert behaviour_flags(path) == [
        "cell 1 (grade_id sol_x): imported linecache; read files /etc/hostname; "
        "turned on a tracer (sys.settrace)"
    ]


@pytest.mark.parametrize("in_grader", [False, True])
def test_what_the_students_code_does_for_the_hidden_tests_is_recorded(tmp_path, in_grader):
    """A function that reads its caller's frame only when a hidden test calls it does so in the
    snapshot, where no IPython cell starts: the snapshot's record joins the kernel's."""
    from nbformat.v4 import new_notebook

    from kvcourse_grader.hidden_runs import GRADER_SIDE
    from kvcourse_grader.preprocessors import RobustExecute
    from kvcourse_grader.review import behaviour_flags

    def cell(source, **nbgrader):
        made = new_code_cell(source)
        made.metadata["nbgrader"] = {"schema_version": 3, "locked": False, **nbgrader}
        return made

    marker = f"{GRADER_SIDE}\n" if in_grader else ""
    nb = new_notebook(
        cells=[
            cell(
                "import sys\n\n\ndef answer(n):\n    if n == 7:\n        sys._getframe(1)\n"
                "    return 2 * n",
                solution=True,
                grade=False,
                grade_id="sol",
            ),
            cell("assert answer(1) == 2", grade=True, grade_id="t", solution=False, points=1),
            cell(
                f"### BEGIN HIDDEN TESTS\n{marker}assert answer(7) == 14\n### END HIDDEN TESTS",
                grade=True,
                grade_id="h",
                solution=False,
                points=1,
            ),
        ]
    )
    ran, _ = RobustExecute(kernel_name="python3").preprocess(
        nb, {"metadata": {"path": str(tmp_path)}}
    )
    assert not [o for c in ran.cells for o in c.outputs if o.output_type == "error"]
    path = tmp_path / "graded.ipynb"
    path.write_text(json.dumps(ran))
    assert behaviour_flags(path) == ["cell 0 (grade_id sol): read the call stack (sys._getframe)"]
