"""`kvcourse-grade` as an instructor runs it: finding the course, collecting submissions (from
files, zips and folders), the per-student limits, and the pieces behind the commands
(kvcourse_grader.course, kvcourse_grader.collect)."""

from __future__ import annotations

import re
import shutil
import zipfile

import nbformat
import pytest
from grading_course import A0, ROOT, cli, copy_course
from nbformat.v4 import new_code_cell, new_notebook, new_output

from kvcourse_grader import collect, runner
from kvcourse_grader.cli import build_parser
from kvcourse_grader.course import CommandError, Course, point_split, run_notes


# -------------------------------------------------------------------------------- no nbgrader
def test_config_derives_paths_from_its_own_location(tmp_path):
    from traitlets.config.loader import PyFileConfigLoader

    root = copy_course(tmp_path / "anywhere")
    config = PyFileConfigLoader("nbgrader_config.py", path=str(root / "grading")).load_config()
    assert config.CourseDirectory.root == str(root.resolve())
    assert config.CourseDirectory.db_url == f"sqlite:///{root.resolve()}/grading/gradebook.db"
    assert config.CourseDirectory.submitted_directory == "grading/submitted"


def test_course_reads_the_config_and_checks_assignments(tmp_path):
    root = copy_course(tmp_path / "course").resolve()
    course = Course.load(root)
    assert course.source == root / "solutions" and course.release == root / "notebooks"
    assert course.submitted == root / "grading" / "submitted"
    assert A0 in course.assignments(None)
    assert course.assignments([A0]) == [A0]
    with pytest.raises(CommandError, match="unknown assignment"):
        course.assignments(["a9_nothing"])
    with pytest.raises(CommandError, match="no gradebook yet"):
        course.gradebook()
    assert course.students(A0) == [] and course.rel(root / "x" / "y") == "x/y"
    assert point_split(course.source_notebook(A0)) == (5.0, 5.0)


def test_course_root_is_found_upward_or_reported(tmp_path):
    root = copy_course(tmp_path / "course")
    assert runner.find_course_root(root / "solutions" / A0) == root.resolve()
    with pytest.raises(runner.CourseNotFound):
        runner.find_course_root(tmp_path)
    result = cli("export", cwd=tmp_path)
    assert result.returncode == 2 and "--course-root" in result.stderr


def test_parser_has_every_step():
    parser = build_parser()
    for argv in (["release"], ["samples", A0, "--out", "x"], ["collect", "in"], ["autograde"]):
        assert parser.parse_args(argv).step == argv[0]
    args = parser.parse_args(["autograde", A0, "--memory-limit", "512M", "--timeout", "5"])
    assert (args.assignments, args.memory_limit, args.timeout) == ([A0], 512 * 2**20, 5.0)
    assert parser.parse_args(["feedback"]).step == "feedback"
    assert parser.parse_args(["export", "--to", "g.csv"]).to == "g.csv"
    assert parser.parse_args(["autograde"]).seed is None  # a new one per run
    assert parser.parse_args(["autograde", "--seed", "1234"]).seed == 1234


@pytest.mark.parametrize("seed", ["-1", "abc", "1.5", str(2**63)])
def test_a_seed_that_is_not_a_whole_number_is_refused(seed, capsys):
    with pytest.raises(SystemExit):
        build_parser().parse_args(["autograde", "--seed", seed])
    assert f"not a seed: {seed!r} (give a whole number" in capsys.readouterr().err


