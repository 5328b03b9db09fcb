"""Taking submissions in: one notebook per student, from a file, a zip or a folder.

An inbox holds ``<student>.ipynb``, ``<student>.zip`` or ``<student>/…`` (the notebook anywhere
below). :func:`read_entry` finds the assignment's notebook in one entry and checks it is a notebook
of sane size; :func:`store` puts it where nbgrader looks, ``grading/submitted/<student>/<A>/``.
:func:`inbox_entries` reads a whole inbox into :class:`Taken` and :class:`Refused` records, the same
records :mod:`kvcourse_grader.lms_in` makes from an LMS zip or nbgrader's exchange, and
:func:`store_all` stores them, prints one line each and records the students' names.
``kvcourse-grade collect`` (:mod:`kvcourse_grader.cli`) puts them together.
"""

from __future__ import annotations

import shutil
import zipfile
from dataclasses import dataclass
from pathlib import Path

from kvcourse_grader.course import STUDENT_ID, CommandError, Course

__all__ = [
    "ENTRY_ERRORS",
    "MAX_NOTEBOOK_BYTES",
    "Refused",
    "Taken",
    "check_notebook",
    "inbox_entries",
    "notebook_from_dir",
    "notebook_from_zip",
    "read_entry",
    "store",
    "store_all",
    "student_of",
]

#: A larger notebook is refused (outputs, or something that is not a notebook at all).
MAX_NOTEBOOK_BYTES = 50 * 2**20

#: What an unreadable entry raises, besides :class:`CommandError`.
ENTRY_ERRORS = (CommandError, zipfile.BadZipFile, OSError)


@dataclass(frozen=True)
class Taken:
    """One student's notebook, read and checked, ready for :func:`store`.

    ``source`` names where it came from (an inbox entry, a zip member, an exchange folder);
    ``first_name``/``last_name`` are the names an LMS gave (empty when none); ``note`` says how it
    was chosen among several; ``timestamp`` is nbgrader's submission time, as text, or None.
    """

    student: str
    source: str
    data: bytes
    first_name: str = ""
    last_name: str = ""
    note: str = ""
    timestamp: str | None = None


@dataclass(frozen=True)
class Refused:
    """An entry that looked like a submission but cannot be taken, and why."""

    student: str
    source: str
    reason: str


def student_of(entry: Path) -> str:
    """The student an inbox entry belongs to: its name without ``.ipynb`` or ``.zip``."""
    return entry.stem if entry.is_file() else entry.name


def check_notebook(data: bytes) -> bytes:
    """``data`` unchanged when it is a readable notebook; :class:`CommandError` otherwise."""
    import nbformat

    try:
        nbformat.reads(data.decode("utf-8"), as_version=4)
    except Exception as err:
        raise CommandError(f"not a readable notebook ({type(err).__name__})") from None
    return data


def notebook_from_zip(path: Path, assignment: str) -> bytes:
    """The one ``<assignment>.ipynb`` (or the one notebook) in a zip, macOS clutter ignored."""
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
        with archive.open(chosen[0]) as handle:  # capped: the declared size may lie
            data = handle.read(MAX_NOTEBOOK_BYTES + 1)
        if len(data) > MAX_NOTEBOOK_BYTES:
            raise CommandError(f"{chosen[0].filename} is larger than {MAX_NOTEBOOK_BYTES} bytes")
        return data


def notebook_from_dir(path: Path, assignment: str) -> bytes:
    """The one ``<assignment>.ipynb`` (or the one notebook) anywhere below a folder; a symbolic
    link or an oversized notebook is refused."""
    found = [p for p in path.rglob("*.ipynb") if ".ipynb_checkpoints" not in p.parts]
    named = [p for p in found if p.name == f"{assignment}.ipynb"]
    chosen = named or found
    if len(chosen) != 1:
        raise CommandError(f"expected one {assignment}.ipynb in the folder, found {len(chosen)}")
    if chosen[0].is_symlink():
        raise CommandError(f"{chosen[0].name} is a symbolic link, not a file")
    if chosen[0].stat().st_size > MAX_NOTEBOOK_BYTES:
        raise CommandError(f"{chosen[0].name} is larger than {MAX_NOTEBOOK_BYTES} bytes")
    return chosen[0].read_bytes()


