"""`kvcourse-grade release` with the real nbgrader: the student versions it writes are the ones in
notebooks/, with stubs in place of solutions and no hidden tests."""

from __future__ import annotations

import nbformat
import pytest
from grading_course import A0, ASSIGNMENTS, ROOT, notebook, point_split

pytestmark = pytest.mark.slow  # every test here needs the release made by nbgrader


def test_release_reports_points(released):
    assert "10 points (5 visible, 5 hidden)" in released[1].stdout
    for assignment in ASSIGNMENTS:
        visible, hidden = point_split(assignment)
        line = (
            f"{assignment}: wrote notebooks/{assignment}/{assignment}.ipynb and registered it in "
            f"the gradebook; {visible + hidden:g} points ({visible:g} visible, {hidden:g} hidden)"
        )
        assert line in released[1].stdout


@pytest.mark.parametrize("assignment", ASSIGNMENTS)
def test_notebooks_are_what_generate_assignment_makes(released, assignment):
    committed = ROOT / "notebooks" / assignment / f"{assignment}.ipynb"
    assert committed.is_file(), f"{committed} is missing: run `kvcourse-grade release`"
    fresh = notebook(released[0], "notebooks", assignment)
    ours = nbformat.read(committed, as_version=4)
    assert len(ours.cells) == len(fresh.cells)
    for index, (a, b) in enumerate(zip(ours.cells, fresh.cells, strict=True)):
        where = f"{assignment} cell {index}: notebooks/ differs from generate_assignment's output"
        assert a.cell_type == b.cell_type, where
        assert a.source == b.source, where
        assert a.metadata.get("nbgrader") == b.metadata.get("nbgrader"), where


@pytest.mark.parametrize("assignment", ASSIGNMENTS)
def test_release_has_stubs_and_no_solutions_or_hidden_tests(released, assignment):
    text = (released[0] / "notebooks" / assignment / f"{assignment}.ipynb").read_text()
    assert "BEGIN SOLUTION" not in text and "BEGIN HIDDEN TESTS" not in text
    cells = notebook(released[0], "notebooks", assignment).cells
    stubs = [c for c in cells if c.cell_type == "code" and "raise NotImplementedError(" in c.source]
    answers = [
        c for c in notebook(ROOT, "solutions", assignment).cells if "BEGIN SOLUTION" in c.source
    ]
    assert len(stubs) == len(answers)
    if assignment == A0:
        assert len(stubs) == 7
