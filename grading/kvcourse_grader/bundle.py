"""The student bundle: the released assignments and the course library, and nothing an instructor
keeps to themselves.

Students get the released notebooks (``notebooks/``) and the library they import; never
``solutions/`` (the solutions and the hidden tests) or ``grading/`` (gradebook, submissions,
samples). :func:`build_bundle` gathers exactly that into one zip for an LMS, or one folder for a
JupyterHub::

    kvcourse-student/
      README.md Makefile        how to set up, open, Validate and hand in (bundle_files/)
      pyproject.toml            the course's own, so `pip install -e .` installs the library
      notebooks/<A>/<A>.ipynb   the released version of every assignment, with its files
      lib/kvcourse/             the library, with the helpers the visible tests call (no grader)
      lab/                      the students' JupyterLab settings (grading/student_lab)
      MANIFEST.sha256           a checksum of every file, for `sha256sum -c`

Before it writes anything it checks that every assignment is released, that each release still
matches its source, and that no solution code, hidden test or nbgrader marker is in the bundle.
The zip is byte-identical from one build to the next. ``kvcourse-grade bundle`` runs it
(:func:`cmd_bundle`).
"""

from __future__ import annotations

import argparse
import hashlib
import io
import json
import os
import re
import shutil
import subprocess
import time
import zipfile
from dataclasses import dataclass
from pathlib import Path

from kvcourse_grader.course import CommandError, Course
from kvcourse_grader.stubs import PLAIN_STUB, is_stub_line

__all__ = [
    "DEFAULT_OUT",
    "MANIFEST",
    "TOP",
    "BundleReport",
    "add_bundle_parser",
    "build_bundle",
    "bundle_contents",
    "cmd_bundle",
]

#: The one folder at the top of the zip.
TOP = "kvcourse-student"
#: Where ``kvcourse-grade bundle`` writes without ``--out``, relative to the course root.
DEFAULT_OUT = Path("_build") / "student-bundle" / f"{TOP}.zip"
#: The bundle's list of files and their sha256, in ``sha256sum`` format.
MANIFEST = "MANIFEST.sha256"

_TEMPLATES = Path(__file__).resolve().parent / "bundle_files"
_NOTICES = ("LICENSE*", "LICENCE*", "NOTICE*", "COPYING*")
_SKIP_DIRS = {"__pycache__", ".ipynb_checkpoints"}
#: nbgrader's region markers, as a comment line in a cell or a file.
_MARKER = re.compile(r"^\s*#+\s*(BEGIN|END)\s+(SOLUTION|HIDDEN TESTS)\b")
_MARKER_WORDS = ("BEGIN SOLUTION", "END SOLUTION", "BEGIN HIDDEN TESTS", "END HIDDEN TESTS")
#: What a release puts where a solution was (and the raise that names its function, is_stub_line).
_STUBS = {"# YOUR CODE HERE", PLAIN_STUB, "YOUR ANSWER HERE"}
_NBGRADER_KEYS = ("grade", "grade_id", "solution", "locked", "points", "task")


def _is_stub(line: str) -> bool:
    return line in _STUBS or is_stub_line(line)


@dataclass(frozen=True)
class BundleReport:
    """What :func:`build_bundle` wrote: where, as what, which assignments and files, how big."""

    path: Path
    #: ``"zip"`` or ``"folder"``.
    kind: str
    assignments: tuple[str, ...]
    #: Every file, as a path inside the bundle (below ``kvcourse-student/`` in the zip), sorted.
    files: tuple[str, ...]
    #: Bytes: the zip's size, or the sum of the folder's files.
    size: int
    #: sha256 of the zip, or of the folder's MANIFEST.sha256.
    digest: str


