"""The grading pipeline, end to end, with the real nbgrader on a temporary copy of the course.

The copy holds grading/nbgrader_config.py, grading/samples/, solutions/ and notebooks/ in the
repository's layout; nothing here touches the real grading/ folder. The expensive steps run once
per module: `release` on a fresh copy, then one `autograde` over every sample student, then
`feedback` and `export` on the result.
"""

from __future__ import annotations

import csv
import html
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest
from nbformat.v4 import new_code_cell, new_output

from kvcourse.grading import runner
from kvcourse.grading.preprocessors import DisablePartialCredit, RedactHiddenTests
from kvcourse.grading.review import review_notebook, review_source
from kvcourse.grading.samples import (
    ALL,
    build_sample,
    expected_scores,
    grade_points,
    load_samples,
    solution_code,
)

ROOT = Path(__file__).resolve().parent.parent
ASSIGNMENTS = sorted(p.parent.name for p in (ROOT / "solutions").glob("*/*.ipynb"))
A0 = "a0_kv_sizing"
LINUX = sys.platform.startswith("linux")


def cli(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    """Run ``kvcourse-grade`` as a student of the course would: a fresh process in ``cwd``."""
    return subprocess.run(
        [sys.executable, "-m", "kvcourse.grading_cli", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=600,
    )


def copy_course(target: Path) -> Path:
    (target / "grading").mkdir(parents=True)
    shutil.copy2(ROOT / "grading" / "nbgrader_config.py", target / "grading")
    shutil.copytree(ROOT / "grading" / "samples", target / "grading" / "samples")
    shutil.copytree(ROOT / "solutions", target / "solutions")
    if (ROOT / "notebooks").is_dir():
        shutil.copytree(ROOT / "notebooks", target / "notebooks")
    return target


def notebook(root: Path, directory: str, assignment: str = A0):
    return nbformat.read(root / directory / assignment / f"{assignment}.ipynb", as_version=4)


def hidden_lines(source_nb) -> list[str]:
    """Distinctive lines found only inside hidden-test regions (not elsewhere in the notebook)."""
    inside, hidden, elsewhere = False, set(), set()
    for cell in source_nb.cells:
        for line in cell.source.split("\n"):
            if "BEGIN HIDDEN TESTS" in line:
                inside = True
            elif "END HIDDEN TESTS" in line:
                inside = False
            elif line.strip():
                (hidden if inside else elsewhere).add(line.strip())
    return sorted(line for line in hidden - elsewhere if len(line) >= 12)


def html_text(path: Path) -> str:
    return html.unescape(re.sub(r"<[^>]+>", "", path.read_text()))


# ------------------------------------------------------------------------------------- fixtures
@pytest.fixture(scope="module")
def released(tmp_path_factory) -> tuple[Path, subprocess.CompletedProcess]:
    """A copy of the course after `kvcourse-grade release` (run from a subfolder of it)."""
    root = copy_course(tmp_path_factory.mktemp("released") / "course")
    shutil.rmtree(root / "notebooks", ignore_errors=True)  # regenerate from scratch
    result = cli("release", cwd=root / "solutions")
    assert result.returncode == 0, result.stdout + result.stderr
    return root, result


@pytest.fixture(scope="module")
def graded(released, tmp_path_factory):
    """All sample students collected and graded in ONE autograde run, then feedback and export."""
    root = tmp_path_factory.mktemp("graded") / "course"
    shutil.copytree(released[0], root)
    inbox = root.parent / "inbox"
    steps = {}
    steps["samples"] = cli("samples", A0, "--out", str(inbox), cwd=root)
    steps["collect"] = cli("collect", str(inbox), cwd=root)
    # A short cell timeout keeps the looping student quick; the others never come near it.
    steps["autograde"] = cli("autograde", "--cell-timeout", "3", cwd=root)
    steps["feedback"] = cli("feedback", cwd=root)
    steps["export"] = cli("export", "--to", str(root / "grades.csv"), cwd=root)
    for name in ("samples", "collect", "feedback", "export"):
        assert steps[name].returncode == 0, f"{name}:\n{steps[name].stdout}{steps[name].stderr}"
    return root, steps


def cell_scores(root: Path, student: str, assignment: str = A0) -> dict[str, float]:
    from nbgrader.api import Gradebook

    points = grade_points(notebook(root, "solutions", assignment))
    url = f"sqlite:///{root / 'grading' / 'gradebook.db'}"
    with Gradebook(url, "kvcourse") as gb:
        return {
            grade_id: float(gb.find_grade(grade_id, assignment, assignment, student).score)
            for grade_id in points
        }


def expected_for(student: str) -> dict[str, float]:
    sample = load_samples(ROOT, A0)[student]
    expected = expected_scores(ROOT, A0, sample)
    if student == "hog" and not LINUX:  # no memory limit, so the 8 GiB grab succeeds
        expected = expected_scores(ROOT, A0, type(sample)(about=sample.about, passes=ALL))
    return expected


# ------------------------------------------------------------------------------ the source itself
def test_source_points_and_structure():
    source = notebook(ROOT, "solutions")
    points = grade_points(source)
    assert sum(points.values()) == 10
    hidden = {g: p for g, p in points.items() if g.startswith("hidden_")}
    assert sum(hidden.values()) == 5, "half of the points sit in hidden tests"
    for cell in source.cells:
        meta = cell.get("metadata", {}).get("nbgrader", {})
        if meta.get("solution"):
            assert "### BEGIN SOLUTION" in cell.source and "### END SOLUTION" in cell.source
        if meta.get("grade") and not meta.get("solution"):
            assert meta["points"] > 0
            assert ("BEGIN HIDDEN TESTS" in cell.source) == meta["grade_id"].startswith("hidden_")
            # Expected values are literals: a test that asked the library could be fooled by a
            # student who rewrites it.
            assert "kvcourse" not in cell.source, meta["grade_id"]


def test_solution_cells_are_clean_python(tmp_path):
    ruff = shutil.which("ruff", path=str(Path(sys.executable).parent)) or shutil.which("ruff")
    if ruff is None:
        pytest.skip("ruff is not installed")
    source = notebook(ROOT, "solutions")
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


# ------------------------------------------------------------------------------------- release
def test_release_reports_points(released):
    assert f"{A0}: wrote notebooks/{A0}/{A0}.ipynb" in released[1].stdout
    assert "10 points (5 visible, 5 hidden)" in released[1].stdout


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


def test_release_has_stubs_and_no_solutions_or_hidden_tests(released):
    text = (released[0] / "notebooks" / A0 / f"{A0}.ipynb").read_text()
    assert "BEGIN SOLUTION" not in text and "BEGIN HIDDEN TESTS" not in text
    cells = notebook(released[0], "notebooks").cells
    stubs = [c for c in cells if c.cell_type == "code" and "NotImplementedError()" in c.source]
    assert len(stubs) == 7


# ------------------------------------------------------------------------------------ autograde
def test_autograde_reports_every_student(graded):
    root, steps = graded
    result = steps["autograde"]
    assert result.returncode == 0, result.stdout + result.stderr
    students = load_samples(ROOT, A0)
    for student in students:
        total = sum(expected_for(student).values())
        assert re.search(rf"^{student}\s+{A0}\s+{total:g} / 10 ", result.stdout, re.M), (
            f"{student}: no line with {total:g} / 10 in\n{result.stdout}"
        )
    assert f"graded {len(students)} submission(s); 0 could not be graded" in result.stdout


def test_solution_gets_full_marks(graded):
    assert sum(cell_scores(graded[0], "correct").values()) == 10


def test_untouched_release_gets_zero(graded):
    scores = cell_scores(graded[0], "untouched")
    assert scores and all(score == 0 for score in scores.values())


@pytest.mark.parametrize(
    "student",
    ["partial", "raises", "syntax_error", "hostile", "deletes_tests", "loops", "crashes", "hog"],
)
def test_each_cell_scores_as_the_sample_says(graded, student):
    assert cell_scores(graded[0], student) == expected_for(student)


def test_broken_students_do_not_stop_the_run(graded):
    out = graded[1]["autograde"].stdout
    assert "[the kernel died; 2 later cell(s) not run]" in out
    assert "[1 cell(s) timed out; 5 later cell(s) not run]" in out
    if LINUX:
        assert "MemoryError in 2 cell(s)" in out


def test_hostile_is_flagged_for_review(graded):
    line = next(s for s in graded[1]["autograde"].stdout.splitlines() if s.startswith("hostile"))
    tricks = ("defines __eq__", "assigns kvcourse.sizing", "sys.displayhook", "set_custom_exc")
    for finding in tricks:
        assert finding in line, line
    deleter = next(s for s in graded[1]["autograde"].stdout.splitlines() if s.startswith("deletes"))
    assert "missing locked cells: hidden_kv_bytes_per_flop" in deleter
    correct = next(s for s in graded[1]["autograde"].stdout.splitlines() if s.startswith("correct"))
    assert "review" not in correct


# ------------------------------------------------------------------------------------- feedback
def test_feedback_hides_hidden_tests(graded):
    root, steps = graded
    secret = hidden_lines(notebook(ROOT, "solutions"))
    assert len(secret) > 20
    pages = sorted((root / "grading" / "feedback").glob(f"*/{A0}/{A0}.html"))
    assert len(pages) == len(load_samples(ROOT, A0))
    for page in pages:
        raw, text = page.read_text(), html_text(page)
        assert "HIDDEN TESTS" not in raw
        lines = {line.strip() for line in text.splitlines()}
        leaked = [line for line in secret if line in lines]
        assert not leaked, f"{page.parent.parent.name}: {leaked[:3]}"
        for literal in ("140544", "426788", "8.738133333333334e-06", "4.3288675429726996e-05"):
            assert literal not in text, f"{page.parent.parent.name}: {literal}"
        if not load_samples(ROOT, A0)[page.parent.parent.name].drop:
            assert "Part 1, hidden tests (1 point)" in text  # the visible comment stays
    partial = html_text(root / "grading" / "feedback" / "partial" / A0 / f"{A0}.html")
    assert "Hidden tests: failed." in partial
    assert "expected 12596, got 17479" in partial  # visible failures keep their message
    correct = html_text(root / "grading" / "feedback" / "correct" / A0 / f"{A0}.html")
    assert correct.count("Hidden tests: passed.") == 7


# --------------------------------------------------------------------------------------- export
def test_export_has_each_students_score(graded):
    root, steps = graded
    with open(root / "grades.csv", newline="") as handle:
        rows = {row["student_id"]: row for row in csv.DictReader(handle)}
    for student in load_samples(ROOT, A0):
        assert float(rows[student]["score"]) == sum(expected_for(student).values()), student
        assert float(rows[student]["max_score"]) == 10


# ----------------------------------------------------------------------------- limits and paths
def test_per_student_timeout_stops_everything(released, tmp_path):
    psutil = pytest.importorskip("psutil")
    root = tmp_path / "course"
    shutil.copytree(released[0], root)
    inbox = tmp_path / "inbox"
    inbox.mkdir()
    shutil.copy2(root / "solutions" / A0 / f"{A0}.ipynb", inbox / "ada.ipynb")
    assert cli("collect", str(inbox), cwd=root).returncode == 0
    result = cli("--course-root", str(root), "autograde", "--timeout", "2", cwd=tmp_path)
    assert result.returncode == 1, result.stdout
    assert re.search(r"^ada\s+a0_kv_sizing\s+NOT GRADED\s+timed out after", result.stdout, re.M)
    assert "not graded: ada/a0_kv_sizing" in result.stdout
    leftovers = []
    for proc in psutil.process_iter(["pid"]):
        try:
            if proc.environ().get(runner.MARKER) and str(root) in proc.cwd():
                leftovers.append(proc)
        except (psutil.Error, OSError):
            continue
    assert not leftovers


@pytest.mark.skipif(not LINUX, reason="RLIMIT_AS is applied on Linux only")
def test_default_memory_limit_lets_numpy_and_torch_work():
    code = "import numpy, torch; (torch.randn(512, 512) @ torch.randn(512, 512)).sum().item()"
    pytest.importorskip("torch")
    result = subprocess.run(
        [sys.executable, "-c", code],
        env=runner.grading_env("test"),
        preexec_fn=runner._limit_memory(runner.DEFAULT_MEMORY_LIMIT),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr


def test_config_derives_paths_from_its_own_location(tmp_path):
    from traitlets.config.loader import PyFileConfigLoader

    root = copy_course(tmp_path / "anywhere")
    config = PyFileConfigLoader("nbgrader_config.py", path=str(root / "grading")).load_config()
    assert config.CourseDirectory.root == str(root.resolve())
    assert config.CourseDirectory.db_url == f"sqlite:///{root.resolve()}/grading/gradebook.db"
    assert config.CourseDirectory.submitted_directory == "grading/submitted"


def test_course_root_is_found_upward_or_reported(tmp_path):
    root = copy_course(tmp_path / "course")
    assert runner.find_course_root(root / "solutions" / A0) == root.resolve()
    with pytest.raises(runner.CourseNotFound):
        runner.find_course_root(tmp_path)
    result = cli("export", cwd=tmp_path)
    assert result.returncode == 2 and "--course-root" in result.stderr


@pytest.mark.parametrize(
    ("text", "expected"),
    [("4G", 4 * 2**30), ("512M", 512 * 2**20), ("1.5GiB", 3 * 2**29), ("0", 0), ("none", 0)],
)
def test_parse_size(text, expected):
    assert runner.parse_size(text) == expected


def test_collect_takes_zips_and_folders_and_rejects_junk(released, tmp_path):
    import zipfile

    root = tmp_path / "course"
    shutil.copytree(released[0], root)
    inbox = tmp_path / "inbox"
    (inbox / "bea" / "work").mkdir(parents=True)
    release = root / "notebooks" / A0 / f"{A0}.ipynb"
    shutil.copy2(release, inbox / "bea" / "work" / f"{A0}.ipynb")
    with zipfile.ZipFile(inbox / "cy.zip", "w") as archive:
        archive.write(release, f"cy/{A0}.ipynb")
    (inbox / "dee.ipynb").write_text("not json")
    (inbox / "bad name.ipynb").write_bytes(release.read_bytes())
    result = cli("collect", str(inbox), cwd=root)
    assert result.returncode == 1
    for student in ("bea", "cy"):
        assert (root / "grading" / "submitted" / student / A0 / f"{A0}.ipynb").is_file()
    assert re.search(r"^dee\s+a0_kv_sizing\s+NOT COLLECTED", result.stdout, re.M)
    assert not (root / "grading" / "submitted" / "bad name").exists()


# ------------------------------------------------------------------------ pieces, without nbgrader
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


def test_review_is_quiet_for_the_solution_and_loud_for_tricks():
    source = notebook(ROOT, "solutions")
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


def test_samples_are_built_from_the_current_release(tmp_path):
    samples = load_samples(ROOT, A0)
    assert {"correct", "untouched", "partial", "raises", "syntax_error", "hostile"} <= set(samples)
    release = notebook(ROOT, "notebooks")
    for student, sample in samples.items():
        built = build_sample(ROOT, A0, sample)
        nbformat.validate(built)
        kept = [
            c
            for c in release.cells
            if c.metadata.get("nbgrader", {}).get("grade_id") not in sample.drop
        ]
        assert len(built.cells) == len(kept), student
        for ours, theirs in zip(built.cells, kept, strict=True):
            if not ours.get("metadata", {}).get("nbgrader", {}).get("solution"):
                assert ours.source == theirs.source, student  # only answers differ
        text = nbformat.writes(built)
        assert "BEGIN SOLUTION" not in text and "BEGIN HIDDEN TESTS" not in text
    assert review_notebook(tmp_path / "missing.ipynb")[0].startswith("unreadable")


def test_grading_env_limits_threads_and_finds_alembic():
    env = runner.grading_env("m")
    assert env[runner.MARKER] == "m"
    assert env["PATH"].split(os.pathsep)[0] == str(Path(sys.executable).parent)
    assert "OMP_NUM_THREADS" in env and "MALLOC_ARENA_MAX" in env
