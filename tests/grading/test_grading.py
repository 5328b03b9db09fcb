"""The grading pipeline, end to end, with the real nbgrader on a temporary copy of the course.

The copy holds grading/nbgrader_config.py, grading/samples/, solutions/ and notebooks/ in the
repository's layout; nothing here touches the real grading/ folder. The expensive steps run once
per module: `release` on a fresh copy, then, for each assignment with sample students
(grading/samples/<assignment>.py), one `autograde` over all of them, then `feedback` and `export`
on the result. The generic checks run for every such assignment; :data:`SPECIFIC` adds what is
known about each one (its point split, the literals its hidden tests hold, ...).
"""

from __future__ import annotations

import csv
import html
import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass
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

ROOT = Path(__file__).resolve().parents[2]
ASSIGNMENTS = sorted(p.parent.name for p in (ROOT / "solutions").glob("*/*.ipynb"))
#: Assignments with sample students: each is graded end to end.
SAMPLED = sorted(
    p.stem for p in (ROOT / "grading" / "samples").glob("*.py") if p.stem in ASSIGNMENTS
)
A0 = "a0_kv_sizing"
A2 = "a2_block_tables"
LINUX = sys.platform.startswith("linux")


@dataclass(frozen=True)
class Specific:
    """What the tests know about one assignment beyond the generic rules."""

    #: (visible, hidden) points, as `release` reports them.
    points: tuple[float, float] | None = None
    #: kvcourse modules its test cells may name (to build inputs, never for expected values).
    library: tuple[str, ...] = ()
    #: `--cell-timeout` for the test's autograde run (None: the configured 60 s).
    cell_timeout: int | None = None
    #: values that occur only in hidden tests: no feedback page may show them.
    hidden_literals: tuple[str, ...] = ()
    #: a visible test's failure message that the partial student's feedback keeps.
    partial_message: str | None = None
    #: findings the review must list for the hostile student.
    hostile_flags: tuple[str, ...] = ()


SPECIFIC = {
    A0: Specific(
        points=(5, 5),
        # A short cell timeout keeps the looping student quick; the others never come near it.
        cell_timeout=3,
        hidden_literals=("140544", "426788", "8.738133333333334e-06", "4.3288675429726996e-05"),
        partial_message="expected 12596, got 17479",
        hostile_flags=(
            "defines __eq__",
            "assigns kvcourse.sizing",
            "sys.displayhook",
            "set_custom_exc",
        ),
    ),
    "a1_buddy_allocator": Specific(
        points=(10, 10),
        # The reference allocator, only to switch it off while student code runs; the simulator
        # of Part 6, run as a fresh private copy; the workloads that build its requests.
        library=("blocks", "serving", "workloads"),
        hidden_literals=(
            "0.39285714285714285",
            "0.49951171875",
            "(2992, 8)",
            "0.35479540143694194",
        ),
        partial_message="expected the share 0.4420 (212 + 424 + 948 = 1584 of 3584 slots), "
        "got 0.792",
        hostile_flags=(
            "defines __eq__",
            "assigns kvcourse.serving.simulate",
            "sys.displayhook",
            "set_custom_exc",
        ),
    ),
    A2: Specific(
        points=(10, 10),
        # The pool the student's table runs on; the reference modules, only to switch them off
        # while student code runs; the cache and model of Part 4, reloaded fresh in its cells.
        library=("blocks", "attention", "kv", "model"),
        hidden_literals=("0.609375", "2.077079107505071", "1.3678794411714423", "(2, (1, 4, 9))"),
        partial_message="half_block_waste_estimate(16, 493): expected about 0.0162, got 1.62",
        hostile_flags=(
            "defines __eq__",
            "assigns kvcourse.kv.cache.PagedKVCache",
            "sys.displayhook",
            "set_custom_exc",
        ),
    ),
    "a3_cow_fork": Specific(
        points=(10, 10),
        # The pool the student's manager runs on; the reference manager (sharing) and decoding
        # drivers, only to switch them off while student code runs; the sharing cache and the
        # model of Part 6, reloaded fresh in its cells.
        library=("blocks", "generation", "attention", "kv", "model"),
        hidden_literals=(
            "4004000",
            "(15, 16, 12, 11)",
            "(5, 48, 40, 16, 11)",
            "[26, 39, 109, 38, 111, 80, 40, 126, 83]",
        ),
        partial_message="full_copy_tokens(4, 64, 32): expected 10176 (4 x [64 + sum over s = "
        "1..31 of (64 + s)] = 4 x 2544), got 9920",
        hostile_flags=(
            "defines __eq__",
            "assigns kvcourse.generation.full_copy_tokens",
            "sys.displayhook",
            "set_custom_exc",
        ),
    ),
}


def specific(assignment: str) -> Specific:
    return SPECIFIC.get(assignment, Specific())


