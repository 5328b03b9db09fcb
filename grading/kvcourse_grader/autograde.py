"""``kvcourse-grade autograde``: every submission graded, many at a time, into one gradebook.

The command gathers one :class:`~kvcourse_grader.jobs.GradingJob` per student and assignment,
checks the gradebook knows each assignment and every student (creating the students first, so
parallel graders never race to add the same one), and hands the jobs to
:mod:`kvcourse_grader.fanout`: ``--workers N`` students at a time on this machine (default: the
CPU count, fewer if memory is short), or ``--dask ADDRESS`` over a Dask cluster writing to one
PostgreSQL gradebook. A progress bar runs on a terminal; every finished student prints one line
(score, seconds, run-time troubles, review flags, or NOT GRADED and why), in the order they
finish, and a summary ends the run. Each student kernel runs in the bubblewrap sandbox of
:mod:`kvcourse_grader.sandbox` unless ``--unsandboxed`` is given.
"""

from __future__ import annotations

import argparse
import secrets
import signal
import sys
import threading
import time

from kvcourse_grader import fanout, runner
from kvcourse_grader.course import STUDENT_ID, CommandError, Course
from kvcourse_grader.jobs import GradingJob, JobOutcome

__all__ = ["cmd_autograde", "sandbox_flags"]

EXIT_OK, EXIT_FAILED, EXIT_INTERRUPTED = 0, 1, 130


def sandbox_flags(course: Course, unsandboxed: bool) -> list[str]:
    """nbgrader options that run every student kernel in the sandbox; [] with ``--unsandboxed``,
    after a loud warning. Refuses (CommandError) when the sandbox is unavailable and not waived."""
    from kvcourse_grader import sandbox

    if unsandboxed:
        print(
            "WARNING: grading WITHOUT a sandbox (--unsandboxed): student code can read the "
            "solutions, the hidden tests and the gradebook, write anywhere this user can, and use "
            "the network. Use it only for trusted notebooks.",
            file=sys.stderr,
        )
        return []
    problem = sandbox.sandbox_problem()
    if problem is not None:
        raise CommandError(
            f"cannot grade in a sandbox: {problem}. To grade anyway, without protection of the "
            "solutions and the gradebook, pass --unsandboxed."
        )
    print("sandbox: bubblewrap; student kernels see no solutions, gradebook or network")
    return [
        f"--RobustExecute.kernel_manager_class={sandbox.SANDBOX_CLASS}",
        f"--SandboxedKernelManager.course_root={course.root}",
    ]


def _jobs(course: Course, args: argparse.Namespace, nb_args: list[str]) -> list[GradingJob]:
    from nbgrader.api import MissingEntry

    from kvcourse_grader.review import protected_ids

    jobs = []
    for assignment in course.assignments(args.assignments):
        students = course.students(assignment)
        if args.student:
            students = [s for s in students if s in set(args.student)]
        if not students:
            print(f"{assignment}: no submissions in {course.rel(course.submitted)}")
            continue
        with course.gradebook() as gb:
            try:
                gb.find_assignment(assignment)
            except MissingEntry:
                raise CommandError(
                    f"{assignment} is not in the gradebook; run `kvcourse-grade release` first"
                ) from None
        protected = frozenset(protected_ids(course.source_notebook(assignment)))
        jobs += [
            GradingJob(
                course,
                assignment,
                student,
                tuple(nb_args),
                args.timeout,
                args.memory_limit,
                protected,
            )
            for student in students
        ]
    return jobs


def _register_students(course: Course, jobs: list[GradingJob]) -> None:
    """Create every student before grading starts: nbgrader would add them as it goes, and two
    parallel graders adding the same student to a server database collide."""
    students = sorted({job.student for job in jobs if STUDENT_ID.match(job.student)})
    with course.gradebook() as gb:
        known = {s.id for s in gb.students}
        for student in students:
            if student not in known:
                gb.add_student(student)


def _line(outcome: JobOutcome) -> str:
    head = f"{outcome.student:<16} {outcome.assignment:<20}"
    if not outcome.graded:
        return f"{head}  NOT GRADED  {outcome.why}"
    extra = "".join(
        [
            f"  [{'; '.join(outcome.notes)}]" if outcome.notes else "",
            f"  review: {'; '.join(outcome.flags)}" if outcome.flags else "",
        ]
    )
    score, total = outcome.score
    return f"{head}  {score:5g} / {total:g}  ({outcome.seconds:.1f} s){extra}"