def read_entry(entry: Path, assignment: str) -> bytes | None:
    """The notebook an inbox entry holds, checked; None for an entry that is not a submission.

    Raises :class:`CommandError` (or an error of :data:`ENTRY_ERRORS`) saying why an entry that
    looks like a submission cannot be taken.
    """
    if not STUDENT_ID.match(student_of(entry)):
        raise CommandError("a student id is letters, digits and _ . @ + - only")
    if entry.is_symlink():
        raise CommandError("a symbolic link, not a file or folder")
    if entry.is_file() and entry.suffix == ".ipynb":
        if entry.stat().st_size > MAX_NOTEBOOK_BYTES:
            raise CommandError(f"larger than {MAX_NOTEBOOK_BYTES} bytes")
        data = entry.read_bytes()
    elif entry.is_file() and entry.suffix == ".zip":
        data = notebook_from_zip(entry, assignment)
    elif entry.is_dir():
        data = notebook_from_dir(entry, assignment)
    else:
        return None
    return check_notebook(data)


def inbox_entries(inbox: Path, assignment: str) -> tuple[list[Taken], list[Refused]]:
    """Every submission in an inbox folder of ``<student>.ipynb``, ``<student>.zip`` and
    ``<student>/`` entries, read and checked; hidden entries and other files are left out."""
    if not inbox.is_dir():
        raise CommandError(f"{inbox} is not a folder")
    taken: list[Taken] = []
    refused: list[Refused] = []
    for entry in sorted(inbox.iterdir()):
        if entry.name.startswith("."):
            continue
        student = student_of(entry)
        try:
            data = read_entry(entry, assignment)
        except ENTRY_ERRORS as err:
            refused.append(Refused(student, entry.name, str(err)))
            continue
        if data is not None:
            taken.append(Taken(student, entry.name, data))
    return taken, refused


def store(
    course: Course, student: str, assignment: str, data: bytes, timestamp: str | None = None
) -> tuple[Path, bool]:
    """Write a submission where nbgrader looks for it; return its folder and whether it replaced
    an earlier one.

    ``timestamp`` (nbgrader's submission time, e.g. ``2024-03-01 12:00:00.000000 UTC``) goes to
    ``timestamp.txt`` beside the notebook, as ``nbgrader collect`` leaves it, for late penalties.
    """
    if not STUDENT_ID.match(student):
        raise CommandError(f"{student!r} is not a student id (letters, digits and _ . @ + -)")
    target = course.submitted / student / assignment
    replaced = target.exists()
    if replaced:
        shutil.rmtree(target)
    target.mkdir(parents=True)
    (target / f"{assignment}.ipynb").write_bytes(data)
    if timestamp is not None:
        (target / "timestamp.txt").write_text(timestamp)
    return target, replaced


def _record_names(course: Course, taken: list[Taken]) -> None:
    named = [t for t in taken if t.first_name or t.last_name]
    if not named:
        return
    try:
        with course.gradebook() as gb:
            for t in named:
                names = {"first_name": t.first_name, "last_name": t.last_name}
                gb.update_or_create_student(t.student, **{k: v for k, v in names.items() if v})
    except CommandError as err:
        print(f"names not recorded ({err}); collect again after that to record them")
        return
    print(f"recorded the names of {len(named)} student(s) in the gradebook")


def store_all(course: Course, assignment: str, taken: list[Taken], refused: list[Refused]) -> bool:
    """Store every taken submission and print one line per submission and per refused entry
    (``NOT COLLECTED``); record the LMS names in the gradebook. True when nothing was refused."""
    for r in refused:
        print(f"{r.student or '?':<16} {assignment:<20}  NOT COLLECTED  {r.source}: {r.reason}")
    for t in taken:
        target, replaced = store(course, t.student, assignment, t.data, t.timestamp)
        extra = "".join(
            [f"  [{t.note}]" if t.note else "", f"  submitted {t.timestamp}" if t.timestamp else ""]
        )
        print(
            f"{t.student:<16} {assignment:<20}  {'replaced' if replaced else 'collected'}  "
            f"{t.source} -> {course.rel(target)}{extra}"
        )
    _record_names(course, taken)
    print(f"{len(taken)} submission(s) of {assignment} in {course.rel(course.submitted)}")
    return not refused
