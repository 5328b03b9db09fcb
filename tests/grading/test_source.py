"""The nbgrader sources in solutions/: points, cell structure, clean Python, and test cells that a
student cannot fool by rewriting the library (no nbgrader runs here)."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from grading_course import (
    ASSIGNMENTS,
    ROOT,
    below_package_level,
    graded_cells,
    library_names,
    notebook,
    point_split,
    specific,
)

from kvcourse.grading.samples import grade_points


def test_library_names_are_found_and_judged(tmp_path):
    code = "import kvcourse.blocks.pool\nfrom kvcourse.kv import cache\nx = kvcourse.model.Tiny\n"
    names = library_names(code)
    assert {
        "kvcourse.blocks.pool",
        "kvcourse.kv",
        "kvcourse.kv.cache",
        "kvcourse.model.Tiny",
    } <= set(names)
    for package, module in [("blocks", "pool.py"), ("kv", "cache.py"), ("grading", "checks.py")]:
        (tmp_path / package).mkdir()
        (tmp_path / package / module).write_text("")
    (tmp_path / "model.py").write_text("")
    deep = {n for n in [*names, "kvcourse.grading.checks"] if below_package_level(n, tmp_path)}
    assert deep == {"kvcourse.blocks.pool", "kvcourse.kv.cache"}
    assert not below_package_level("kvcourse.blocks.BlockPool", tmp_path)


@pytest.mark.parametrize("assignment", ASSIGNMENTS)
def test_source_points_and_structure(assignment):
    source = notebook(ROOT, "solutions", assignment)
    points = grade_points(source)
    total = sum(points.values())
    assert total > 0 and total % 10 == 0, f"{assignment}: {total} points is not a round number"
    if specific(assignment).points is not None:
        assert point_split(assignment) == specific(assignment).points
    allowed = set(specific(assignment).library)
    for cell in source.cells:
        meta = cell.get("metadata", {}).get("nbgrader", {})
        if meta.get("solution"):
            assert "### BEGIN SOLUTION" in cell.source and "### END SOLUTION" in cell.source
        if meta.get("grade") and not meta.get("solution"):
            assert meta["points"] > 0
            assert ("BEGIN HIDDEN TESTS" in cell.source) == meta["grade_id"].startswith("hidden_")
            # Expected values are literals: a test that asked the library could be fooled by a
            # student who rewrites it. Test cells name only the library modules they need to
            # build their inputs (SPECIFIC), and nothing else of the course library.
            named = set(re.findall(r"kvcourse\.(\w+)", cell.source))
            assert named <= allowed, (meta["grade_id"], named - allowed)
            assert not re.search(r"kvcourse(?!\.)", cell.source), meta["grade_id"]


@pytest.mark.parametrize("assignment", ASSIGNMENTS)
def test_cells_name_the_library_at_package_level(assignment):
    """Module files below the library's packages may move; the packages' names stay."""
    for cell in notebook(ROOT, "solutions", assignment).cells:
        if cell.cell_type == "code":
            deep = [n for n in library_names(cell.source) if below_package_level(n)]
            assert not deep, (cell.metadata.get("nbgrader", {}).get("grade_id"), deep)


@pytest.mark.parametrize("assignment", ASSIGNMENTS)
def test_hidden_cells_carry_their_own_harness(assignment):
    """A student can rebind kvcourse.grading's helpers before the tests run, but cannot reach
    code that exists only inside a hidden cell: hidden cells use none of the helpers."""
    source = notebook(ROOT, "solutions", assignment)
    for cell in graded_cells(source, hidden=True):
        named = library_names(cell.source)
        assert not [n for n in named if n.startswith("kvcourse.grading")], cell.metadata
        assert "kvcourse.grading" not in cell.source, cell.metadata["nbgrader"]["grade_id"]


@pytest.mark.parametrize("assignment", ASSIGNMENTS)
def test_solution_cells_are_clean_python(tmp_path, assignment):
    ruff = shutil.which("ruff", path=str(Path(sys.executable).parent)) or shutil.which("ruff")
    if ruff is None:
        pytest.skip("ruff is not installed")
    source = notebook(ROOT, "solutions", assignment)
    for index, cell in enumerate(source.cells):
        if cell.cell_type != "code":
            continue
        path = tmp_path / f"cell_{index}.py"
        path.write_text(cell.source + "\n")
        config = str(ROOT / "pyproject.toml")
        check = subprocess.run(
            [ruff, "check", "--config", config, "--ignore", "F821", str(path)],
            capture_output=True,
            text=True,
        )
        assert check.returncode == 0, check.stdout
        fmt = subprocess.run(
            [ruff, "format", "--config", config, "--diff", str(path)],
            capture_output=True,
            text=True,
        )
        assert fmt.returncode == 0, fmt.stdout + fmt.stderr
