"""Submissions from a learning-management system: Canvas and Moodle downloads, and nbgrader's
exchange, turned into one notebook per student.

A "download all submissions" zip names every file by its student. Canvas writes
``<sortablename>[_late]_<userid>_<submissionid>_<original name>`` (``-1``, ``-2`` added to
duplicate original names); Moodle a folder per participant, ``Jane Doe_12345_assignsubmission_file_/
<file>``, or the same prefix on flat files; a plain zip holds ``<student>.ipynb`` or
``<student>/…``. :func:`parse_canvas`, :func:`parse_moodle` and :func:`parse_plain` read those
names; :func:`read_lms` reads a zip (or an unpacked folder) member by member, never extracting
anything, and gives :class:`~kvcourse_grader.collect.Taken` and
:class:`~kvcourse_grader.collect.Refused` records: a member with an absolute path, ``..``, a
symbolic link, a size over :data:`~kvcourse_grader.collect.MAX_NOTEBOOK_BYTES` or contents that
do not match its declared size (a zip bomb) is refused on its own. :func:`read_exchange` takes the
newest submission per student from ``<exchange>/<course_id>/inbound/<student>+<A>+<time>[+<r>]/``,
as ``nbgrader collect`` does.
"""

from __future__ import annotations

import os
import re
import stat
import zipfile
import zlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from kvcourse_grader.collect import (
    MAX_NOTEBOOK_BYTES,
    Refused,
    Taken,
    check_notebook,
    notebook_from_dir,
)
from kvcourse_grader.course import STUDENT_ID, CommandError

__all__ = [
    "LMS_KINDS",
    "PATTERNS",
    "FileName",
    "canvas_name",
    "detect_lms",
    "parse_canvas",
    "parse_moodle",
    "parse_plain",
    "read_exchange",
    "read_lms",
]

#: The ``--lms`` choices of ``kvcourse-grade collect``.
LMS_KINDS = ("auto", "canvas", "moodle", "plain")

#: The naming patterns understood, as an unknown name's message lists them.
PATTERNS = {
    "canvas": "<sortablename>[_late]_<userid>_<submissionid>_<file>",
    "moodle": "<Full Name>_<participantid>_assignsubmission_file_[/]<file>",
    "plain": "<student>.ipynb or <student>/<file>",
}

_CANVAS = re.compile(
    r"^(?P<name>[^\W_]+(?:_[^\W_]+)*?)(?P<late>_(?i:late))?_(?P<user>\d+)_(?P<sub>\d+)_(?P<file>[^/]+)$"
)
_MOODLE = re.compile(r"^(?P<name>.+)_(?P<id>\d+)_assignsubmission_(?P<plugin>[a-z]+)_(?P<rest>.*)$")
_DUPLICATE = re.compile(r"^(?P<stem>.+)-(?P<n>\d+)(?P<ext>\.[^.]+)$")
_ERRORS = (CommandError, zipfile.BadZipFile, OSError, RuntimeError, NotImplementedError, zlib.error)


@dataclass(frozen=True)
class FileName:
    """What an LMS file name says: whose file it is and which of the student's files.

    ``file`` is the original file name (Canvas's ``-1`` for duplicates removed, kept in
    ``duplicate``), ``order`` Canvas's submission id (0 elsewhere), ``kind`` the Moodle plugin
    (``file``, ``onlinetext``; ``file`` elsewhere).
    """

    student: str
    file: str
    first_name: str = ""
    last_name: str = ""
    late: bool = False
    order: int = 0
    duplicate: int = 0
    kind: str = "file"


def canvas_name(
    sortable: str, user_id: int, submission_id: int, file: str, *, late: bool = False
) -> str:
    """The name Canvas gives a submitted file in its zip (the inverse of :func:`parse_canvas`)."""
    if not sortable or not re.fullmatch(r"[^\W_]+", sortable):
        raise ValueError(f"a Canvas sortable name is letters and digits only, got {sortable!r}")
    if user_id < 0 or submission_id < 0:
        raise ValueError(f"Canvas ids are zero or more, got {user_id} and {submission_id}")
    if not file or "/" in file:
        raise ValueError(f"the original file name must be one non-empty name, got {file!r}")
    return f"{sortable}{'_late' if late else ''}_{user_id}_{submission_id}_{file}"


def parse_canvas(name: str) -> FileName | None:
    """Student (the Canvas user id), sortable name, lateness and submission id of a Canvas zip
    member; None when ``name`` is not Canvas's pattern."""
    m = _CANVAS.match(name)
    if not m:
        return None
    file, duplicate = m["file"], 0
    if d := _DUPLICATE.match(file):
        file, duplicate = d["stem"] + d["ext"], int(d["n"])
    return FileName(
        student=str(int(m["user"])),
        file=file,
        last_name=m["name"],  # Canvas's sortable name has no separator: kept whole
        late=m["late"] is not None,
        order=int(m["sub"]),
        duplicate=duplicate,
    )


