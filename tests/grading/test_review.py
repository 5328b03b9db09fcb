"""kvcourse_grader.review: quiet for the instructor's solutions, loud for the known tricks."""

from __future__ import annotations

import pytest
from grading_course import ASSIGNMENTS, ROOT, notebook

from kvcourse_grader.review import review_source
from kvcourse_grader.samples import solution_code


@pytest.mark.parametrize("assignment", ASSIGNMENTS)
def test_review_is_quiet_for_the_solution_and_loud_for_tricks(assignment):
    source = notebook(ROOT, "solutions", assignment)
    modules: set[str] = set()
    for cell in source.cells:
        if cell.get("metadata", {}).get("nbgrader", {}).get("solution"):
            assert review_source(solution_code(cell.source), modules) == []
    tricks = (
        "import builtins\nbuiltins.int = lambda x: 819200\n"
        "class A:\n    def __eq__(self, other):\n        return True\n"
        "float = lambda x: 0.0\n"
    )
    found = review_source(tricks, set())
    assert any("builtins" in f for f in found)
    assert any("__eq__" in f for f in found)
    assert "rebinds float" in found
    assert "syntax error" in review_source("def f(:\n", set())[0]


def test_review_flags_rewriting_the_test_helpers():
    code = (
        "import kvcourse.assignment_checks\n"
        "kvcourse.assignment_checks.switched_off = lambda *a, **k: None\n"
    )
    assert "assigns kvcourse.assignment_checks.switched_off" in review_source(code, set())


def test_review_flags_rewriting_through_the_attribute_dict():
    for code, finding in [
        ("import kvcourse.serving\nvars(kvcourse.serving)['simulate'] = 1\n", "vars()"),
        ("import kvcourse.serving\nvars(kvcourse.serving).update(simulate=1)\n", "vars()"),
        ("import kvcourse.serving\nkvcourse.serving.__dict__['simulate'] = 1\n", "__dict__"),
        (
            "import kvcourse.blocks\ntype.__setattr__(kvcourse.blocks.BlockPool, 'x', 1)\n",
            "setattr",
        ),
    ]:
        found = review_source(code, set())
        assert any(finding in f for f in found), (code, found)
    assert review_source("x = dict(vars(object()).items())\n", set()) == []
