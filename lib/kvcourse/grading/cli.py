"""``kvcourse-grade``: one command per grading step, on top of nbgrader.

    kvcourse-grade release   [ASSIGNMENT ...]            solutions/ -> notebooks/ (+ gradebook)
    kvcourse-grade samples   ASSIGNMENT --out DIR        sample submissions for a dry run
    kvcourse-grade collect   PATH [--assignment A]       notebooks or zips -> grading/submitted/
    kvcourse-grade autograde [ASSIGNMENT ...]            every submission, one nbgrader per student
    kvcourse-grade feedback  [ASSIGNMENT ...]            HTML feedback, hidden tests removed
    kvcourse-grade export    [--to grading/grades.csv]   grades as CSV

Every step runs nbgrader in ``<root>/grading`` (where ``nbgrader_config.py`` is); the course root is
found from the current directory upward, or given with ``--course-root``. Each step prints what it
did and exits non-zero when it failed; ``autograde`` also when some student could not be graded.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import sys
import time
import zipfile
from dataclasses import dataclass
from pathlib import Path

from kvcourse.grading import runner

EXIT_OK, EXIT_FAILED, EXIT_USAGE = 0, 1, 2
STUDENT_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.@+-]*$")
MAX_NOTEBOOK_BYTES = 50 * 2**20


class CommandError(Exception):
    """A step cannot go on; the message says why."""


# ------------------------------------------------------------------------------------ the course
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

    @classmethod
    def load(cls, root: Path) -> Course:
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
            db_url=cd.get("db_url", f"sqlite:///{base / 'gradebook.db'}"),
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

    def rel(self, path: Path) -> str:
        try:
            return str(path.relative_to(self.root))
        except ValueError:
            return str(path)


def _point_split(notebook_path: Path) -> tuple[float, float]:
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


def _nbgrader(course: Course, args: list[str], log_name: str, **limits) -> runner.RunResult:
    log = course.logs / f"{log_name}.log"
    result = runner.run_nbgrader(course.root, args, log=log, **limits)
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
        visible, hidden = _point_split(course.source_notebook(assignment))
        print(
            f"{assignment}: wrote {course.rel(target)} and registered it in the gradebook; "
            f"{visible + hidden:g} points ({visible:g} visible, {hidden:g} hidden)"
        )
    return status


# --------------------------------------------------------------------------------------- samples
def cmd_samples(course: Course, args: argparse.Namespace) -> int:
    from kvcourse.grading import samples

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
def _notebook_from_zip(path: Path, assignment: str) -> bytes:
    with zipfile.ZipFile(path) as archive:
        members = [
            m
            for m in archive.infolist()
            if m.filename.endswith(".ipynb")
            and "__MACOSX" not in m.filename
            and ".ipynb_checkpoints" not in m.filename
        ]
        named = [m for m in members if Path(m.filename).name == f"{assignment}.ipynb"]
        chosen = named or members
        if len(chosen) != 1:
            raise CommandError(f"expected one {assignment}.ipynb in the zip, found {len(chosen)}")
        if chosen[0].file_size > MAX_NOTEBOOK_BYTES:
            raise CommandError(f"{chosen[0].filename} is larger than {MAX_NOTEBOOK_BYTES} bytes")
        return archive.read(chosen[0])


def _notebook_from_dir(path: Path, assignment: str) -> bytes:
    found = [p for p in path.rglob("*.ipynb") if ".ipynb_checkpoints" not in p.parts]
    named = [p for p in found if p.name == f"{assignment}.ipynb"]
    chosen = named or found
    if len(chosen) != 1:
        raise CommandError(f"expected one {assignment}.ipynb in the folder, found {len(chosen)}")
    return chosen[0].read_bytes()


def cmd_collect(course: Course, args: argparse.Namespace) -> int:
    import nbformat

    if args.assignment:
        (assignment,) = course.assignments([args.assignment])
    else:
        known = course.assignments(None)
        if len(known) != 1:
            raise CommandError(f"say which assignment with --assignment ({', '.join(known)})")
        assignment = known[0]
    inbox = Path(args.path)
    if not inbox.is_dir():
        raise CommandError(f"{inbox} is not a folder")
    status, collected = EXIT_OK, 0
    for entry in sorted(inbox.iterdir()):
        if entry.name.startswith("."):
            continue
        student = entry.stem if entry.is_file() else entry.name
        try:
            if not STUDENT_ID.match(student):
                raise CommandError("a student id is letters, digits and _ . @ + - only")
            if entry.is_file() and entry.suffix == ".ipynb":
                if entry.stat().st_size > MAX_NOTEBOOK_BYTES:
                    raise CommandError(f"larger than {MAX_NOTEBOOK_BYTES} bytes")
                data = entry.read_bytes()
            elif entry.is_file() and entry.suffix == ".zip":
                data = _notebook_from_zip(entry, assignment)
            elif entry.is_dir():
                data = _notebook_from_dir(entry, assignment)
            else:
                continue
            try:
                nbformat.reads(data.decode("utf-8"), as_version=4)
            except Exception as err:
                raise CommandError(f"not a readable notebook ({type(err).__name__})") from None
        except (CommandError, zipfile.BadZipFile, OSError) as err:
            print(f"{student:<16} {assignment:<20}  NOT COLLECTED  {entry.name}: {err}")
            status = EXIT_FAILED
            continue
        target = course.submitted / student / assignment
        replaced = target.exists()
        if replaced:
            shutil.rmtree(target)
        target.mkdir(parents=True)
        (target / f"{assignment}.ipynb").write_bytes(data)
        collected += 1
        print(
            f"{student:<16} {assignment:<20}  {'replaced' if replaced else 'collected'}  "
            f"{entry.name} -> {course.rel(target)}"
        )
    print(f"{collected} submission(s) of {assignment} in {course.rel(course.submitted)}")
    return status


# ------------------------------------------------------------------------------------- autograde
def _run_notes(notebook: Path) -> list[str]:
    """What went wrong at run time, read from an autograded notebook's error outputs."""
    try:
        cells = json.loads(notebook.read_text()).get("cells", [])
    except (OSError, ValueError):
        return []
    counts: dict[str, int] = {}
    for cell in cells:
        for output in cell.get("outputs", []):
            if output.get("output_type") == "error":
                name = output.get("ename", "")
                counts[name] = counts.get(name, 0) + 1
    words = {
        "CellTimeoutError": "{} cell(s) timed out",
        "DeadKernelError": "the kernel died",
        "CellNotRun": "{} later cell(s) not run",
        "MemoryError": "MemoryError in {} cell(s)",
    }
    return [text.format(counts[name]) for name, text in words.items() if name in counts]


