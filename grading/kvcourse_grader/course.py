"""The course as nbgrader sees it: where things live, which assignments and students there are,
and what a notebook says about its points and about how its run went.

``grading/nbgrader_config.py`` sets the layout; :class:`Course` reads it back, so every
``kvcourse-grade`` step (:mod:`kvcourse_grader.cli`) works on the same folders as plain nbgrader.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path

from kvcourse_grader import runner
from kvcourse_grader.leaks import strip_ansi

#: A student id: a folder name and a gradebook key, so letters, digits and ``_ . @ + -`` only.
STUDENT_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.@+-]*$")


class CommandError(Exception):
    """A step cannot go on; the message says why."""


@dataclass
class Course:
    """Where nbgrader keeps things, as ``grading/nbgrader_config.py`` sets them."""

    root: Path
    course_id: str
    source: Path
    release: Path
    submitted: Path
    autograded: Path
    feedback: Path
    db_url: str

    @property
    def grading(self) -> Path:
        return self.root / "grading"

    @property
    def logs(self) -> Path:
        return self.grading / "logs"

    @property
    def db_flags(self) -> list[str]:
        """The nbgrader option naming this course's gradebook (the config's, or ``--db-url``)."""
        return [f"--CourseDirectory.db_url={self.db_url}"]

    @property
    def db_shown(self) -> str:
        """The gradebook's URL with any password hidden, for printing."""
        from sqlalchemy.engine import make_url

        try:
            return make_url(self.db_url).render_as_string(hide_password=True)
        except Exception:
            return "(an unreadable database URL)"

    @classmethod
    def load(cls, root: Path, db_url: str | None = None) -> Course:
        """The course at ``root`` as its nbgrader config sets it; ``db_url`` replaces the
        config's gradebook (``kvcourse-grade --db-url``)."""
        from traitlets.config.loader import PyFileConfigLoader

        config = PyFileConfigLoader(runner.CONFIG_NAME, path=str(root / "grading")).load_config()
        cd = config.CourseDirectory
        base = Path(cd.get("root", root))

        def directory(name: str, default: str) -> Path:
            return base / cd.get(name, default)

        return cls(
            root=root,
            course_id=cd.get("course_id", "default_course"),
            source=directory("source_directory", "source"),
            release=directory("release_directory", "release"),
            submitted=directory("submitted_directory", "submitted"),
            autograded=directory("autograded_directory", "autograded"),
            feedback=directory("feedback_directory", "feedback"),
            db_url=db_url or cd.get("db_url", f"sqlite:///{base / 'gradebook.db'}"),
        )

    def assignments(self, wanted: list[str] | None) -> list[str]:
        """``wanted``, checked against solutions/; by default every assignment there."""
        found = (
            sorted(d.name for d in self.source.iterdir() if d.is_dir() and any(d.glob("*.ipynb")))
            if self.source.is_dir()
            else []
        )
        if not wanted:
            if not found:
                raise CommandError(f"no assignments in {self.source}")
            return found
        missing = [a for a in wanted if a not in found]
        if missing:
            raise CommandError(
                f"unknown assignment(s) {', '.join(missing)}; in {self.source}: "
                f"{', '.join(found) or 'none'}"
            )
        return list(wanted)

    def source_notebook(self, assignment: str) -> Path:
        return self.source / assignment / f"{assignment}.ipynb"

    def students(self, assignment: str) -> list[str]:
        if not self.submitted.is_dir():
            return []
        return sorted(d.name for d in self.submitted.iterdir() if (d / assignment).is_dir())

    def gradebook(self):
        from nbgrader.api import Gradebook

        if self.db_url.startswith("sqlite:///"):
            if not Path(self.db_url.removeprefix("sqlite:///")).is_file():
                raise CommandError("there is no gradebook yet; run `kvcourse-grade release` first")
        return Gradebook(self.db_url, self.course_id)

    def score(self, assignment: str, student: str) -> tuple[float, float] | None:
        """(score, max score) of a graded submission, or None when the gradebook has none."""
        from nbgrader.api import MissingEntry

        try:
            with self.gradebook() as gb:
                submission = gb.find_submission(assignment, student)
                return float(submission.score), float(submission.max_score)
        except MissingEntry:
            return None

    def rel(self, path: Path) -> str:
        try:
            return str(path.relative_to(self.root))
        except ValueError:
            return str(path)


def point_split(notebook_path: Path) -> tuple[float, float]:
    """(visible, hidden) points of a source notebook."""
    import nbformat

    visible = hidden = 0.0
    for cell in nbformat.read(notebook_path, as_version=4).cells:
        meta = cell.get("metadata", {}).get("nbgrader", {})
        if meta.get("grade") and not meta.get("solution"):
            if "BEGIN HIDDEN TESTS" in cell.source:
                hidden += float(meta.get("points", 0))
            else:
                visible += float(meta.get("points", 0))
    return visible, hidden


_TRACEBACK_HEAD = re.compile(r"^(\w+)\s+Traceback \(most recent call last\)")


def _error_name(output: dict) -> str:
    """The name of the error an error output reports. A hidden check that failed reports
    ``PropertyFailed`` raised from what actually went wrong (the harness's ``checking``); its
    traceback starts with that cause, whose name is the one that says what happened."""
    name = output.get("ename", "")
    if name == "PropertyFailed":
        for line in output.get("traceback", []):
            head = _TRACEBACK_HEAD.match(strip_ansi(str(line)))
            if head:
                return head.group(1)
    return name


def run_notes(notebook: Path) -> list[str]:
    """What went wrong at run time, read from an autograded notebook's error outputs."""
    try:
        cells = json.loads(notebook.read_text()).get("cells", [])
    except (OSError, ValueError):
        return []
    counts: dict[str, int] = {}
    for cell in cells:
        for output in cell.get("outputs", []):
            if output.get("output_type") == "error":
                name = _error_name(output)
                counts[name] = counts.get(name, 0) + 1
    words = {
        "CellTimeoutError": "{} cell(s) timed out",
        "DeadKernelError": "the kernel died",
        "CellNotRun": "{} later cell(s) not run",
        "MemoryError": "MemoryError in {} cell(s)",
    }
    return [text.format(counts[name]) for name, text in words.items() if name in counts]
