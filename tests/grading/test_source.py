"""The nbgrader sources in solutions/: points, cell structure, clean Python, and test cells that a
student cannot fool by rewriting the library (no nbgrader runs here)."""

from __future__ import annotations

import ast
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

from kvcourse_grader.hidden_harness import HARNESS_MODULE, harness_imports
from kvcourse_grader.hidden_runs import GRADER_SIDE
from kvcourse_grader.samples import grade_points


def test_library_names_are_found_and_judged(tmp_path):
    code = "import kvcourse.blocks.pool\nfrom kvcourse.kv import cache\nx = kvcourse.model.Tiny\n"
    names = library_names(code)
    assert {
        "kvcourse.blocks.pool",
        "kvcourse.kv",
        "kvcourse.kv.cache",
        "kvcourse.model.Tiny",
    } <= set(names)
    for package, module in [
        ("blocks", "pool.py"),
        ("kv", "cache.py"),
        ("assignment_checks", "harness.py"),
    ]:
        (tmp_path / package).mkdir()
        (tmp_path / package / module).write_text("")
    (tmp_path / "model.py").write_text("")
    deep = {
        n
        for n in [*names, "kvcourse.assignment_checks.harness"]
        if below_package_level(n, tmp_path)
    }
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


#: The Chinese section of an assignment's opening cell: it follows a `---` line.
ZH_SEPARATOR = "\n---\n"
ZH_MARKERS = ("### 中文说明", "**你要写什么。**", "**为什么重要。**")
ZH_HEADER = ("部分", "你要写的函数/类", "公开测试", "隐藏测试", "分数")


def _table(markdown: str) -> tuple[list[str], list[tuple[str, str, str, str]]]:
    """The header and the (part, visible, hidden, points) rows of the one table in ``markdown``."""
    lines = [line.strip() for line in markdown.splitlines() if line.strip().startswith("|")]
    cells = [[c.strip() for c in line.strip("|").split("|")] for line in lines]
    header, rows = cells[0], [c for c in cells[1:] if not set("".join(c)) <= set("-: ")]
    return header, [(c[0], c[-3], c[-2], c[-1]) for c in rows]


@pytest.mark.parametrize("assignment", ASSIGNMENTS)
def test_opening_cell_has_the_chinese_section(assignment):
    """Cell 0 carries a Chinese version for readers of the Chinese edition, in the same cell so
    the point split stays in one place: its table has the English table's parts and points, and
    the released notebook shows the same cell."""
    intro = notebook(ROOT, "solutions", assignment).cells[0]
    assert intro.cell_type == "markdown"
    assert ZH_SEPARATOR in intro.source, f"{assignment}: no `---` line before the Chinese section"
    english, chinese = intro.source.split(ZH_SEPARATOR, 1)
    for marker in ZH_MARKERS:
        assert marker in chinese, f"{assignment}: the Chinese section lacks {marker}"
    number = assignment[1:].split("_")[0]
    assert f"**作业 {number} · " in chinese, f"{assignment}: the Chinese section has no title"
    en_header, en_rows = _table(english)
    zh_header, zh_rows = _table(chinese)
    assert len(zh_header) == len(en_header), assignment
    assert (*zh_header[:2], *zh_header[-3:]) == ZH_HEADER, (assignment, zh_header)
    assert zh_rows == en_rows, f"{assignment}: the Chinese table's parts or points differ"
    released = notebook(ROOT, "notebooks", assignment).cells[0]
    assert released.source == intro.source, f"{assignment}: run `kvcourse-grade release`"


MAX_VISIBLE_TEST_LINES = 60


@pytest.mark.parametrize("assignment", ASSIGNMENTS)
def test_visible_test_cells_stay_short(assignment):
    """A student reads every visible test cell: repeated wrapping belongs in the assignment's
    helpers (kvcourse.assignment_checks), so no visible test cell passes 60 lines."""
    for cell in graded_cells(notebook(ROOT, "solutions", assignment), hidden=False):
        visible = cell.source.strip().splitlines()
        grade_id = cell.metadata["nbgrader"]["grade_id"]
        assert len(visible) <= MAX_VISIBLE_TEST_LINES, f"{assignment} {grade_id}: {len(visible)}"


@pytest.mark.parametrize("assignment", ASSIGNMENTS)
def test_cells_name_the_library_at_package_level(assignment):
    """Module files below the library's packages may move; the packages' names stay."""
    for cell in notebook(ROOT, "solutions", assignment).cells:
        if cell.cell_type == "code":
            deep = [n for n in library_names(cell.source) if below_package_level(n)]
            assert not deep, (cell.metadata.get("nbgrader", {}).get("grade_id"), deep)


#: What only the harness may do: switch functions off, watch calls, build module copies.
HARNESS_PRIMITIVES = ("setprofile", "settrace", "__code__", "spec_from_file_location", "meta_path")
#: Names of the harness's own functions, and of the copies hidden cells used to carry.
HARNESS_NAMES = {
    "switched_off",
    "library_switched_off",
    "fresh_copy",
    "kernel_copy",
    "stand_in",
    "stand_in_calls",
    "module_of",
}


