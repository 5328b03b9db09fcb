"""Taking submissions in: one notebook per student, from a file, a zip or a folder.

An inbox holds ``<student>.ipynb``, ``<student>.zip`` or ``<student>/…`` (the notebook anywhere
below). :func:`read_entry` finds the assignment's notebook in one entry and checks it is a notebook
of sane size; :func:`store` puts it where nbgrader looks, ``grading/submitted/<student>/<A>/``.
``kvcourse-grade collect`` (:mod:`kvcourse.grading.cli`) runs them over a whole inbox.
"""

from __future__ import annotations

import shutil
import zipfile
from pathlib import Path

from kvcourse.grading.course import STUDENT_ID, CommandError, Course

#: A larger notebook is refused (outputs, or something that is not a notebook at all).
MAX_NOTEBOOK_BYTES = 50 * 2**20

#: What an unreadable entry raises, besides :class:`CommandError`.
ENTRY_ERRORS = (CommandError, zipfile.BadZipFile, OSError)


def student_of(entry: Path) -> str:
    """The student an inbox entry belongs to: its name without ``.ipynb`` or ``.zip``."""
    return entry.stem if entry.is_file() else entry.name


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
        return archive.read(chosen[0])


def notebook_from_dir(path: Path, assignment: str) -> bytes:
    """The one ``<assignment>.ipynb`` (or the one notebook) anywhere below a folder."""
    found = [p for p in path.rglob("*.ipynb") if ".ipynb_checkpoints" not in p.parts]
    named = [p for p in found if p.name == f"{assignment}.ipynb"]
    chosen = named or found
    if len(chosen) != 1:
        raise CommandError(f"expected one {assignment}.ipynb in the folder, found {len(chosen)}")
    return chosen[0].read_bytes()


def read_entry(entry: Path, assignment: str) -> bytes | None:
    """The notebook an inbox entry holds, checked; None for an entry that is not a submission.

    Raises :class:`CommandError` (or an error of :data:`ENTRY_ERRORS`) saying why an entry that
    looks like a submission cannot be taken.
    """
    import nbformat

    if not STUDENT_ID.match(student_of(entry)):
        raise CommandError("a student id is letters, digits and _ . @ + - only")
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
    try:
        nbformat.reads(data.decode("utf-8"), as_version=4)
    except Exception as err:
        raise CommandError(f"not a readable notebook ({type(err).__name__})") from None
    return data


def store(course: Course, student: str, assignment: str, data: bytes) -> tuple[Path, bool]:
    """Write a submission where nbgrader looks for it; return its folder and whether it replaced
    an earlier one."""
    target = course.submitted / student / assignment
    replaced = target.exists()
    if replaced:
        shutil.rmtree(target)
    target.mkdir(parents=True)
    (target / f"{assignment}.ipynb").write_bytes(data)
    return target, replaced
