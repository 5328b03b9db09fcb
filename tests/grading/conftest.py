"""Set-up of the grading tests: the expensive nbgrader runs, done once per test session.

``released`` is a copy of the course after ``kvcourse-grade release``; ``graded(assignment)`` a
copy of that in which every sample student of the assignment was collected and graded in one
``autograde`` run, then ``feedback`` and ``export``. Nothing here touches the real grading/ folder.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

from grading_course import CASE_SEED, cli, copy_course, specific  # noqa: E402

from kvcourse_grader.sandbox import sandbox_problem  # noqa: E402


@pytest.fixture(scope="session")
def released(tmp_path_factory) -> tuple[Path, subprocess.CompletedProcess]:
    """A copy of the course after `kvcourse-grade release` (run from a subfolder of it)."""
    root = copy_course(tmp_path_factory.mktemp("released") / "course")
    shutil.rmtree(root / "notebooks", ignore_errors=True)  # regenerate from scratch
    result = cli("release", cwd=root / "solutions")
    assert result.returncode == 0, result.stdout + result.stderr
    return root, result


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