def parse_moodle(name: str) -> FileName | None:
    """Student (the Moodle participant id), full name and file of a Moodle zip member, in a
    folder per participant or flat; None when ``name`` is not Moodle's pattern."""
    top, _, below = name.partition("/")
    m = _MOODLE.match(top)
    if not m or not (m["rest"] or below) or (m["rest"] and below):
        return None
    first, _, last = m["name"].strip().partition(" ")
    return FileName(
        student=str(int(m["id"])),
        file=below or m["rest"],
        first_name=first,
        last_name=last,
        kind=m["plugin"],
    )


def parse_plain(name: str) -> FileName | None:
    """Student of a plain zip member, ``<student>.ipynb`` or ``<student>/<file>``; None for a
    top-level file that is not a notebook."""
    top, _, below = name.partition("/")
    if below:
        return FileName(student=top, file=below)
    stem, dot, ext = top.rpartition(".")
    return FileName(student=stem, file=top) if dot and ext == "ipynb" else None


_PARSERS: dict[str, Callable[[str], FileName | None]] = {
    "canvas": parse_canvas,
    "moodle": parse_moodle,
    "plain": parse_plain,
}


@dataclass(frozen=True)
class _Member:
    name: str
    size: int
    symlink: bool
    read: Callable[[], bytes]  # at most MAX_NOTEBOOK_BYTES + 1 bytes


def _zip_members(archive: zipfile.ZipFile) -> Iterator[_Member]:
    for info in archive.infolist():
        if info.is_dir():
            continue

        def read(info: zipfile.ZipInfo = info) -> bytes:
            # ZipExtFile stops at the declared size and checks the CRC: a lying size raises.
            with archive.open(info) as handle:
                return handle.read(MAX_NOTEBOOK_BYTES + 1)

        mode = info.external_attr >> 16
        yield _Member(info.filename, info.file_size, stat.S_ISLNK(mode), read)


def _folder_members(folder: Path) -> Iterator[_Member]:
    for here, dirs, files in os.walk(folder):
        for name in sorted(files + [d for d in dirs if os.path.islink(os.path.join(here, d))]):
            path = Path(here, name)

            def read(path: Path = path) -> bytes:
                with open(path, "rb") as handle:
                    return handle.read(MAX_NOTEBOOK_BYTES + 1)

            st = path.lstat()
            rel = path.relative_to(folder).as_posix()
            yield _Member(rel, st.st_size, stat.S_ISLNK(st.st_mode), read)


def _junk(name: str) -> bool:
    parts = PurePosixPath(name).parts
    return any(p in ("__MACOSX", ".ipynb_checkpoints") for p in parts) or (
        bool(parts) and parts[-1].startswith(".")
    )


def _unsafe(member: _Member) -> str | None:
    name = member.name.replace("\\", "/")
    if name.startswith("/") or re.match(r"^[A-Za-z]:", name):
        return "refused: an absolute path"
    if ".." in name.split("/"):
        return "refused: a path with '..'"
    if member.symlink:
        return "refused: a symbolic link"
    if member.size > MAX_NOTEBOOK_BYTES:
        return f"refused: {member.size} bytes, more than {MAX_NOTEBOOK_BYTES}"
    return None


def detect_lms(names: list[str]) -> str:
    """Which LMS named these members: the pattern most of them match; ``plain`` when none does."""
    names = [n for n in names if not _junk(n)]
    counts = {k: sum(_PARSERS[k](n) is not None for n in names) for k in ("moodle", "canvas")}
    best = max(counts, key=lambda k: counts[k])
    return best if counts[best] else "plain"


def _read_checked(member: _Member) -> bytes:
    try:
        data = member.read()
    except zipfile.BadZipFile as err:
        raise CommandError(
            f"refused: its contents do not match its declared size ({err}): a zip bomb?"
        ) from None
    if len(data) > MAX_NOTEBOOK_BYTES:
        raise CommandError(f"refused: more than {MAX_NOTEBOOK_BYTES} bytes")
    return check_notebook(data)


def _choose(
    student: str, found: list[tuple[_Member, FileName]], assignment: str, lms: str
) -> tuple[tuple[_Member, FileName] | None, str]:
    """The member to take for one student and a note, or None and why not."""
    notebooks = [(m, f) for m, f in found if f.file.endswith(".ipynb")]
    named = [(m, f) for m, f in notebooks if PurePosixPath(f.file).name == f"{assignment}.ipynb"]
    chosen = named or notebooks
    if not chosen:
        return None, f"no notebook among {', '.join(m.name for m, _ in found)}"
    if len(chosen) == 1:
        return chosen[0], "late" if chosen[0][1].late else ""
    if lms != "canvas":
        listed = ", ".join(m.name for m, _ in chosen)
        return None, f"expected one {assignment}.ipynb, found {len(chosen)}: {listed}"
    best = max(chosen, key=lambda mf: (mf[1].order, mf[1].duplicate))
    note = (
        f"newest of {len(chosen)} by Canvas submission id (Canvas zips carry no times)"
        f"{'; late' if best[1].late else ''}"
    )
    return best, note


