"""One student's submission of one assignment, graded: the unit of work that autograde fans out.

A :class:`GradingJob` is a plain, picklable record (the course's folders, the nbgrader arguments,
the limits), so the same :func:`grade_job` runs in a thread of ``kvcourse-grade`` or in a Dask
worker on another machine that sees the course at the same path. It starts one nbgrader process
(:mod:`kvcourse_grader.runner`, with its time and memory limits and the sandboxed kernel), or
hands it to a long-lived :class:`~kvcourse_grader.nbgrader_worker.NbgraderWorker`, and
returns a :class:`JobOutcome`: the score nbgrader wrote to the gradebook, or why there is none,
plus what went wrong at run time and what the review flags. It never raises: one student never
stops the run.
"""

from __future__ import annotations

import json
import socket
import time
from dataclasses import dataclass

from kvcourse_grader import runner
from kvcourse_grader.course import STUDENT_ID, Course, run_notes
from kvcourse_grader.nbgrader_worker import NbgraderWorker

__all__ = ["GradingJob", "JobOutcome", "grade_job"]


@dataclass(frozen=True)
class GradingJob:
    """What grading one student's assignment needs; ``nb_args`` are nbgrader's extra options
    (sandbox, cell timeout, gradebook URL) and ``protected`` the grade ids the review guards."""

    course: Course
    assignment: str
    student: str
    nb_args: tuple[str, ...] = ()
    timeout: float | None = None
    memory_limit: int = 0
    protected: frozenset[str] = frozenset()


@dataclass(frozen=True)
class JobOutcome:
    """How grading one student's assignment ended: ``score`` is (points, max points) when graded,
    else None and ``why`` says what happened; ``notes`` are run-time troubles read from the graded
    notebook, ``flags`` the review's findings, ``host`` the machine that graded it."""

    assignment: str
    student: str
    score: tuple[float, float] | None
    why: str
    seconds: float
    notes: tuple[str, ...] = ()
    flags: tuple[str, ...] = ()
    host: str = ""

    @property
    def graded(self) -> bool:
        return self.score is not None


def grade_job(job: GradingJob, worker: NbgraderWorker | None = None) -> JobOutcome:
    """Grade one submission with nbgrader and read its score back from the gradebook; every
    failure (including an exception here) becomes an ungraded outcome. nbgrader runs in
    ``worker`` when one is given (a process that grades many submissions in turn), else in a
    process of its own."""
    from kvcourse_grader.leaks import removal_flags
    from kvcourse_grader.review import review_notebook

    started = time.monotonic()
    course, assignment, student = job.course, job.assignment, job.student

    def outcome(score=None, why="", notes=(), flags=()) -> JobOutcome:
        return JobOutcome(
            assignment,
            student,
            score,
            why,
            time.monotonic() - started,
            tuple(notes),
            tuple(flags),
            socket.gethostname(),
        )

    if not STUDENT_ID.match(student):
        return outcome(why="the folder name is not a valid student id")
    if not (course.grading / runner.CONFIG_NAME).is_file():
        return outcome(
            why=f"this machine ({socket.gethostname()}) does not see the course at "
            f"{course.root}; every grading machine needs it at the same path (a shared folder)"
        )
    log = course.logs / assignment / f"{student}.log"
    autograded = course.autograded / student / assignment / f"{assignment}.ipynb"
    args = ["autograde", assignment, "--student", student, "--force", *job.nb_args]
    try:
        if worker is not None:
            result = worker.run(args, log=log, timeout=job.timeout)
        else:
            result = runner.run_nbgrader(
                course.root, args, log=log, timeout=job.timeout, memory_limit=job.memory_limit
            )
        score = course.score(assignment, student) if result.ok else None
        why = result.reason() if not result.ok else "nbgrader left no graded notebook"
        if score is None or not autograded.is_file():
            return outcome(why=f"{why} (log: {course.rel(log)})")
        submitted = course.submitted / student / assignment / f"{assignment}.ipynb"
        flags = review_notebook(submitted, set(job.protected)) if submitted.is_file() else []
        flags += removal_flags(json.loads(autograded.read_text()))
        return outcome(score=score, notes=run_notes(autograded), flags=flags)
    except Exception as err:  # keep going: one student never stops the run
        return outcome(why=f"{type(err).__name__}: {err} (log: {course.rel(log)})")