# ---------------------------------------------------------------------------------- notebooks
def _cells(data: bytes, name: str) -> list[dict]:
    """A notebook's cells with each ``source`` joined into one string."""
    try:
        cells = json.loads(data.decode("utf-8"))["cells"]
    except (ValueError, KeyError, TypeError) as err:
        raise CommandError(f"{name} is not a readable notebook ({err})") from None
    for cell in cells:
        if isinstance(cell.get("source"), list):
            cell["source"] = "".join(cell["source"])
    return cells


def _nbgrader(cell: dict) -> dict:
    return cell.get("metadata", {}).get("nbgrader", {})


def _split(cell: dict) -> tuple[list[str], list[str], list[str]]:
    """A source cell's lines (stripped, blank ones dropped) outside nbgrader's regions, in its
    solution regions, and in its hidden-test regions. A solution cell without markers is one
    solution region, as nbgrader releases it."""
    outside: list[str] = []
    regions: dict[str, list[str]] = {"SOLUTION": [], "HIDDEN TESTS": []}
    lines = cell.get("source", "").split("\n")
    if _nbgrader(cell).get("solution") and not any(_MARKER.match(x) for x in lines):
        return [], [x.strip() for x in lines if x.strip()], []
    inside = None
    for line in lines:
        marker = _MARKER.match(line)
        if marker:
            inside = marker.group(2) if marker.group(1) == "BEGIN" else None
        elif line.strip():
            (regions[inside] if inside else outside).append(line.strip())
    return outside, regions["SOLUTION"], regions["HIDDEN TESTS"]


def _text_lines(cell: dict) -> list[str]:
    """Every line a student sees in a cell: its source and the text of its outputs."""
    texts = [cell.get("source", "")]
    for output in cell.get("outputs", []):
        texts += [output.get("text", "")] + list(output.get("traceback", []))
        texts += [v for k, v in output.get("data", {}).items() if k.startswith("text/")]
    joined = ["".join(t) if isinstance(t, list) else str(t) for t in texts]
    return [line.strip() for text in joined for line in text.split("\n") if line.strip()]


def _secrets(source: list[dict]) -> dict[str, str]:
    """Lines of the solution and hidden-test regions that occur nowhere else in the source
    notebook (so a release, which keeps everything else, can never show them), with their kind."""
    elsewhere, secret = set(_STUBS), {}
    for cell in source:
        outside, solution, hidden = _split(cell)
        elsewhere.update(outside)
        secret.update(dict.fromkeys(hidden, "hidden-test code"))
        secret.update(dict.fromkeys(solution, "solution code"))
    return {line: kind for line, kind in secret.items() if line not in elsewhere}


def _stale(source: list[dict], release: list[dict]) -> str | None:
    """Where a release no longer matches its source (None when it does): the same cells, the
    same nbgrader settings, and the same text outside the solution and hidden-test regions."""
    if len(source) != len(release):
        return f"it has {len(release)} cells, the source {len(source)}"
    for number, (src, rel) in enumerate(zip(source, release, strict=True), start=1):
        if src.get("cell_type") != rel.get("cell_type"):
            return f"cell {number} is {rel.get('cell_type')} in the release"
        if any(_nbgrader(src).get(k) != _nbgrader(rel).get(k) for k in _NBGRADER_KEYS):
            return f"cell {number} has other nbgrader settings (points, grade id, lock)"
        kept = [x.strip() for x in rel.get("source", "").split("\n") if x.strip()]
        outside = [x for x in _split(src)[0] if not _is_stub(x)]
        if [x for x in kept if not _is_stub(x)] != outside:
            return f"cell {number} differs"
    return None


