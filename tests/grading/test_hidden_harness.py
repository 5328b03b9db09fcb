"""The hidden tests' private harness: the import a hidden cell writes is replaced, at autograde
only, by a copy of the harness compiled from the grader's own file, which student code that
rewrote the kernel's modules cannot reach (no nbgrader runs here)."""

from __future__ import annotations

import contextlib
import sys

import pytest

import kvcourse.assignment_checks
import kvcourse.assignment_checks.copy_watch
import kvcourse.assignment_checks.harness
import kvcourse.blocks
from kvcourse_grader.hidden_harness import (
    HARNESS_MODULE,
    harness_imports,
    harness_source,
    with_private_harness,
)

HIDDEN = """# Part 1, hidden tests (1 point): the library switched off.
### BEGIN HIDDEN TESTS
import kvcourse.blocks
from kvcourse.assignment_checks.harness import module_of, switched_off

with switched_off(kvcourse.blocks.BlockTable, reference="reference", watch=True):
    result = student()
### END HIDDEN TESTS"""


def test_the_import_is_found_only_inside_hidden_regions():
    assert harness_imports(HIDDEN) == [(4, 4, ("module_of", "switched_off"))]
    visible = "from kvcourse.assignment_checks.harness import switched_off\nx = 1\n"
    assert harness_imports(visible) == [] and with_private_harness(visible) == visible
    wrapped = HIDDEN.replace(
        "import module_of, switched_off", "import (\n    module_of,\n    switched_off,\n)"
    )
    assert harness_imports(wrapped) == [(4, 7, ("module_of", "switched_off"))]
    assert harness_imports("def broken(:\n") == []
    renamed = HIDDEN.replace("switched_off\n", "switched_off as off\n")
    with pytest.raises(ValueError, match="as they are"):
        harness_imports(renamed)
    module = HIDDEN.replace("from kvcourse.assignment_checks.harness import module_of, ", "import ")
    module = module.replace("switched_off\n", f"{HARNESS_MODULE}\n", 1)
    with pytest.raises(ValueError, match="not it"):
        harness_imports(module)


def test_the_replacement_is_the_harness_file_itself():
    """The harness file as it is, with its imports of copy_watch and stand_ins replaced by those
    files' text."""
    import kvcourse.assignment_checks.stand_ins

    def text(module):
        with open(module.__file__, encoding="utf-8") as handle:
            return handle.read()

    checks = kvcourse.assignment_checks
    harness = text(checks.harness)
    for module in (checks.copy_watch, checks.stand_ins):
        inlined = text(module).replace("from __future__ import annotations\n", "")
        head, _, rest = harness.partition(f"from {module.__name__} import (")
        harness = head + inlined.rstrip("\n") + "\n" + rest.partition("\n)\n")[2]
    assert harness_source() == harness
    replaced = with_private_harness(HIDDEN)
    assert "from kvcourse.assignment_checks.harness import module_of" not in replaced.split("\n")
    assert repr(harness_source()) in replaced
    compile(replaced, "<hidden cell>", "exec")
    for names in ("switched_off", "fresh_copy, module_of, stand_in, switched_off"):
        one = HIDDEN.replace("module_of, switched_off", names)
        bound: dict = {}
        exec(compile(with_private_harness(one).split("\nwith ")[0], "<hidden>", "exec"), bound)
        assert all(bound[n].__module__ == "kvcourse_private_harness" for n in names.split(", "))
    # Everything but the import stays as written, in place.
    assert replaced.split("\n")[:3] == HIDDEN.split("\n")[:3]
    assert replaced.split("\n")[-4:] == HIDDEN.split("\n")[-4:]


def test_a_rewritten_kernel_does_not_reach_the_private_harness(monkeypatch):
    """The student's code, run first, makes the kernel's harness (and the package's names) a
    no-op; the hidden cell still switches the library off and notices the call."""

    @contextlib.contextmanager
    def quiet(*owners, **kwargs):
        yield

    for module in (kvcourse.assignment_checks.harness, kvcourse.assignment_checks):
        monkeypatch.setattr(module, "switched_off", quiet)

    def student():
        return kvcourse.blocks.BlockTable(kvcourse.blocks.BlockPool(4, 4)).num_tokens

    namespace = {"student": student}
    exec(compile(HIDDEN, "<as written>", "exec"), namespace)  # the kernel's: fooled
    assert namespace["result"] == 0
    namespace = {"student": student}
    with pytest.raises(AssertionError, match="course library's reference"):
        exec(compile(with_private_harness(HIDDEN), "<at autograde>", "exec"), namespace)
    assert namespace["switched_off"] is not quiet
    assert namespace["switched_off"].__module__ == "kvcourse_private_harness"
    assert "kvcourse_private_harness" not in sys.modules
    assert "_kvcourse_harness" not in namespace and "_kvcourse_private_harness" not in namespace
    # The library's functions work again once the block has ended.
    assert student() == 0


def test_the_harness_imports_only_the_standard_library():
    """The private copy runs in the student's kernel: it must not lean on any module a student
    could have rewritten (torch only inside stand_in, for a2's attention tests)."""
    import ast

    tree = ast.parse(harness_source())
    top = [n for n in tree.body if isinstance(n, ast.Import | ast.ImportFrom)]
    names = {
        alias.name.split(".")[0] for n in top if isinstance(n, ast.Import) for alias in n.names
    }
    names |= {n.module.split(".")[0] for n in top if isinstance(n, ast.ImportFrom) and n.module}
    assert names <= set(sys.stdlib_module_names) | {"__future__"}, names
    inner = {
        alias.name
        for node in ast.walk(tree)
        if isinstance(node, ast.Import) and node not in top
        for alias in node.names
    }
    assert inner <= {"torch"}, inner


def test_every_hidden_cell_of_every_assignment_gets_a_working_harness():
    """Each hidden cell's harness import, replaced as autograde replaces it, compiles with the
    rest of the cell and binds every name it imports to the private copy."""
    from grading_course import ASSIGNMENTS, ROOT, graded_cells, notebook

    seen = 0
    for assignment in ASSIGNMENTS:
        for cell in graded_cells(notebook(ROOT, "solutions", assignment), hidden=True):
            compile(
                with_private_harness(cell.source), cell.metadata["nbgrader"]["grade_id"], "exec"
            )
            for _, _, names in harness_imports(cell.source):
                line = f"from {HARNESS_MODULE} import {', '.join(names)}"
                bound: dict = {}
                code = f"### BEGIN HIDDEN TESTS\n{line}\n### END HIDDEN TESTS"
                exec(compile(with_private_harness(code), "<import>", "exec"), bound)
                assert {bound[n].__module__ for n in names} == {"kvcourse_private_harness"}
                seen += 1
    assert seen >= 30, seen