def cli(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    """Run ``kvcourse-grade`` as a student of the course would: a fresh process in ``cwd``."""
    return subprocess.run(
        [sys.executable, "-m", "kvcourse.grading.cli", *args],
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


def hidden_cells(source_nb) -> list:
    return [cell for cell in source_nb.cells if "BEGIN HIDDEN TESTS" in cell.source]


def html_text(path: Path) -> str:
    return html.unescape(re.sub(r"<[^>]+>", "", path.read_text()))


def point_split(assignment: str) -> tuple[float, float]:
    """(visible, hidden) points of an assignment's source notebook."""
    points = grade_points(notebook(ROOT, "solutions", assignment))
    hidden = sum(p for g, p in points.items() if g.startswith("hidden_"))
    return sum(points.values()) - hidden, hidden


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
    """``graded(assignment)``: a copy of the released course in which all sample students of
    ``assignment`` were collected and graded in ONE autograde run, then feedback and export.
    Each assignment is graded once per module, when a test first asks for it."""
    runs: dict[str, tuple[Path, dict]] = {}

    def run(assignment: str) -> tuple[Path, dict]:
        if assignment in runs:
            return runs[assignment]
        root = tmp_path_factory.mktemp(f"graded-{assignment}") / "course"
        shutil.copytree(released[0], root)
        inbox = root.parent / "inbox"
        timeout = specific(assignment).cell_timeout
        steps = {}
        steps["samples"] = cli("samples", assignment, "--out", str(inbox), cwd=root)
        steps["collect"] = cli("collect", str(inbox), "--assignment", assignment, cwd=root)
        extra = ["--cell-timeout", str(timeout)] if timeout else []
        steps["autograde"] = cli("autograde", assignment, *extra, cwd=root)
        steps["feedback"] = cli("feedback", assignment, cwd=root)
        steps["export"] = cli("export", "--to", str(root / "grades.csv"), cwd=root)
        for name in ("samples", "collect", "feedback", "export"):
            assert steps[name].returncode == 0, f"{name}:\n{steps[name].stdout}{steps[name].stderr}"
        runs[assignment] = root, steps
        return runs[assignment]

    return run


def cell_scores(root: Path, student: str, assignment: str = A0) -> dict[str, float]:
    from nbgrader.api import Gradebook

    points = grade_points(notebook(root, "solutions", assignment))
    url = f"sqlite:///{root / 'grading' / 'gradebook.db'}"
    with Gradebook(url, "kvcourse") as gb:
        return {
            grade_id: float(gb.find_grade(grade_id, assignment, assignment, student).score)
            for grade_id in points
        }


def expected_for(student: str, assignment: str = A0) -> dict[str, float]:
    sample = load_samples(ROOT, assignment)[student]
    expected = expected_scores(ROOT, assignment, sample)
    if student == "hog" and not LINUX:  # no memory limit, so the 8 GiB grab succeeds
        expected = expected_scores(ROOT, assignment, type(sample)(about=sample.about, passes=ALL))
    return expected


def sample_students(*, skip: tuple[str, ...] = ()) -> list[tuple[str, str]]:
    """(assignment, student) for every sample student, for parametrize."""
    return [
        (assignment, student)
        for assignment in SAMPLED
        for student in load_samples(ROOT, assignment)
        if student not in skip
    ]


def autograde_line(output: str, student: str) -> str:
    return next(s for s in output.splitlines() if re.match(rf"{re.escape(student)}\s", s))


# ------------------------------------------------------------------------------ the source itself
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


# ------------------------------------------------------------------------------------- release
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
    stubs = [c for c in cells if c.cell_type == "code" and "NotImplementedError()" in c.source]
    answers = [
        c for c in notebook(ROOT, "solutions", assignment).cells if "BEGIN SOLUTION" in c.source
    ]
    assert len(stubs) == len(answers)
    if assignment == A0:
        assert len(stubs) == 7


# ------------------------------------------------------------------------------------ autograde
@pytest.mark.parametrize("assignment", SAMPLED)
def test_autograde_reports_every_student(graded, assignment):
    root, steps = graded(assignment)
    result = steps["autograde"]
    assert result.returncode == 0, result.stdout + result.stderr
    students = load_samples(ROOT, assignment)
    full = sum(point_split(assignment))
    for student in students:
        total = sum(expected_for(student, assignment).values())
        assert re.search(
            rf"^{student}\s+{assignment}\s+{total:g} / {full:g} ", result.stdout, re.M
        ), f"{student}: no line with {total:g} / {full:g} in\n{result.stdout}"
    assert f"graded {len(students)} submission(s); 0 could not be graded" in result.stdout


@pytest.mark.parametrize("assignment", SAMPLED)
def test_solution_gets_full_marks(graded, assignment):
    scores = cell_scores(graded(assignment)[0], "correct", assignment)
    assert sum(scores.values()) == sum(point_split(assignment))


@pytest.mark.parametrize("assignment", SAMPLED)
def test_untouched_release_gets_zero(graded, assignment):
    scores = cell_scores(graded(assignment)[0], "untouched", assignment)
    assert scores and all(score == 0 for score in scores.values())


@pytest.mark.parametrize(("assignment", "student"), sample_students(skip=("correct", "untouched")))
def test_each_cell_scores_as_the_sample_says(graded, assignment, student):
    root = graded(assignment)[0]
    assert cell_scores(root, student, assignment) == expected_for(student, assignment)


def test_broken_students_do_not_stop_the_run(graded):
    out = graded(A0)[1]["autograde"].stdout
    assert "[the kernel died; 2 later cell(s) not run]" in out
    assert "[1 cell(s) timed out; 5 later cell(s) not run]" in out
    if LINUX:
        assert "MemoryError in 2 cell(s)" in out


@pytest.mark.parametrize("assignment", SAMPLED)
def test_hostile_is_flagged_for_review(graded, assignment):
    out = graded(assignment)[1]["autograde"].stdout
    if "hostile" in load_samples(ROOT, assignment):
        line = autograde_line(out, "hostile")
        assert "review:" in line, line
        for finding in specific(assignment).hostile_flags:
            assert finding in line, line
    assert "review" not in autograde_line(out, "correct")
    if assignment == A0:
        deleter = autograde_line(out, "deletes_tests")
        assert "missing locked cells: hidden_kv_bytes_per_flop" in deleter


# ------------------------------------------------------------------------------------- feedback
@pytest.mark.parametrize("assignment", SAMPLED)
def test_feedback_hides_hidden_tests(graded, assignment):
    root, steps = graded(assignment)
    source = notebook(ROOT, "solutions", assignment)
    secret = hidden_lines(source)
    assert len(secret) > 20
    first_comment = re.match(r"# (Part .*?hidden tests \([^)]*\))", hidden_cells(source)[0].source)
    assert first_comment, "a hidden-test cell starts with a comment saying what it checks"
    samples = load_samples(ROOT, assignment)
    feedback = root / "grading" / "feedback"
    pages = sorted(feedback.glob(f"*/{assignment}/{assignment}.html"))
    assert len(pages) == len(samples)
    for page in pages:
        student = page.parent.parent.name
        raw, text = page.read_text(), html_text(page)
        assert "HIDDEN TESTS" not in raw
        lines = {line.strip() for line in text.splitlines()}
        leaked = [line for line in secret if line in lines]
        assert not leaked, f"{student}: {leaked[:3]}"
        for literal in specific(assignment).hidden_literals:
            assert literal not in text, f"{student}: {literal}"
        if not samples[student].drop:
            assert first_comment.group(1) in text  # the visible comment stays
    partial = html_text(feedback / "partial" / assignment / f"{assignment}.html")
    assert "Hidden tests: failed." in partial
    if specific(assignment).partial_message:  # visible failures keep their message
        assert specific(assignment).partial_message in partial
    correct = html_text(feedback / "correct" / assignment / f"{assignment}.html")
    assert correct.count("Hidden tests: passed.") == len(hidden_cells(source))


# --------------------------------------------------------------------------------------- export
@pytest.mark.parametrize("assignment", SAMPLED)
def test_export_has_each_students_score(graded, assignment):
    root, steps = graded(assignment)
    with open(root / "grades.csv", newline="") as handle:
        rows = {
            row["student_id"]: row
            for row in csv.DictReader(handle)
            if row["assignment"] == assignment
        }
    for student in load_samples(ROOT, assignment):
        expected = sum(expected_for(student, assignment).values())
        assert float(rows[student]["score"]) == expected, student
        assert float(rows[student]["max_score"]) == sum(point_split(assignment))


# ----------------------------------------------------------------------------- limits and paths
def test_per_student_timeout_stops_everything(released, tmp_path):
    psutil = pytest.importorskip("psutil")
    root = tmp_path / "course"
    shutil.copytree(released[0], root)
    inbox = tmp_path / "inbox"
    inbox.mkdir()
    shutil.copy2(root / "solutions" / A0 / f"{A0}.ipynb", inbox / "ada.ipynb")
    assert cli("collect", str(inbox), "--assignment", A0, cwd=root).returncode == 0
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
    result = cli("collect", str(inbox), "--assignment", A0, cwd=root)
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


@pytest.mark.parametrize("assignment", SAMPLED)
def test_samples_are_built_from_the_current_release(tmp_path, assignment):
    samples = load_samples(ROOT, assignment)
    assert {"correct", "untouched", "partial", "raises", "syntax_error", "hostile"} <= set(samples)
    release = notebook(ROOT, "notebooks", assignment)
    for student, sample in samples.items():
        built = build_sample(ROOT, assignment, sample)
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