def _score(course: Course, assignment: str, student: str) -> tuple[float, float] | None:
    from nbgrader.api import MissingEntry

    try:
        with course.gradebook() as gb:
            submission = gb.find_submission(assignment, student)
            return float(submission.score), float(submission.max_score)
    except MissingEntry:
        return None


def cmd_autograde(course: Course, args: argparse.Namespace) -> int:
    from nbgrader.api import MissingEntry

    from kvcourse.grading.review import protected_ids, review_notebook

    limits = {"timeout": args.timeout, "memory_limit": args.memory_limit}
    print(
        f"limits per student: {args.timeout:g} s, memory {runner.format_size(args.memory_limit)}"
        f"{'' if sys.platform.startswith('linux') else ' (not enforced: Linux only)'}; "
        f"per cell: {f'{args.cell_timeout} s' if args.cell_timeout else 'as configured'}"
    )
    failed: list[str] = []
    graded = 0
    for assignment in course.assignments(args.assignments):
        with course.gradebook() as gb:
            try:
                gb.find_assignment(assignment)
            except MissingEntry:
                raise CommandError(
                    f"{assignment} is not in the gradebook; run `kvcourse-grade release` first"
                ) from None
        students = course.students(assignment)
        if args.student:
            students = [s for s in students if s in set(args.student)]
        if not students:
            print(f"{assignment}: no submissions in {course.rel(course.submitted)}")
            continue
        protected = protected_ids(course.source_notebook(assignment))
        for student in students:
            started = time.monotonic()
            line = f"{student:<16} {assignment:<20}"
            if not STUDENT_ID.match(student):
                print(f"{line}  NOT GRADED  the folder name is not a valid student id")
                failed.append(f"{student}/{assignment}")
                continue
            nb_args = ["autograde", assignment, "--student", student, "--force"]
            if args.cell_timeout:
                nb_args.append(f"--Execute.timeout={args.cell_timeout}")
            log = course.logs / assignment / f"{student}.log"
            autograded = course.autograded / student / assignment / f"{assignment}.ipynb"
            try:
                result = runner.run_nbgrader(course.root, nb_args, log=log, **limits)
                score = _score(course, assignment, student) if result.ok else None
                why = result.reason() if not result.ok else "nbgrader left no graded notebook"
            except Exception as err:  # keep going: one student never stops the run
                score, why = None, f"{type(err).__name__}: {err}"
            seconds = time.monotonic() - started
            if score is None or not autograded.is_file():
                print(f"{line}  NOT GRADED  {why} (log: {course.rel(log)})")
                failed.append(f"{student}/{assignment}")
                continue
            graded += 1
            notes = _run_notes(autograded)
            submitted = course.submitted / student / assignment / f"{assignment}.ipynb"
            flags = review_notebook(submitted, protected) if submitted.is_file() else []
            extra = "".join(
                [
                    f"  [{'; '.join(notes)}]" if notes else "",
                    f"  review: {'; '.join(flags)}" if flags else "",
                ]
            )
            print(f"{line}  {score[0]:5g} / {score[1]:g}  ({seconds:.1f} s){extra}")
    print(f"graded {graded} submission(s); {len(failed)} could not be graded")
    if failed:
        print(f"not graded: {', '.join(failed)} (see {course.rel(course.logs)}/)")
        return EXIT_FAILED
    return EXIT_OK


