"""Set-up of the grading tests: the expensive nbgrader runs, done once per test session.

``released`` is a copy of the course after ``kvcourse-grade release``; ``graded(assignment)`` a
copy of that in which every sample student of the assignment was collected and graded in one
``autograde`` run, then ``feedback`` and ``export``. Nothing here touches the real grading/ folder.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from filelock import FileLock

sys.path.insert(0, str(Path(__file__).resolve().parent))

from grading_course import CASE_SEED, cli, copy_course, specific  # noqa: E402

from kvcourse_grader.sandbox import sandbox_problem  # noqa: E402


def _release(target: Path) -> subprocess.CompletedProcess:
    """A copy of the course at ``target`` after `kvcourse-grade release` (run from a subfolder of
    it); what the command printed."""
    root = copy_course(target)
    shutil.rmtree(root / "notebooks", ignore_errors=True)  # regenerate from scratch
    return cli("release", cwd=root / "solutions")


@pytest.fixture(scope="session")
def released(tmp_path_factory, worker_id) -> tuple[Path, subprocess.CompletedProcess]:
    """A copy of the course after `kvcourse-grade release` (run from a subfolder of it), and
    what the command printed. Tests copy it before changing anything in it.

    The release of eight assignments takes most of a minute: under pytest-xdist the first worker
    to ask makes it, in the run's shared temporary folder, and the others wait for it and read
    the same folder (pytest-xdist's recipe for a session fixture made once)."""
    if worker_id == "master":  # one process: nothing to share
        root = tmp_path_factory.mktemp("released") / "course"
        result = _release(root)
        assert result.returncode == 0, result.stdout + result.stderr
        return root, result
    shared = tmp_path_factory.getbasetemp().parent / "released"
    with FileLock(str(shared) + ".lock"):
        record = shared / "release.json"
        if not record.is_file():
            shutil.rmtree(shared, ignore_errors=True)
            done = _release(shared / "course")
            fields = {"args": done.args, "returncode": done.returncode}
            record.write_text(json.dumps({**fields, "stdout": done.stdout, "stderr": done.stderr}))
    result = subprocess.CompletedProcess(**json.loads(record.read_text()))
    assert result.returncode == 0, result.stdout + result.stderr
    return shared / "course", result


#: Seconds one autograde of all an assignment's samples may take (a4's 26 students take about
#: ten minutes on two busy cores); the other steps take seconds.
AUTOGRADE_TIMEOUT = 2400


def _grade_all_samples(assignment: str, released_root: Path, tmp_path_factory) -> tuple[Path, dict]:
    """Collect every sample student of ``assignment`` into a copy of the released course, grade
    them in one autograde run, then write their feedback and export the grades."""
    root = tmp_path_factory.mktemp(f"graded-{assignment}") / "course"
    shutil.copytree(released_root, root)
    inbox = root.parent / "inbox"
    timeout = specific(assignment).cell_timeout
    steps = {}
    steps["samples"] = cli("samples", assignment, "--out", str(inbox), cwd=root)
    steps["collect"] = cli("collect", str(inbox), "--assignment", assignment, cwd=root)
    extra = ["--seed", str(CASE_SEED)] + (["--cell-timeout", str(timeout)] if timeout else [])
    if sandbox_problem() is not None:  # the sandbox samples are then left out too
        extra.append("--unsandboxed")
    steps["autograde"] = cli("autograde", assignment, *extra, cwd=root, timeout=AUTOGRADE_TIMEOUT)
    # No assignment named: the others, which nobody was graded on, are skipped.
    steps["feedback"] = cli("feedback", cwd=root)
    steps["export"] = cli("export", "--to", str(root / "grades.csv"), cwd=root)
    for name in ("samples", "collect", "feedback", "export"):
        assert steps[name].returncode == 0, f"{name}:\n{steps[name].stdout}{steps[name].stderr}"
    return root, steps


@pytest.fixture(scope="session")
def graded(released, tmp_path_factory):
    """``graded(assignment)``: a copy of the released course in which all sample students of
    ``assignment`` were collected and graded in ONE autograde run, then feedback and export.
    Each assignment is graded once per session, when a test first asks for it; if that fails,
    every test that asks for it fails at once with the same cause (no second grading)."""
    runs: dict[str, tuple[Path, dict] | BaseException] = {}

    def run(assignment: str) -> tuple[Path, dict]:
        if assignment not in runs:
            try:
                runs[assignment] = _grade_all_samples(assignment, released[0], tmp_path_factory)
            except Exception as error:  # kept: the next test of this assignment fails at once
                runs[assignment] = error
        if isinstance(runs[assignment], BaseException):
            raise RuntimeError(f"grading {assignment}'s samples failed") from runs[assignment]
        return runs[assignment]

    return run