def test_run_notes_count_what_went_wrong(tmp_path):
    cells = [
        new_code_cell("a", outputs=[new_output("error", ename="CellTimeoutError", evalue="")]),
        new_code_cell("b", outputs=[new_output("error", ename="CellNotRun", evalue="")]),
        new_code_cell("c", outputs=[new_output("error", ename="CellNotRun", evalue="")]),
    ]
    path = tmp_path / "graded.ipynb"
    nbformat.write(new_notebook(cells=cells), path)
    assert run_notes(path) == ["1 cell(s) timed out", "2 later cell(s) not run"]
    assert run_notes(tmp_path / "missing.ipynb") == []
    # A hidden check's PropertyFailed counts as the error it was raised from.
    hidden = [
        "\x1b[0;31mMemoryError\x1b[0m    Traceback (most recent call last)",
        "MemoryError: ",
        "The above exception was the direct cause of the following exception:",
        "\x1b[0;31mPropertyFailed\x1b[0m    Traceback (most recent call last)",
        "PropertyFailed: ties between instances",
    ]
    failed = [
        new_output("error", ename="PropertyFailed", evalue="ties", traceback=hidden),
        new_output("error", ename="MemoryError", evalue=""),
        new_output("error", ename="PropertyFailed", evalue="ties", traceback=hidden[3:]),
    ]
    nbformat.write(new_notebook(cells=[new_code_cell("d", outputs=failed)]), path)
    assert run_notes(path) == ["MemoryError in 2 cell(s)"]


def test_collect_reads_files_zips_and_folders(tmp_path):
    release = ROOT / "solutions" / A0 / f"{A0}.ipynb"
    (tmp_path / "bea" / "work").mkdir(parents=True)
    shutil.copy2(release, tmp_path / "bea" / "work" / f"{A0}.ipynb")
    with zipfile.ZipFile(tmp_path / "cy.zip", "w") as archive:
        archive.write(release, f"cy/{A0}.ipynb")
        archive.writestr(f"__MACOSX/cy/._{A0}.ipynb", "junk")
    shutil.copy2(release, tmp_path / "ada.ipynb")
    (tmp_path / "notes.txt").write_text("not a submission")
    (tmp_path / "dee.ipynb").write_text("not json")
    (tmp_path / "bad name.ipynb").write_bytes(release.read_bytes())
    for name in ("bea", "cy.zip", "ada.ipynb"):
        assert collect.read_entry(tmp_path / name, A0) == release.read_bytes(), name
    assert collect.student_of(tmp_path / "cy.zip") == "cy"
    assert collect.read_entry(tmp_path / "notes.txt", A0) is None
    with pytest.raises(CommandError, match="not a readable notebook"):
        collect.read_entry(tmp_path / "dee.ipynb", A0)
    with pytest.raises(CommandError, match="student id"):
        collect.read_entry(tmp_path / "bad name.ipynb", A0)
    course = Course.load(copy_course(tmp_path / "course").resolve())
    target, replaced = collect.store(course, "ada", A0, b"{}")
    assert (target / f"{A0}.ipynb").read_bytes() == b"{}" and not replaced
    assert collect.store(course, "ada", A0, b"{}")[1]


# ------------------------------------------------------------------------------- with nbgrader
@pytest.mark.slow
def test_collect_takes_zips_and_folders_and_rejects_junk(released, tmp_path):
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


@pytest.mark.slow
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


@pytest.mark.slow
def test_autograde_refuses_without_a_sandbox_unless_told(released, tmp_path, monkeypatch):
    root = tmp_path / "course"
    shutil.copytree(released[0], root)
    inbox = tmp_path / "inbox"
    inbox.mkdir()
    shutil.copy2(root / "solutions" / A0 / f"{A0}.ipynb", inbox / "ada.ipynb")
    assert cli("collect", str(inbox), "--assignment", A0, cwd=root).returncode == 0
    monkeypatch.setenv("KVCOURSE_BWRAP", str(tmp_path / "no-bwrap"))
    refused = cli("autograde", A0, cwd=root)
    assert refused.returncode == 2, refused.stdout + refused.stderr
    assert "cannot grade in a sandbox: bubblewrap (bwrap) is not installed" in refused.stderr
    assert "pass --unsandboxed" in refused.stderr
    assert "ada" not in refused.stdout  # nobody was graded
    allowed = cli("autograde", A0, "--unsandboxed", cwd=root)
    assert allowed.returncode == 0, allowed.stdout + allowed.stderr
    assert "WARNING: grading WITHOUT a sandbox" in allowed.stderr
    assert re.search(r"^ada\s+a0_kv_sizing\s+10 / 10", allowed.stdout, re.M)