# -------------------------------------------------------------------------------------- feedback
def cmd_feedback(course: Course, args: argparse.Namespace) -> int:
    status = EXIT_OK
    for assignment in course.assignments(args.assignments):
        result = _nbgrader(
            course, ["generate_feedback", assignment, "--force"], f"feedback-{assignment}"
        )
        if not result.ok:
            status = EXIT_FAILED
        for html in sorted(course.feedback.glob(f"*/{assignment}/*.html")):
            student = html.parent.parent.name
            if "HIDDEN TESTS" in html.read_text(errors="replace"):
                html.unlink()  # fail closed: never leave a file that shows hidden tests
                print(f"{student:<16} {assignment:<20}  REMOVED {course.rel(html)} (hidden tests)")
                status = EXIT_FAILED
            else:
                print(f"{student:<16} {assignment:<20}  {course.rel(html)}")
    return status


# ---------------------------------------------------------------------------------------- export
def cmd_export(course: Course, args: argparse.Namespace) -> int:
    import csv

    target = Path(args.to).resolve() if args.to else course.grading / "grades.csv"
    result = _nbgrader(course, ["export", "--to", str(target)], "export")
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
    return EXIT_OK


# ------------------------------------------------------------------------------------------ main
def _size(text: str) -> int:
    try:
        return runner.parse_size(text)
    except ValueError as err:
        raise argparse.ArgumentTypeError(str(err)) from None


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="kvcourse-grade",
        description="Grade the course's nbgrader assignments, one command per step.",
    )
    parser.add_argument(
        "--course-root",
        help="the repository root (default: found from the current directory upward)",
    )
    steps = parser.add_subparsers(dest="step", required=True, metavar="STEP")

    def assignments(p: argparse.ArgumentParser) -> None:
        p.add_argument("assignments", nargs="*", metavar="ASSIGNMENT", help="default: all")

    p = steps.add_parser("release", help="write student versions to notebooks/ from solutions/")
    assignments(p)
    p.set_defaults(run=cmd_release)

    p = steps.add_parser("samples", help="write sample submissions for a dry run")
    p.add_argument("assignment")
    p.add_argument("--out", required=True, help="folder for <student>.ipynb files")
    p.set_defaults(run=cmd_samples)

    p = steps.add_parser("collect", help="copy submissions into grading/submitted/")
    p.add_argument("path", help="a folder of <student>.ipynb, <student>.zip or <student>/ entries")
    p.add_argument("--assignment", help="needed when there is more than one assignment")
    p.set_defaults(run=cmd_collect)

    p = steps.add_parser("autograde", help="grade every submission, one nbgrader per student")
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
        "--memory-limit",
        type=_size,
        default=runner.DEFAULT_MEMORY_LIMIT,
        help="address space per process, e.g. 4G; 0 for none (default 4G, Linux only)",
    )
    p.set_defaults(run=cmd_autograde)

    p = steps.add_parser("feedback", help="HTML feedback per student, hidden tests removed")
    assignments(p)
    p.set_defaults(run=cmd_feedback)

    p = steps.add_parser("export", help="grades to CSV")
    p.add_argument("--to", help="CSV path (default: grading/grades.csv)")
    p.set_defaults(run=cmd_export)
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
        course = Course.load(root)
        return args.run(course, args)
    except (runner.CourseNotFound, CommandError) as err:
        print(f"kvcourse-grade: {err}", file=sys.stderr)
        return EXIT_USAGE
    finally:
        sys.stdout.flush()


if __name__ == "__main__":
    sys.exit(main())
