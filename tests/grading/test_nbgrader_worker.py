"""One nbgrader process grading many submissions in turn (``kvcourse_grader.nbgrader_worker``):
each student graded as a process of its own would grade them, a run past its time or a child that
dies ending that run only, and nothing a submission starts outliving its run."""

from __future__ import annotations

import shutil
import threading
import time

import nbformat
import pytest
from grading_course import A0, cli, expected_for

from kvcourse_grader import nbgrader_worker, runner
from kvcourse_grader.course import Course
from kvcourse_grader.nbgrader_worker import NbgraderWorker

pytestmark = pytest.mark.slow  # runs nbgrader

#: The per-run options autograde passes, unsandboxed: these samples are the course's own.
ARGS = ["--force", "--Execute.timeout=20"]


@pytest.fixture
def course(released, tmp_path) -> Course:
    """The released course with a0's samples collected (nothing graded yet)."""
    root = tmp_path / "course"
    shutil.copytree(released[0], root)
    inbox = tmp_path / "inbox"
    assert cli("samples", A0, "--out", str(inbox), cwd=root).returncode == 0
    assert cli("collect", str(inbox), "--assignment", A0, cwd=root).returncode == 0
    return Course.load(root)


def _grade(worker: NbgraderWorker, course: Course, student: str, timeout: float = 300):
    log = course.logs / A0 / f"{student}.log"
    return worker.run(["autograde", A0, "--student", student, *ARGS], log=log, timeout=timeout)


def test_one_process_grades_students_in_turn_as_separate_processes_would(course):
    worker = NbgraderWorker(course.root, memory_limit=runner.DEFAULT_MEMORY_LIMIT)
    try:
        pids = set()
        for student in ("correct", "crashes", "untouched", "no_kv_factor"):
            result = _grade(worker, course, student)
            assert result.ok, (student, result.reason())
            pids.add(worker._proc.pid)
            expected = sum(expected_for(student).values())
            assert course.score(A0, student) == (expected, 10), student
        assert len(pids) == 1, "every student was graded by the same nbgrader process"
    finally:
        worker.close()
    assert worker._proc is None


def test_a_run_past_its_time_or_a_dead_child_ends_that_run_only(course):
    worker = NbgraderWorker(course.root)
    try:
        late = _grade(worker, course, "loops", timeout=6)
        assert late.timed_out and "timed out after" in late.reason()
        assert worker._proc is None, "the child was stopped with the run"
        killer = threading.Timer(8, lambda: worker._proc and runner._kill_tree(worker._proc.pid))
        killer.start()
        dead = _grade(worker, course, "loops")
        killer.join()
        assert not dead.ok and dead.reason() == "nbgrader was killed by SIGKILL", dead
        fine = _grade(worker, course, "correct")
        assert fine.ok and course.score(A0, "correct") == (10, 10)
    finally:
        worker.close()


def test_a_child_retires_after_its_runs(course, monkeypatch):
    monkeypatch.setattr(nbgrader_worker, "MAX_RUNS", 2)
    worker = NbgraderWorker(course.root)
    seen = []
    try:
        for _ in range(3):
            result = worker.run(["--version"], log=course.logs / "version.log", timeout=120)
            assert result.ok and "0.9" in (course.logs / "version.log").read_text()
            seen.append(worker._proc.pid if worker._proc else None)
    finally:
        worker.close()
    assert seen[1] is None and seen[0] != seen[2] is not None


def test_what_a_submission_starts_is_killed_when_its_run_ends(course):
    psutil = pytest.importorskip("psutil")
    path = course.submitted / "correct" / A0 / f"{A0}.ipynb"
    notebook = nbformat.read(path, as_version=4)
    notebook.cells.append(
        nbformat.v4.new_code_cell(
            "import subprocess\nsubprocess.Popen(['sleep', '417'], start_new_session=True)"
        )
    )
    nbformat.write(notebook, path)
    worker = NbgraderWorker(course.root)
    try:
        assert _grade(worker, course, "correct").ok
        time.sleep(0.5)
        left = [
            proc.pid
            for proc in psutil.process_iter(["cmdline"])
            if proc.info["cmdline"] == ["sleep", "417"]
        ]
        assert not left, "the sleep a submission started outlived its run"
        assert worker._proc is not None and worker._proc.poll() is None, "the child lives on"
    finally:
        worker.close()