def _check_assignment(course: Course, assignment: str, folder: dict[str, bytes]) -> None:
    """Refuse a release that leaks its source or no longer matches it (CommandError)."""
    source_path = course.source_notebook(assignment)
    release_path = course.release / assignment / f"{assignment}.ipynb"
    again = (
        f"run `kvcourse-grade release {assignment}` (or `make release`) and build the bundle again"
    )
    source = _cells(source_path.read_bytes(), course.rel(source_path))
    secrets = _secrets(source)
    for name in sorted(n for n in folder if n.endswith(".ipynb")):
        if any(word.encode() in folder[name] for word in _MARKER_WORDS):
            raise CommandError(f"{name} holds nbgrader's solution or hidden-test markers; {again}")
        for number, cell in enumerate(_cells(folder[name], name), start=1):
            for line in _text_lines(cell):
                if line in secrets:
                    raise CommandError(
                        f"{name} holds {secrets[line]} from {course.rel(source_path)} (cell "
                        f"{number}: {line[:60]!r}); {again}"
                    )
    why = _stale(source, _cells(release_path.read_bytes(), course.rel(release_path)))
    if why:
        raise CommandError(
            f"{course.rel(release_path)} is stale: it no longer matches {course.rel(source_path)} "
            f"({why}); {again}"
        )


# ------------------------------------------------------------------------------------ gathering
def _files_below(top: Path, root: Path) -> dict[str, bytes]:
    """Plain files below ``top`` as {path relative to ``root``: bytes}; caches, checkpoints,
    build metadata and hidden files left out. A symbolic link is refused: it may point anywhere."""
    found = {}
    for directory, dirs, names in os.walk(top):
        here = Path(directory)
        dirs[:] = sorted(
            d
            for d in dirs
            if d not in _SKIP_DIRS and not d.startswith(".") and not d.endswith(".egg-info")
        )
        for name in sorted(dirs) + sorted(names):
            if (here / name).is_symlink():  # os.walk would skip a linked folder: say so instead
                raise CommandError(
                    f"{here / name} is a symbolic link; copy the file or folder in instead"
                )
        for name in sorted(names):
            if not name.startswith(".") and Path(name).suffix not in (".pyc", ".pyo"):
                found[(here / name).relative_to(root).as_posix()] = (here / name).read_bytes()
    return found


def _student_readme(assignments: list[str]) -> bytes:
    listing = "\n".join(f"* `notebooks/{a}/{a}.ipynb`" for a in assignments)
    text = (_TEMPLATES / "README.md").read_text(encoding="utf-8")
    text = text.replace("{{assignments}}", f"The assignments:\n\n{listing}")
    return text.replace("{{example}}", assignments[0]).encode()


def bundle_contents(course: Course) -> tuple[list[str], dict[str, bytes]]:
    """The assignments and the files of the student bundle, ``{path in the bundle: bytes}``,
    after every check: raises :class:`CommandError` saying what to do when an assignment is not
    released, a release is stale, or solution code, hidden tests or nbgrader markers would ship."""
    if not isinstance(course, Course):
        raise CommandError(f"course must be a Course (Course.load(root)), got {course!r}")
    root = course.root
    assignments = course.assignments(None)
    missing = [a for a in assignments if not (course.release / a / f"{a}.ipynb").is_file()]
    if missing:
        raise CommandError(
            f"no student version of {', '.join(missing)} in {course.rel(course.release)}/; "
            f"run `kvcourse-grade release` (or `make release`) first"
        )
    files: dict[str, bytes] = {}
    for assignment in assignments:
        folder = {
            f"notebooks/{name}": data
            for name, data in _files_below(course.release / assignment, course.release).items()
        }
        _check_assignment(course, assignment, folder)
        files.update(folder)
    library = root / "lib" / "kvcourse"
    for needed in (
        library / "__init__.py",
        root / "pyproject.toml",
        course.grading / "student_lab",
    ):
        if not needed.exists():
            raise CommandError(f"the bundle needs {course.rel(needed)}, which this course lacks")
    files.update(_files_below(library, root))
    lab = course.grading / "student_lab"
    files.update({f"lab/{n}": d for n, d in _files_below(lab, lab).items() if n != "README.md"})
    for pattern in _NOTICES:
        files.update({p.name: p.read_bytes() for p in sorted(root.glob(pattern)) if p.is_file()})
    files["pyproject.toml"] = (root / "pyproject.toml").read_bytes()
    files["README.md"] = _student_readme(assignments)
    files["Makefile"] = (_TEMPLATES / "Makefile").read_bytes()
    for name, data in files.items():
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError:
            continue  # the gzipped traces
        if any(_MARKER.match(line) for line in text.split("\n")):
            raise CommandError(f"{name} holds a line with an nbgrader marker; remove it first")
    manifest = "".join(f"{hashlib.sha256(files[n]).hexdigest()}  {n}\n" for n in sorted(files))
    files[MANIFEST] = manifest.encode()
    return assignments, files