@pytest.mark.parametrize("assignment", ASSIGNMENTS)
def test_every_hidden_cell_runs_in_the_grader(assignment):
    """A hidden cell that ran in the snapshot would put its expected values in the process the
    student's code runs in, where a function could read them from its caller and return them:
    every hidden cell of the course runs in the grader (the grader-side line right after the
    region starts)."""
    source = notebook(ROOT, "solutions", assignment)
    for cell in graded_cells(source, hidden=True):
        grade_id = cell.metadata["nbgrader"]["grade_id"]
        region = cell.source.split("### BEGIN HIDDEN TESTS\n", 1)[1]
        assert region.startswith(GRADER_SIDE + "\n"), grade_id


@pytest.mark.parametrize("assignment", ASSIGNMENTS)
def test_hidden_cells_use_the_one_harness(assignment):
    """A student can rebind the library's helpers before the tests run, so a hidden cell takes
    none of them from the kernel: it names the harness with one import, which the grader replaces
    with a private copy at autograde (kvcourse_grader.hidden_harness), and carries no harness of
    its own; everything else in it is its checks."""
    source = notebook(ROOT, "solutions", assignment)
    for cell in graded_cells(source, hidden=True):
        grade_id = cell.metadata["nbgrader"]["grade_id"]
        region = cell.source.split("### BEGIN HIDDEN TESTS")[1].split("### END HIDDEN TESTS")[0]
        tree = ast.parse(region)
        defined = {
            node.name
            for node in ast.walk(tree)
            if isinstance(node, ast.FunctionDef | ast.ClassDef | ast.AsyncFunctionDef)
        }
        assert not defined & HARNESS_NAMES, (grade_id, defined & HARNESS_NAMES)
        assert not [p for p in HARNESS_PRIMITIVES if p in region], grade_id
        imports = harness_imports(cell.source)
        imported = {name for _, _, names in imports for name in names}
        used = {node.id for node in ast.walk(tree) if isinstance(node, ast.Name)} & HARNESS_NAMES
        assert used <= imported, (grade_id, "uses the harness without its import", used)
        # The library's other helpers could be rewritten by the student: hidden cells use none.
        checks = [n for n in library_names(region) if n.startswith("kvcourse.assignment_checks")]
        assert set(checks) <= {HARNESS_MODULE, *(f"{HARNESS_MODULE}.{n}" for n in imported)}, (
            grade_id,
            checks,
        )
        # Switching the reference off also watches for copies of it made before the tests ran.
        for node in ast.walk(tree):
            if isinstance(node, ast.Call) and getattr(node.func, "id", "") == "switched_off":
                watch = {k.arg: ast.unparse(k.value) for k in node.keywords}.get("watch")
                assert watch == "True", (grade_id, "switched_off(..., watch=True)")


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


def _plug_in_output(assignment: str, functions: dict, capsys) -> list[str]:
    """The lines the plug-in cell of ``assignment`` prints, run here with ``functions`` as the
    student's (no kernel needed: the cell is plain Python)."""
    (cell,) = [
        c
        for c in notebook(ROOT, "solutions", assignment).cells
        if c.metadata.get("nbgrader", {}).get("grade_id") == "plug_in"
    ]
    namespace = dict(functions)
    exec(compile(cell.source, "<plug_in>", "exec"), namespace)
    return capsys.readouterr().out.splitlines()


def test_a0_plug_in_marks_wrong_values_and_keeps_its_columns(capsys):
    def missing(*args):
        raise NotImplementedError

    def per_token(layers, heads, dim, width):
        value = 2 * layers * heads * dim * width
        return str(int(value)) if layers == 40 else int(value)  # a str for OPT-13B

    student = {
        "kv_bytes_per_token": per_token,
        "kv_bytes_per_request": lambda b, n: int(b * n),
        "kv_token_slots": lambda *args: None,
        "max_requests": missing,
        "kv_bytes_per_flop": lambda b, f: b / f * 2,  # a wrong number
    }
    lines = _plug_in_output("a0_kv_sizing", student, capsys)
    header, rows = lines[0], lines[1:5]
    starts = [header.index(name) for name in ("KV bytes/token", "KV at max context")]
    starts += [header.index(name) for name in ("A100 token slots", "2048-token requests")]
    starts.append(header.index("KV bytes/FLOP"))
    for row in rows:  # every cell starts under its column's name, whatever came back
        for start in starts:
            assert row[start - 1] == " " and row[start] != " ", (row, start)
    opt, llama = rows[0], rows[1]
    assert opt.startswith("OPT-13B") and "✗ str" in opt and "—" in opt  # nothing computed from it
    assert "327,680 ✓" in llama and "✗ None" in llama and "✗" in llama.split()[-1]
    assert "6 of 20 values agree with the course library." in lines
    notes = "\n".join(lines)
    assert "OPT-13B, KV bytes/token: your function returned '819200' (a str), not a number" in notes
    assert "LLaMA2-70B, A100 token slots: your function returned None, not a number" in notes
    assert "LLaMA2-70B, KV bytes/FLOP: yours is" in notes and "the library's 2.38e-06" in notes
