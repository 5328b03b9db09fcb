"""``kvcourse-grade``: one command per grading step, on top of nbgrader.

    kvcourse-grade release   [ASSIGNMENT ...]            solutions/ -> notebooks/ (+ gradebook)
    kvcourse-grade bundle    [--out PATH]                 what students download (no solutions)
    kvcourse-grade samples   ASSIGNMENT --out DIR        sample submissions for a dry run
    kvcourse-grade collect   PATH [--assignment A]       notebooks or zips -> grading/submitted/
    kvcourse-grade autograde [ASSIGNMENT ...]            every submission, many students at once
    kvcourse-grade feedback  [ASSIGNMENT ...]            HTML feedback, hidden tests removed
    kvcourse-grade export    [--to grading/grades.csv]   grades as CSV
    kvcourse-grade similarity ASSIGNMENT [--out CSV]     code similarity to the reference, peers

Every step runs nbgrader in ``<root>/grading`` (where ``nbgrader_config.py`` is); the course root is
found from the current directory upward, or given with ``--course-root``. Each step prints what it
did and exits non-zero when it failed; ``autograde`` also when some student could not be graded.

This module holds the commands and their arguments; :mod:`kvcourse_grader.course` the course's
folders and notebooks, :mod:`kvcourse_grader.collect` the reading of submissions, and
:mod:`kvcourse_grader.autograde` the parallel grading of submissions (with
:mod:`kvcourse_grader.jobs` and :mod:`kvcourse_grader.fanout`), and :mod:`kvcourse_grader.runner`
the nbgrader processes.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from kvcourse_grader import collect, runner
from kvcourse_grader.autograde import cmd_autograde
from kvcourse_grader.bundle import add_bundle_parser
from kvcourse_grader.course import CommandError, Course, point_split
from kvcourse_grader.gradebook_lock import serialize_sqlite_sessions
from kvcourse_grader.similarity import add_similarity_parser

__all__ = ["CommandError", "Course", "build_parser", "main"]

EXIT_OK, EXIT_FAILED, EXIT_USAGE = 0, 1, 2


def _nbgrader(course: Course, args: list[str], log_name: str, **limits) -> runner.RunResult:
    log = course.logs / f"{log_name}.log"
    result = runner.run_nbgrader(course.root, [*args, *course.db_flags], log=log, **limits)
    if not result.ok:
        print(f"  nbgrader {' '.join(args)}: {result.reason()} (log: {course.rel(log)})")
    return result


# --------------------------------------------------------------------------------------- release
def cmd_release(course: Course, args: argparse.Namespace) -> int:
    status = EXIT_OK
    for assignment in course.assignments(args.assignments):
        result = _nbgrader(
            course, ["generate_assignment", assignment, "--force"], f"release-{assignment}"
        )
        target = course.release / assignment / f"{assignment}.ipynb"
        if not result.ok or not target.is_file():
            print(f"{assignment}: release FAILED")
            status = EXIT_FAILED
            continue
        visible, hidden = point_split(course.source_notebook(assignment))
        print(
            f"{assignment}: wrote {course.rel(target)} and registered it in the gradebook; "
            f"{visible + hidden:g} points ({visible:g} visible, {hidden:g} hidden)"
        )
    return status


# --------------------------------------------------------------------------------------- samples
def cmd_samples(course: Course, args: argparse.Namespace) -> int:
    from kvcourse_grader import samples

    (assignment,) = course.assignments([args.assignment])
    if not (course.release / assignment / f"{assignment}.ipynb").is_file():
        raise CommandError(f"{assignment} has no student version yet; run `release` first")
    out = Path(args.out).resolve()
    specs = samples.load_samples(course.root, assignment)
    for student, path in samples.write_samples(course.root, assignment, out).items():
        expected = sum(samples.expected_scores(course.root, assignment, specs[student]).values())
        print(f"{path}  expected {expected:g}  ({specs[student].about})")
    print(f"next: kvcourse-grade collect {out} --assignment {assignment}")
    return EXIT_OK


# --------------------------------------------------------------------------------------- collect
def _one_assignment(course: Course, wanted: str | None) -> str:
    if wanted:
        return course.assignments([wanted])[0]
    known = course.assignments(None)
    if len(known) != 1:
        raise CommandError(f"say which assignment with --assignment ({', '.join(known)})")
    return known[0]


def cmd_collect(course: Course, args: argparse.Namespace) -> int:
    from kvcourse_grader import lms_in

    assignment = _one_assignment(course, args.assignment)
    if (args.path is None) == (args.exchange is None):
        raise CommandError("say what to collect: PATH (a folder or an LMS zip) or --exchange DIR")
    path = Path(args.exchange or args.path)
    if args.exchange or (
        args.lms is None and path.is_dir() and (path / course.course_id / "inbound").is_dir()
    ):
        print(f"nbgrader exchange {path / course.course_id / 'inbound'}: newest per student")
        taken, refused = lms_in.read_exchange(path, course.course_id, assignment)
    elif path.is_dir() and args.lms in (None, "plain"):
        taken, refused = collect.inbox_entries(path, assignment)
    elif path.is_file() or path.is_dir():
        lms, taken, refused = lms_in.read_lms(path, assignment, args.lms or "auto")
        print(f"{path.name}: read as a {lms} download")
    else:
        raise CommandError(f"{path} is neither a folder nor a zip file")
    return EXIT_OK if collect.store_all(course, assignment, taken, refused) else EXIT_FAILED


# -------------------------------------------------------------------------------------- feedback
def _shows_hidden_lines(page: str, hidden, course: Course, student: str, assignment: str) -> bool:
    """Whether a feedback page shows a line of a hidden test that the student did not write."""
    import nbformat

    text = " ".join(_page_text(page).split())
    own: set[str] = set()
    for path in (course.submitted / student / assignment).glob("*.ipynb"):
        try:
            cells = nbformat.read(path, as_version=4).cells
        except Exception:  # an unreadable submission has no lines of its own
            continue
        own |= {" ".join(line.split()) for cell in cells for line in cell.source.split("\n")}
    return any(line in text for line in hidden.lines - own)


def _page_text(page: str) -> str:
    """The text of an HTML page, tags and styles dropped, entities undone."""
    import html as html_module
    import re

    page = re.sub(r"<(style|script)\b.*?</\1>", " ", page, flags=re.S | re.I)
    return html_module.unescape(re.sub(r"<[^>]+>", "", page))


def cmd_feedback(course: Course, args: argparse.Namespace) -> int:
    """HTML feedback for every graded student of each (or each named) assignment; an assignment
    nobody was graded on is skipped with one line. A page that still shows a hidden test's text
    is deleted (fail closed) and the command fails."""
    import nbformat

    from kvcourse_grader.leaks import hidden_text

    status = EXIT_OK
    for assignment in course.assignments(args.assignments):
        if not any(course.autograded.glob(f"*/{assignment}/*.ipynb")):
            print(f"{assignment}: nobody graded yet, no feedback (run `kvcourse-grade autograde`)")
            continue
        result = _nbgrader(
            course, ["generate_feedback", assignment, "--force"], f"feedback-{assignment}"
        )
        if not result.ok:
            status = EXIT_FAILED
        hidden = hidden_text(nbformat.read(course.source_notebook(assignment), as_version=4))
        for html in sorted(course.feedback.glob(f"*/{assignment}/*.html")):
            student = html.parent.parent.name
            text = html.read_text(errors="replace")
            if "HIDDEN TESTS" in text or _shows_hidden_lines(
                text, hidden, course, student, assignment
            ):
                html.unlink()  # fail closed: never leave a file that shows hidden tests
                print(f"{student:<16} {assignment:<20}  REMOVED {course.rel(html)} (hidden tests)")
                status = EXIT_FAILED
            else:
                print(f"{student:<16} {assignment:<20}  {course.rel(html)}")
    return status


# ---------------------------------------------------------------------------------------- export
def _export_behaviour(course: Course) -> None:
    """Write ``grading/behaviour.csv``: per student and assignment, what the code was seen doing
    when graded (the audit record's review findings), for the instructor; never imported."""
    from kvcourse_grader import audit, lms_out

    rows = audit.behaviour_table(course.autograded)
    target = lms_out.write_csv(rows, course.grading / "behaviour.csv")
    print(f"wrote {len(rows) - 1} behaviour finding(s) for review to {course.rel(target)}")


def _export_lms(course: Course, args: argparse.Namespace) -> int:
    from kvcourse_grader import lms_out

    assignment = course.assignments([args.assignment])[0] if args.assignment else None
    if args.lms == "moodle" and assignment is None:
        raise CommandError("a Moodle worksheet holds one assignment: say which with --assignment")
    with course.gradebook() as gb:
        try:
            grades = lms_out.read_grades(gb, [assignment] if assignment else None)
        except ValueError as err:
            raise CommandError(str(err)) from None
    skipped: list[str] = []
    if args.lms == "canvas":
        rows = lms_out.canvas_table(grades)
        default = course.grading / "grades-canvas.csv"
    else:
        rows, skipped = lms_out.moodle_table(grades, assignment)
        default = course.grading / f"grades-moodle-{assignment}.csv"
    target = lms_out.write_csv(rows, Path(args.to).resolve() if args.to else default)
    for g in grades:
        score = "no submission" if g.score is None else f"{g.score:5g} / {g.max_score:g}"
        line = f"{g.student:<16} {g.assignment}  "
        if g.student in skipped:
            print(f"{line}NOT EXPORTED  not a Moodle participant id (collect from a Moodle zip)")
        else:
            print(f"{line}{score}")
    print(f"wrote {len(rows) - 1} row(s) for {args.lms}'s import to {course.rel(target)}")
    _export_behaviour(course)
    return EXIT_FAILED if skipped else EXIT_OK


def cmd_export(course: Course, args: argparse.Namespace) -> int:
    import csv

    if args.lms in ("canvas", "moodle"):
        return _export_lms(course, args)
    target = Path(args.to).resolve() if args.to else course.grading / "grades.csv"
    extra = [f"--ExportPlugin.assignment={[args.assignment]!r}"] if args.assignment else []
    result = _nbgrader(course, ["export", "--to", str(target), *extra], "export")
    if not result.ok or not target.is_file():
        print("export FAILED")
        return EXIT_FAILED
    with open(target, newline="") as handle:
        rows = list(csv.DictReader(handle))
    for row in rows:
        print(
            f"{row['student_id']:<16} {row['assignment']}  "
            f"{float(row['score']):5g} / {float(row['max_score']):g}"
        )
    print(f"wrote {len(rows)} row(s) to {course.rel(target)}")
    _export_behaviour(course)
    return EXIT_OK


# ------------------------------------------------------------------------------------------ main
def _seed(text: str) -> int:
    """A ``--seed``: a whole number from 0 to 2**63 - 1."""
    try:
        value = int(text)
    except ValueError:
        value = -1
    if not 0 <= value < 2**63:
        raise argparse.ArgumentTypeError(f"not a seed: {text!r} (give a whole number, e.g. 1234)")
    return value


def _size(text: str) -> int:
    try:
        return runner.parse_size(text)
    except ValueError as err:
        raise argparse.ArgumentTypeError(str(err)) from None


def _workers(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"--workers takes a whole number ≥ 1, not {text!r}")
    return value


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="kvcourse-grade",
        description="Grade the course's nbgrader assignments, one command per step.",
    )
    parser.add_argument(
        "--course-root",
        help="the repository root (default: found from the current directory upward)",
    )
    parser.add_argument(
        "--db-url",
        help="the gradebook for every step, e.g. postgresql://user@host/db for parallel or "
        "distributed grading (default: c.CourseDirectory.db_url in grading/nbgrader_config.py)",
    )
    steps = parser.add_subparsers(dest="step", required=True, metavar="STEP")

    def assignments(p: argparse.ArgumentParser) -> None:
        p.add_argument("assignments", nargs="*", metavar="ASSIGNMENT", help="default: all")

    p = steps.add_parser("release", help="write student versions to notebooks/ from solutions/")
    assignments(p)
    p.set_defaults(run=cmd_release)

    add_bundle_parser(steps)

    p = steps.add_parser("samples", help="write sample submissions for a dry run")
    p.add_argument("assignment")
    p.add_argument("--out", required=True, help="folder for <student>.ipynb files")
    p.set_defaults(run=cmd_samples)

    p = steps.add_parser("collect", help="copy submissions into grading/submitted/")
    p.add_argument(
        "path",
        nargs="?",
        help="a folder of <student>.ipynb, <student>.zip or <student>/ entries; an LMS's "
        "'download all submissions' zip; or an nbgrader exchange (with <course_id>/inbound)",
    )
    p.add_argument("--assignment", help="needed when there is more than one assignment")
    p.add_argument(
        "--lms",
        choices=("canvas", "moodle", "plain", "auto"),
        help="how the zip (or folder) names its files (default: a folder is an inbox, a zip auto)",
    )
    p.add_argument("--exchange", metavar="DIR", help="collect from nbgrader's exchange at DIR")
    p.set_defaults(run=cmd_collect)

    p = steps.add_parser("autograde", help="grade every submission, many students at once")
    assignments(p)
    p.add_argument("--student", action="append", help="only this student (repeatable)")
    p.add_argument(
        "--timeout",
        type=float,
        default=runner.DEFAULT_TIMEOUT,
        help=f"seconds per student before the run is stopped (default {runner.DEFAULT_TIMEOUT:g})",
    )
    p.add_argument(
        "--cell-timeout",
        type=int,
        default=0,
        help="seconds per cell (default: Execute.timeout in grading/nbgrader_config.py)",
    )
    p.add_argument(
        "--seed",
        type=_seed,
        default=None,
        help="the seed of the random cases the hidden tests draw for this run, to try the same "
        "cases again (default: a new one per run, printed)",
    )
    p.add_argument(
        "--memory-limit",
        type=_size,
        default=runner.DEFAULT_MEMORY_LIMIT,
        help="address space per process, e.g. 4G; 0 for none (default 4G, Linux only)",
    )
    p.add_argument(
        "--unsandboxed",
        action="store_true",
        help="run student kernels without the bubblewrap sandbox (they can then read the "
        "solutions and the gradebook): only where bubblewrap is unavailable, for trusted work",
    )
    p.add_argument(
        "--workers",
        type=_workers,
        default=0,
        help="students graded at once on this machine (default: the CPU count, fewer if memory "
        "is short)",
    )
    p.add_argument(
        "--dask",
        metavar="ADDRESS",
        help="grade on the Dask distributed cluster whose scheduler is at ADDRESS (e.g. "
        "tcp://10.0.0.5:8786); its workers need the course at the same path and a --db-url "
        "server database",
    )
    p.add_argument(
        "--progress",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="show a progress bar (default: when stderr is a terminal)",
    )
    p.set_defaults(run=cmd_autograde)

    p = steps.add_parser("feedback", help="HTML feedback per student, hidden tests removed")
    assignments(p)
    p.set_defaults(run=cmd_feedback)

    p = steps.add_parser("export", help="grades to CSV, nbgrader's or an LMS's import format")
    p.add_argument("--to", help="CSV path (default: grading/grades[-canvas|-moodle-A].csv)")
    p.add_argument(
        "--lms",
        choices=("plain", "canvas", "moodle"),
        default="plain",
        help="plain: nbgrader's CSV; canvas: Canvas's gradebook import; moodle: one "
        "assignment's offline grading worksheet (needs --assignment)",
    )
    p.add_argument("--assignment", help="only this assignment (needed with --lms moodle)")
    p.set_defaults(run=cmd_export)

    add_similarity_parser(steps)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    # nbgrader's gradebook runs `alembic` from PATH; make it the one beside this Python.
    os.environ["PATH"] = str(Path(sys.executable).parent) + os.pathsep + os.environ.get("PATH", "")
    try:
        root = (
            runner.check_course_root(args.course_root)
            if args.course_root
            else runner.find_course_root()
        )
        course = Course.load(root, db_url=args.db_url)
        serialize_sqlite_sessions()
        return args.run(course, args)
    except (runner.CourseNotFound, CommandError) as err:
        print(f"kvcourse-grade: {err}", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:  # Ctrl-C outside a step's own handling: stop what runs, quietly
        runner.stop_all_runs()
        print("kvcourse-grade: interrupted", file=sys.stderr)
        return 130
    finally:
        sys.stdout.flush()


if __name__ == "__main__":
    sys.exit(main())