def read_lms(
    path: Path, assignment: str, lms: str = "auto"
) -> tuple[str, list[Taken], list[Refused]]:
    """Read an LMS download (a zip, or the folder it unpacks to) into one checked notebook per
    student; return the LMS it was read as, what was taken and what was refused.

    ``lms`` is one of :data:`LMS_KINDS`; ``auto`` picks the pattern most members match.
    """
    if lms not in LMS_KINDS:
        raise ValueError(f"lms must be one of {', '.join(LMS_KINDS)}, got {lms!r}")
    path = Path(path)
    if path.is_dir():
        return _read_members(list(_folder_members(path)), assignment, lms)
    try:
        with zipfile.ZipFile(path) as archive:
            return _read_members(list(_zip_members(archive)), assignment, lms)
    except zipfile.BadZipFile as err:
        raise CommandError(f"{path} is not a readable zip ({err})") from None


def _read_members(
    members: list[_Member], assignment: str, lms: str
) -> tuple[str, list[Taken], list[Refused]]:
    if lms == "auto":
        lms = detect_lms([m.name for m in members])
    parse = _PARSERS[lms]
    refused: list[Refused] = []
    by_student: dict[str, list[tuple[_Member, FileName]]] = {}
    for member in members:
        if _junk(member.name):
            continue
        parsed = parse(member.name)
        if (why := _unsafe(member)) is not None:
            refused.append(Refused(parsed.student if parsed else "", member.name, why))
        elif parsed is None and lms == "plain" and member.name.endswith(".zip"):
            refused.append(Refused(member.name[:-4], member.name, "a zip in the zip: unpack it"))
        elif parsed is None and lms == "plain" and "/" not in member.name:
            continue  # a stray top-level file, as in an inbox folder
        elif parsed is None:
            understood = "; ".join(f"{k}: {v}" for k, v in PATTERNS.items())
            why = f"not a {lms} name (names understood: {understood}); pass --lms to choose"
            refused.append(Refused("", member.name, why))
        elif not STUDENT_ID.match(parsed.student):
            refused.append(
                Refused("", member.name, "a student id is letters, digits and _ . @ + -")
            )
        elif parsed.kind == "file":
            by_student.setdefault(parsed.student, []).append((member, parsed))
    taken: list[Taken] = []
    for student, found in sorted(by_student.items()):
        chosen, note = _choose(student, found, assignment, lms)
        if chosen is None:
            refused.append(Refused(student, found[0][0].name, note))
            continue
        member, name = chosen
        try:
            data = _read_checked(member)
        except _ERRORS as err:
            refused.append(Refused(student, member.name, str(err)))
            continue
        taken.append(Taken(student, member.name, data, name.first_name, name.last_name, note))
    return lms, taken, refused


def read_exchange(
    exchange: Path, course_id: str, assignment: str
) -> tuple[list[Taken], list[Refused]]:
    """The newest submission of ``assignment`` per student in nbgrader's exchange, with its
    submission time (for ``timestamp.txt``), as ``nbgrader collect`` picks it."""
    from nbgrader.utils import parse_utc

    inbound = Path(exchange) / course_id / "inbound"
    if not inbound.is_dir():
        raise CommandError(f"{exchange} has no {course_id}/inbound folder (nbgrader's exchange)")
    pattern = re.compile(rf"^(?P<student>.+)\+{re.escape(assignment)}\+(?P<time>[^+]+)(\+[^+]*)?$")
    refused: list[Refused] = []
    newest: dict[str, list[tuple[object, str, Path]]] = {}
    for folder in sorted(inbound.iterdir()):
        m = pattern.match(folder.name)
        if not m:
            continue
        student = m["student"]
        if folder.is_symlink() or not folder.is_dir():
            refused.append(Refused(student, folder.name, "refused: not a plain folder"))
            continue
        if not STUDENT_ID.match(student):
            refused.append(
                Refused("", folder.name, "a student id is letters, digits and _ . @ + -")
            )
            continue
        try:
            when = parse_utc(m["time"])
        except (ValueError, OverflowError):
            refused.append(Refused(student, folder.name, f"cannot read the time {m['time']!r}"))
            continue
        newest.setdefault(student, []).append((when, m["time"], folder))
    taken: list[Taken] = []
    for student, found in sorted(newest.items()):
        _, text, folder = max(found, key=lambda f: f[0])
        note = f"newest of {len(found)}" if len(found) > 1 else ""
        try:
            data = check_notebook(notebook_from_dir(folder, assignment))
        except _ERRORS as err:
            refused.append(Refused(student, folder.name, str(err)))
            continue
        taken.append(
            Taken(student, f"{course_id}/inbound/{folder.name}", data, note=note, timestamp=text)
        )
    return taken, refused
