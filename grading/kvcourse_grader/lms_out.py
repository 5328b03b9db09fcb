"""Grades out to a learning-management system: the gradebook as the CSV files Canvas and Moodle
import.

:func:`read_grades` reads nbgrader's gradebook (one :class:`Grade` per student and assignment,
the score after the late penalty, as ``nbgrader export`` computes it). :func:`canvas_table` lays
the grades out for Canvas's gradebook import (``Student, ID, SIS User ID, SIS Login ID, Section``,
one column per assignment headed by its name, and a ``Points Possible`` row); :func:`moodle_table`
for one assignment's offline grading worksheet (``Identifier`` = ``Participant <id>``, ``Full
name``, ``Grade``, ``Maximum Grade``, ...). Students collected from Canvas or Moodle
(:mod:`kvcourse_grader.lms_in`) have the LMS's ids, so their rows match on import. A student
without a submission gets an empty grade, which both systems leave unchanged.
"""

from __future__ import annotations

import csv
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

__all__ = [
    "CANVAS_COLUMNS",
    "MOODLE_COLUMNS",
    "Grade",
    "canvas_table",
    "moodle_table",
    "read_grades",
    "write_csv",
]

#: The columns before the assignments in Canvas's gradebook CSV.
CANVAS_COLUMNS = ("Student", "ID", "SIS User ID", "SIS Login ID", "Section")

#: The columns of Moodle's offline grading worksheet.
MOODLE_COLUMNS = (
    "Identifier",
    "Full name",
    "Email address",
    "Status",
    "Grade",
    "Maximum Grade",
    "Grade can be changed",
    "Last modified (submission)",
    "Last modified (grade)",
    "Feedback comments",
)


@dataclass(frozen=True)
class Grade:
    """One student's grade for one assignment; ``score`` is None without a submission."""

    student: str
    first_name: str
    last_name: str
    email: str
    assignment: str
    score: float | None
    max_score: float
    timestamp: str = ""


def read_grades(gradebook, assignments: list[str] | None = None) -> list[Grade]:
    """Every student's grade for each assignment in an open nbgrader ``Gradebook`` (all of its
    assignments by default), the late penalty taken off as ``nbgrader export`` does."""
    from nbgrader.api import MissingEntry

    known = sorted(a.name for a in gradebook.assignments)
    wanted = list(assignments) if assignments else known
    missing = [a for a in wanted if a not in known]
    if missing:
        raise ValueError(
            f"not in the gradebook: {', '.join(missing)} (has: {', '.join(known) or 'none'}); "
            "run `kvcourse-grade release` first"
        )
    grades = []
    for name in wanted:
        assignment = gradebook.find_assignment(name)
        for student in sorted(gradebook.students, key=lambda s: s.id):
            try:
                sub = gradebook.find_submission(name, student.id)
            except MissingEntry:
                score, when = None, ""
            else:
                score = max(0.0, float(sub.score) - float(sub.late_submission_penalty or 0))
                when = str(sub.timestamp) if sub.timestamp else ""
            grades.append(
                Grade(
                    student=student.id,
                    first_name=student.first_name or "",
                    last_name=student.last_name or "",
                    email=student.email or "",
                    assignment=name,
                    score=score,
                    max_score=float(assignment.max_score),
                    timestamp=when,
                )
            )
    return grades


def _number(value: float | None) -> str:
    return "" if value is None else f"{value:.2f}".rstrip("0").rstrip(".")


def canvas_table(grades: list[Grade]) -> list[list[str]]:
    """Rows of Canvas's gradebook import: a header, ``Points Possible``, one row per student.

    A numeric student id (a Canvas user id, as collected from a Canvas zip) goes to ``ID``; any
    other id to ``SIS Login ID``, which Canvas also matches on.
    """
    assignments = sorted({g.assignment for g in grades})
    maxima = {g.assignment: g.max_score for g in grades}
    rows = [
        [*CANVAS_COLUMNS, *assignments],
        ["    Points Possible", "", "", "", "", *(_number(maxima[a]) for a in assignments)],
    ]
    by_student: dict[str, dict[str, Grade]] = {}
    for g in grades:
        by_student.setdefault(g.student, {})[g.assignment] = g
    for student, mine in sorted(by_student.items()):
        some = next(iter(mine.values()))
        name = ", ".join(p for p in (some.last_name, some.first_name) if p) or student
        numeric = student.isdigit()
        rows.append(
            [
                name,
                student if numeric else "",
                "",
                "" if numeric else student,
                "",
                *(_number(mine[a].score) if a in mine else "" for a in assignments),
            ]
        )
    return rows


def moodle_table(
    grades: list[Grade], assignment: str, modified: datetime | None = None
) -> tuple[list[list[str]], list[str]]:
    """Rows of Moodle's offline grading worksheet for one assignment, and the students left out
    because their id is not a Moodle participant id (digits).

    ``Last modified (grade)`` is ``modified`` (default: now, local time), so Moodle takes the
    rows unless a grade was changed there later.
    """
    mine = [g for g in grades if g.assignment == assignment]
    if not mine:
        raise ValueError(f"no grades for {assignment!r}; pass one of the gradebook's assignments")
    stamp = (modified or datetime.now()).strftime("%A, %d %B %Y, %I:%M %p")
    rows, skipped = [list(MOODLE_COLUMNS)], []
    for g in sorted(mine, key=lambda g: g.student):
        if not g.student.isdigit():
            skipped.append(g.student)
            continue
        rows.append(
            [
                f"Participant {g.student}",
                " ".join(p for p in (g.first_name, g.last_name) if p),
                g.email,
                "No submission" if g.score is None else "Submitted for grading",
                "" if g.score is None else f"{g.score:.2f}",
                f"{g.max_score:.2f}",
                "Yes",
                g.timestamp or "-",
                stamp,
                "",
            ]
        )
    return rows, skipped


def write_csv(rows: list[list[str]], path: Path) -> Path:
    """Write ``rows`` as a UTF-8 CSV file (folders made as needed); return its path."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", newline="", encoding="utf-8") as handle:
        csv.writer(handle).writerows(rows)
    return path