# -------------------------------------------------------------------------------------- writing
def _release_time(root: Path) -> tuple[int, int, int, int, int, int]:
    """The date every file of the zip carries: the course's last commit (or
    ``SOURCE_DATE_EPOCH``), so a student's JupyterLab shows when the course was made and two
    builds of one commit give the same bytes; outside git, today at midnight UTC."""
    epoch = os.environ.get("SOURCE_DATE_EPOCH", "").strip()
    if not epoch.isdigit():
        try:
            found = subprocess.run(
                ["git", "-C", str(root), "log", "-1", "--format=%ct"],
                capture_output=True,
                text=True,
                timeout=30,
            )
            epoch = found.stdout.strip() if found.returncode == 0 else ""
        except (OSError, subprocess.SubprocessError):
            epoch = ""
    seconds = int(epoch) if epoch.isdigit() else int(time.time()) // 86400 * 86400
    seconds = max(seconds, 315532800)  # a zip cannot say anything before 1980
    year, month, day, hour, minute, second = time.gmtime(seconds)[:6]
    return year, month, day, hour, minute, second


def _zip_bytes(files: dict[str, bytes], when: tuple[int, int, int, int, int, int]) -> bytes:
    """One zip, ``kvcourse-student/`` at the top, same bytes for the same files: sorted names,
    one timestamp (``when``) and fixed permissions."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        for name in sorted(files):
            info = zipfile.ZipInfo(f"{TOP}/{name}", date_time=when)
            info.create_system, info.external_attr = 3, 0o100644 << 16
            stored = name.endswith(".gz")  # already compressed
            info.compress_type = zipfile.ZIP_STORED if stored else zipfile.ZIP_DEFLATED
            archive.writestr(info, files[name], compresslevel=None if stored else 9)
    return buffer.getvalue()


def _check_out(course: Course, out: Path) -> None:
    """Refuse an output inside what instructors keep (or what the bundle is built from)."""
    root = course.root.resolve()
    kept = [course.source, course.grading, course.submitted, course.autograded, course.feedback]
    for folder in [*kept, course.release, root / "lib"]:
        folder = folder.resolve()
        if out == folder or folder in out.parents:
            raise CommandError(
                f"refusing to write the bundle inside {course.rel(folder)}/: it must stay apart "
                f"from the solutions, the grading files and its own sources; choose a path "
                f"elsewhere, e.g. the default {DEFAULT_OUT}"
            )
    if out == root or out in root.parents:
        raise CommandError(f"refusing to write the bundle over the course at {root}")


def _write_folder(out: Path, files: dict[str, bytes]) -> None:
    if out.exists():
        if not out.is_dir():
            raise CommandError(f"{out} is a file; name a folder, or a .zip file")
        if any(out.iterdir()) and not (out / MANIFEST).is_file():
            raise CommandError(
                f"{out} is a folder that holds other files (no {MANIFEST} of an earlier bundle); "
                f"name a new folder, e.g. {out / TOP}, or a .zip file"
            )
    staging = out.with_name(f".{out.name}.partial")
    shutil.rmtree(staging, ignore_errors=True)
    for name, data in files.items():
        (staging / name).parent.mkdir(parents=True, exist_ok=True)
        (staging / name).write_bytes(data)
    if out.exists():
        shutil.rmtree(out)
    staging.rename(out)


def build_bundle(course: Course, out: Path) -> BundleReport:
    """Write the student bundle to ``out``: a zip when its name ends in ``.zip`` (for an LMS),
    otherwise a folder (for a JupyterHub), after the checks of :func:`bundle_contents`.

    Raises :class:`CommandError` saying what to do when a check fails, or when ``out`` lies inside
    ``solutions/``, ``grading/``, ``notebooks/`` or ``lib/``, or is a folder with other files.
    """
    if not isinstance(out, (str, os.PathLike)):
        raise CommandError(f"out must be a path (a .zip file or a folder), got {out!r}")
    out = Path(out).resolve()
    _check_out(course, out)
    assignments, files = bundle_contents(course)
    out.parent.mkdir(parents=True, exist_ok=True)
    if out.suffix.lower() == ".zip":
        if out.is_dir():
            raise CommandError(f"{out} is a folder; name a .zip file, or a folder without .zip")
        data = _zip_bytes(files, _release_time(course.root))
        partial = out.with_name(f".{out.name}.partial")
        partial.write_bytes(data)
        os.replace(partial, out)
        kind, size, digest = "zip", len(data), hashlib.sha256(data).hexdigest()
    else:
        _write_folder(out, files)
        kind, size = "folder", sum(len(d) for d in files.values())
        digest = hashlib.sha256(files[MANIFEST]).hexdigest()
    return BundleReport(out, kind, tuple(assignments), tuple(sorted(files)), size, digest)


# ---------------------------------------------------------------------------------- the command
def cmd_bundle(course: Course, args: argparse.Namespace) -> int:
    """``kvcourse-grade bundle [--out PATH]``: build the bundle, print what it holds and what the
    instructor does next; 0 when written (a failed check raises :class:`CommandError`)."""
    out = getattr(args, "out", None)
    report = build_bundle(course, Path(out) if out else course.root / DEFAULT_OUT)
    print(
        f"checked {len(report.assignments)} assignment(s): released, current, no solution code, "
        "hidden tests or nbgrader markers"
    )
    print(
        f"wrote {course.rel(report.path)} ({report.kind}, {report.size / 2**20:.1f} MiB, "
        f"{len(report.files)} files, sha256 {report.digest[:16]}):"
    )
    parts = {
        "notebooks/": "the released assignments",
        "lib/kvcourse/": "the course library",
        "lab/": "the students' JupyterLab settings",
    }
    for prefix, what in parts.items():
        count = sum(name.startswith(prefix) for name in report.files)
        print(f"  {prefix:<14} {count:4d} file{'' if count == 1 else 's'}  {what}")
    print(f"  {' '.join(n for n in report.files if '/' not in n)}")
    print(f"  assignments: {', '.join(report.assignments)}")
    print("left out: solutions/, grading/ (but student_lab/, as lab/), tests/, bench/, book/")
    if report.kind == "zip":
        print(
            f"next: upload {report.path.name} to your LMS (or unzip it on the JupyterHub); "
            "students follow its README.md and hand in <student>.ipynb; then "
            "`kvcourse-grade collect INBOX --assignment A`"
        )
    else:
        print(
            f"next: put {report.path.name}/ where students work (e.g. the JupyterHub's shared "
            "folder; `pip install -e .` in it sets up the library); students follow its README.md "
            "and hand in <student>.ipynb; then `kvcourse-grade collect INBOX --assignment A`"
        )
    return 0


def add_bundle_parser(steps: argparse._SubParsersAction) -> argparse.ArgumentParser:
    """Register ``bundle`` on ``kvcourse-grade``'s subcommands (``steps``) and return its parser."""
    p = steps.add_parser(
        "bundle", help="the students' zip or folder: released notebooks and the library only"
    )
    p.add_argument(
        "--out",
        help=f"a .zip file (for an LMS) or a folder (for a JupyterHub); default {DEFAULT_OUT}",
    )
    p.set_defaults(run=cmd_bundle)
    return p