def _with_behaviour(course: Course, outcome: JobOutcome) -> JobOutcome:
    """``outcome`` with the review findings of what its code did when graded (the audit
    record in the autograded notebook) added to its flags."""
    from dataclasses import replace

    from kvcourse_grader.review import behaviour_flags

    if not outcome.graded:
        return outcome
    path = course.autograded / outcome.student / outcome.assignment / f"{outcome.assignment}.ipynb"
    found = [f for f in behaviour_flags(path) if f not in outcome.flags]
    return replace(outcome, flags=(*outcome.flags, *found)) if found else outcome


def _progress(outcomes, total: int, show: bool | None):
    from tqdm.auto import tqdm

    bar = tqdm(total=total, unit="student", desc="autograde", file=sys.stderr, disable=not show)
    with bar:
        for outcome in outcomes:
            bar.write(_line(outcome), file=sys.stdout)
            bar.update(1)
            yield outcome


def _stop_on_sigterm() -> None:
    """Make SIGTERM (a job scheduler's stop, ``kill``) stop a run the way Ctrl-C does."""

    def interrupt(signum, frame):
        raise KeyboardInterrupt

    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGTERM, interrupt)


def cmd_autograde(course: Course, args: argparse.Namespace) -> int:
    """Grade every (or every named) submission and print one line per student; Ctrl-C or
    SIGTERM stops the running graders and their kernels and reports what was graded."""
    nb_args = [*sandbox_flags(course, args.unsandboxed), *course.db_flags]
    if args.cell_timeout:
        nb_args.append(f"--Execute.timeout={args.cell_timeout}")
    seed = secrets.randbelow(10**9) if args.seed is None else args.seed
    nb_args.append(f"--RobustExecute.case_seed={seed}")
    if args.dask and course.db_url.startswith("sqlite"):
        raise CommandError(
            "--dask needs a gradebook every worker can reach: a server database such as "
            "PostgreSQL, given with --db-url postgresql://... (or c.CourseDirectory.db_url in "
            "grading/nbgrader_config.py); a SQLite file is for one machine (use --workers)"
        )
    jobs = _jobs(course, args, nb_args)
    if not jobs:
        print("graded 0 submission(s); 0 could not be graded")
        return EXIT_OK
    _register_students(course, jobs)
    runner.resume_runs()
    _stop_on_sigterm()
    print(
        f"limits per student: {args.timeout:g} s, memory {runner.format_size(args.memory_limit)}"
        f"{'' if sys.platform.startswith('linux') else ' (not enforced: Linux only)'}; "
        f"per cell: {f'{args.cell_timeout} s' if args.cell_timeout else 'as configured'}; "
        f"the hidden tests' random cases: seed {seed} (--seed {seed} tries them again)"
    )
    if args.dask:
        print(
            f"grading {len(jobs)} submission(s) on the Dask cluster at {args.dask} "
            f"({fanout.cluster_size(args.dask)} worker thread(s)); gradebook {course.db_shown}"
        )
        outcomes = fanout.run_dask(jobs, args.dask)
    else:
        workers = args.workers or fanout.default_workers()
        print(f"grading {len(jobs)} submission(s), {min(workers, len(jobs))} at a time")
        outcomes = fanout.run_local(jobs, workers)
    started = time.monotonic()
    show = sys.stderr.isatty() if args.progress is None else args.progress
    done: list[JobOutcome] = []
    try:
        seen = (_with_behaviour(course, outcome) for outcome in outcomes)
        for outcome in _progress(seen, len(jobs), show):
            done.append(outcome)
    except KeyboardInterrupt:
        runner.stop_all_runs()
        outcomes.close()  # the pool's threads end once their graders are stopped
        print(
            f"interrupted: graded {sum(o.graded for o in done)} of {len(jobs)} submission(s); "
            "the running graders were stopped. Those not graded keep what the gradebook held "
            "before; run autograde again to finish (add --student NAME for single ones)."
        )
        return EXIT_INTERRUPTED
    failed = sorted(f"{o.student}/{o.assignment}" for o in done if not o.graded)
    minutes = (time.monotonic() - started) / 60
    rate = f", {len(done) / minutes:.1f} per minute" if minutes > 0 else ""
    graded = len(done) - len(failed)
    print(f"graded {graded} submission(s); {len(failed)} could not be graded{rate}")
    if failed:
        print(f"not graded: {', '.join(failed)} (see {course.rel(course.logs)}/)")
        return EXIT_FAILED
    return EXIT_OK
