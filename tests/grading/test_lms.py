"""Submissions in from Canvas, Moodle and nbgrader's exchange, grades out to Canvas and Moodle
(kvcourse_grader.lms_in, kvcourse_grader.lms_out and `kvcourse-grade collect/export`).

The zips are built here with zipfile, hostile members included; the gradebook is nbgrader's own,
filled through its API (a release would take seconds), except in the one slow end-to-end test.
"""

from __future__ import annotations

import csv
import os
import re
import shutil
import stat
import sys
import warnings
import zipfile
from datetime import datetime
from pathlib import Path

import pytest
from grading_course import A0, ROOT, cli, copy_course
from hypothesis import given, settings
from hypothesis import strategies as st

from kvcourse_grader import lms_in, lms_out
from kvcourse_grader.cli import main
from kvcourse_grader.collect import MAX_NOTEBOOK_BYTES
from kvcourse_grader.course import Course

NB = (ROOT / "solutions" / A0 / f"{A0}.ipynb").read_bytes()
#: The same notebook, told apart by a trailing newline (still valid JSON).
NB2 = NB + b"\n"
BIG = b"\0" * (MAX_NOTEBOOK_BYTES + 2**20)


# ------------------------------------------------------------------------------------- helpers
def make_zip(path: Path, members: dict[str, bytes], *, bomb: str = "") -> Path:
    """A zip of ``members``; ``bomb`` names one whose declared size is forged down to 1000."""
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as archive:
        for name, data in members.items():
            info = zipfile.ZipInfo(name)
            info.compress_type = zipfile.ZIP_DEFLATED
            if name.startswith("link"):
                info.external_attr = (stat.S_IFLNK | 0o777) << 16
            archive.writestr(info, data)
    if bomb:
        raw = bytearray(path.read_bytes())
        at = 0
        while (at := raw.find(b"PK\x01\x02", at + 1)) > 0:  # central directory entries
            size = int.from_bytes(raw[at + 28 : at + 30], "little")
            if raw[at + 46 : at + 46 + size] == bomb.encode():
                raw[at + 24 : at + 28] = (1000).to_bytes(4, "little")
        path.write_bytes(bytes(raw))
    return path


HOSTILE = {
    "../x.ipynb": NB,
    "/tmp/kvcourse-abs/x.ipynb": NB,
    "link_333_400_a0_kv_sizing.ipynb": b"/etc/passwd",  # a symbolic link (see make_zip)
    "big_444_500_a0_kv_sizing.ipynb": BIG,
    "bomb_555_600_a0_kv_sizing.ipynb": BIG,
    "pdf_666_700_report.pdf": b"%PDF-1.4",
    "bad_777_800_a0_kv_sizing.ipynb": b"not json",
}
CANVAS = {
    "doejane_12345_100_a0_kv_sizing.ipynb": NB,
    "doejane_late_12345_200_a0_kv_sizing-1.ipynb": NB2,  # the late resubmission
    "roe_ann_222_300_a0_kv_sizing.ipynb": NB,
    "smithbo_4242_310_my_work.ipynb": NB2,  # the one notebook, under another name
    "__MACOSX/._doejane_12345_100_a0_kv_sizing.ipynb": b"junk",
}


def snapshot(root: Path) -> dict[str, tuple[int, int]]:
    return {
        str(p.relative_to(root)): (p.stat().st_size, p.stat().st_mtime_ns)
        for p in root.rglob("*")
        if p.is_file()
    }


def grading(*argv: str, root: Path, capsys) -> tuple[int, str]:
    """`kvcourse-grade --course-root ROOT ARGV`, in this process; (exit status, its output)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # nbgrader's SQLAlchemy warnings
        status = main(["--course-root", str(root), *argv])
    captured = capsys.readouterr()
    return status, captured.out + captured.err


@pytest.fixture(scope="module")
def empty_gradebook(tmp_path_factory) -> Path:
    """A gradebook that knows a0 (two test cells, 4 + 6 points), made once: creating one runs
    alembic, which takes seconds."""
    from nbgrader.api import Gradebook

    path = tmp_path_factory.mktemp("gradebook") / "gradebook.db"
    old_path = os.environ["PATH"]
    os.environ["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{old_path}"
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            with Gradebook(f"sqlite:///{path}", "kvcourse") as gb:
                gb.add_assignment(A0)
                gb.add_notebook(A0, A0)
                gb.add_grade_cell("t1", A0, A0, max_score=4, cell_type="code")
                gb.add_grade_cell("t2", A0, A0, max_score=6, cell_type="code")
    finally:
        os.environ["PATH"] = old_path
    return path


@pytest.fixture
def course(tmp_path, monkeypatch, empty_gradebook) -> Course:
    """A course copy with a copy of :func:`empty_gradebook`."""
    monkeypatch.setenv("PATH", os.environ["PATH"])  # main() prepends to it; restored after
    course = Course.load(copy_course(tmp_path / "course").resolve())
    shutil.copy2(empty_gradebook, course.grading / "gradebook.db")
    return course


def submitted(course: Course, student: str) -> bytes | None:
    path = course.submitted / student / A0 / f"{A0}.ipynb"
    return path.read_bytes() if path.is_file() else None


# ------------------------------------------------------------------------------------- names
@settings(max_examples=200, deadline=None)
@given(
    sortable=st.text("abcdefghijklmnopqrstuvwxyz0123456789", min_size=1, max_size=12),
    late=st.booleans(),
    user=st.integers(0, 10**9),
    sub=st.integers(0, 10**9),
    stem=st.text("abcdefghijklmnopqrstuvwxyz0123456789_. ", min_size=1, max_size=20),
    duplicate=st.integers(0, 3),
)
def test_canvas_names_round_trip(sortable, late, user, sub, stem, duplicate):
    original = f"{stem}.ipynb"
    shown = f"{stem}-{duplicate}.ipynb" if duplicate else original
    parsed = lms_in.parse_canvas(lms_in.canvas_name(sortable, user, sub, shown, late=late))
    assert parsed == lms_in.FileName(
        student=str(user),
        file=original,
        last_name=sortable,
        late=late,
        order=sub,
        duplicate=duplicate,
    )


def test_names_of_each_lms():
    canvas = lms_in.parse_canvas("doejane_LATE_12345_67890_a0_kv_sizing-2.ipynb")
    assert (canvas.student, canvas.last_name, canvas.late, canvas.order) == (
        "12345",
        "doejane",
        True,
        67890,
    )
    assert (canvas.file, canvas.duplicate, canvas.first_name) == (f"{A0}.ipynb", 2, "")
    assert lms_in.parse_canvas("Jane Doe_12345_assignsubmission_file_x.ipynb") is None
    assert lms_in.parse_canvas("doejane_12345_x.ipynb") is None  # no submission id
    assert lms_in.parse_canvas("ada.ipynb") is None
    folder = lms_in.parse_moodle("Jane van Doe_812_assignsubmission_file_/work/a0.ipynb")
    assert (folder.student, folder.first_name, folder.last_name, folder.file) == (
        "812",
        "Jane",
        "van Doe",
        "work/a0.ipynb",
    )
    flat = lms_in.parse_moodle("Jane Doe_812_assignsubmission_file_a0_kv_sizing.ipynb")
    assert (flat.student, flat.file, flat.kind) == ("812", f"{A0}.ipynb", "file")
    text = lms_in.parse_moodle("Jane Doe_812_assignsubmission_onlinetext_onlinetext.html")
    assert text.kind == "onlinetext"
    assert lms_in.parse_moodle("Jane Doe_812_assignsubmission_file_") is None
    assert lms_in.parse_moodle("doejane_12345_67890_a0.ipynb") is None
    assert lms_in.parse_plain("ada.ipynb") == lms_in.FileName("ada", "ada.ipynb")
    assert lms_in.parse_plain("bea/work/a0.ipynb") == lms_in.FileName("bea", "work/a0.ipynb")
    assert lms_in.parse_plain("notes.txt") is None
    assert lms_in.detect_lms(list(CANVAS) + ["readme.txt"]) == "canvas"
    assert lms_in.detect_lms(["Jane Doe_812_assignsubmission_file_/a0.ipynb"]) == "moodle"
    assert lms_in.detect_lms(["ada.ipynb", "bea/a0.ipynb"]) == "plain"
    with pytest.raises(ValueError, match="letters and digits only"):
        lms_in.canvas_name("doe, jane", 1, 2, "a.ipynb")
    with pytest.raises(ValueError, match="one non-empty name"):
        lms_in.canvas_name("doejane", 1, 2, "dir/a.ipynb")
    with pytest.raises(ValueError, match="lms must be one of auto, canvas"):
        lms_in.read_lms(Path("x.zip"), A0, "blackboard")


# ---------------------------------------------------------------------------------------- zips
@pytest.fixture(scope="module")
def hostile_zip(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("zips") / "canvas-hostile.zip"
    return make_zip(path, {**CANVAS, **HOSTILE}, bomb="bomb_555_600_a0_kv_sizing.ipynb")


def test_canvas_zip_takes_the_newest_and_refuses_each_bad_member(hostile_zip):
    lms, taken, refused = lms_in.read_lms(hostile_zip, A0)
    assert lms == "canvas"
    got = {t.student: t for t in taken}
    assert sorted(got) == ["12345", "222", "4242"]
    assert got["12345"].data == NB2 and got["12345"].last_name == "doejane"
    assert got["12345"].note == (
        "newest of 2 by Canvas submission id (Canvas zips carry no times); late"
    )
    assert got["222"].last_name == "roe_ann" and got["4242"].source.endswith("my_work.ipynb")
    reasons = {r.source: r.reason for r in refused}
    assert reasons == {
        "../x.ipynb": "refused: a path with '..'",
        "/tmp/kvcourse-abs/x.ipynb": "refused: an absolute path",
        "link_333_400_a0_kv_sizing.ipynb": "refused: a symbolic link",
        "big_444_500_a0_kv_sizing.ipynb": f"refused: {len(BIG)} bytes, more than "
        f"{MAX_NOTEBOOK_BYTES}",
        "bomb_555_600_a0_kv_sizing.ipynb": "refused: its contents do not match its declared "
        "size (Bad CRC-32 for file 'bomb_555_600_a0_kv_sizing.ipynb'): a zip bomb?",
        "pdf_666_700_report.pdf": "no notebook among pdf_666_700_report.pdf",
        "bad_777_800_a0_kv_sizing.ipynb": "not a readable notebook (NotJSONError)",
    }
    assert {r.student for r in refused} == {"", "333", "444", "555", "666", "777"}


def test_collect_a_canvas_zip(course, hostile_zip, tmp_path, capsys):
    before = snapshot(tmp_path)
    status, out = grading(
        "collect",
        str(hostile_zip),
        "--assignment",
        A0,
        root=course.root,
        capsys=capsys,
    )
    assert status == 1
    assert "canvas-hostile.zip: read as a canvas download" in out
    for name in HOSTILE:
        assert re.search(rf"NOT COLLECTED  {re.escape(name)}: ", out), name
    assert re.search(r"^\?\s+a0_kv_sizing\s+NOT COLLECTED  \.\./x\.ipynb: refused", out, re.M)
    assert re.search(
        r"^12345\s+a0_kv_sizing\s+collected  doejane_late_12345_200_\S+ -> "
        r"grading/submitted/12345/a0_kv_sizing  \[newest of 2",
        out,
        re.M,
    )
    assert "recorded the names of 3 student(s) in the gradebook" in out
    assert "3 submission(s) of a0_kv_sizing in grading/submitted" in out
    assert submitted(course, "12345") == NB2 and submitted(course, "222") == NB
    assert sorted(p.name for p in course.submitted.iterdir()) == ["12345", "222", "4242"]
    changed = {p for p, v in snapshot(tmp_path).items() if before.get(p) != v}
    assert changed and all(
        p.startswith("course/grading/submitted/")
        or p in ("course/grading/gradebook.db", "course/grading/gradebook.db.lock")
        for p in changed
    ), changed
    assert not (tmp_path / "x.ipynb").exists() and not Path("/tmp/kvcourse-abs").exists()
    assert [p.name for p in hostile_zip.parent.iterdir()] == ["canvas-hostile.zip"]
    assert not (hostile_zip.parent.parent / "x.ipynb").exists()
    with course.gradebook() as gb:
        jane = gb.find_student("12345")
        assert (jane.first_name, jane.last_name) == (None, "doejane")
    clean = make_zip(tmp_path / "clean.zip", CANVAS)
    status, out = grading(
        "collect", "--assignment", A0, str(clean), root=course.root, capsys=capsys
    )
    assert status == 0 and "NOT COLLECTED" not in out
    assert re.search(r"^222\s+a0_kv_sizing\s+replaced", out, re.M)


def test_collect_a_moodle_zip_and_unknown_names(course, tmp_path, capsys):
    moodle = make_zip(
        tmp_path / "moodle.zip",
        {
            "Jane Doe_812_assignsubmission_file_/a0_kv_sizing.ipynb": NB,
            "Jane Doe_812_assignsubmission_onlinetext_onlinetext.html": b"<p>hi</p>",
            "Li Wei_813_assignsubmission_file_a0_kv_sizing.ipynb": NB2,
            "Bo Two_814_assignsubmission_file_/a.ipynb": NB,
            "Bo Two_814_assignsubmission_file_/b.ipynb": NB,
            "stray.ipynb": NB,
        },
    )
    status, out = grading(
        "collect",
        "--assignment",
        A0,
        str(moodle),
        "--lms",
        "moodle",
        root=course.root,
        capsys=capsys,
    )
    assert status == 1
    assert submitted(course, "812") == NB and submitted(course, "813") == NB2
    assert submitted(course, "814") is None
    assert re.search(
        r"^814 .*NOT COLLECTED  Bo Two_814_\S+/a\.ipynb: expected one "
        r"a0_kv_sizing\.ipynb, found 2",
        out,
        re.M,
    )
    assert re.search(
        r"NOT COLLECTED  stray\.ipynb: not a moodle name \(names understood: "
        r"canvas: <sortablename>\[_late\]_<userid>",
        out,
    )
    with course.gradebook() as gb:
        assert (gb.find_student("813").first_name, gb.find_student("813").last_name) == (
            "Li",
            "Wei",
        )
    # the same zip read as Canvas: every member is named wrongly, nothing is collected
    status, out = grading(
        "collect",
        "--assignment",
        A0,
        str(moodle),
        "--lms",
        "canvas",
        root=course.root,
        capsys=capsys,
    )
    assert status == 1 and out.count("not a canvas name") == 6


def test_collect_a_plain_zip_and_an_unpacked_canvas_folder(course, tmp_path, capsys):
    plain = make_zip(
        tmp_path / "plain.zip",
        {
            "ada.ipynb": NB,
            "bea/w/a0_kv_sizing.ipynb": NB2,
            "notes.txt": b"x",
            "bad name.ipynb": NB,
            "cy.zip": b"PK",
        },
    )
    status, out = grading(
        "collect", "--assignment", A0, str(plain), root=course.root, capsys=capsys
    )
    assert status == 1 and "plain.zip: read as a plain download" in out
    assert submitted(course, "ada") == NB and submitted(course, "bea") == NB2
    assert re.search(r"NOT COLLECTED  bad name\.ipynb: a student id is", out)
    assert re.search(r"^cy\s+a0_kv_sizing\s+NOT COLLECTED  cy\.zip: a zip in the zip", out, re.M)
    unpacked = tmp_path / "unpacked"
    unpacked.mkdir()
    (unpacked / "doejane_12345_100_a0_kv_sizing.ipynb").write_bytes(NB)
    (unpacked / "roeann_222_300_a0_kv_sizing.ipynb").symlink_to(ROOT / "pyproject.toml")
    status, out = grading(
        "collect",
        "--assignment",
        A0,
        str(unpacked),
        "--lms",
        "auto",
        root=course.root,
        capsys=capsys,
    )
    assert status == 1 and submitted(course, "12345") == NB and submitted(course, "222") is None
    assert "NOT COLLECTED  roeann_222_300_a0_kv_sizing.ipynb: refused: a symbolic link" in out


# ------------------------------------------------------------------------------------ exchange
def test_collect_the_newest_from_nbgrader_exchange(course, tmp_path, capsys):
    from nbgrader.coursedir import CourseDirectory
    from nbgrader.utils import parse_utc

    inbound = tmp_path / "exchange" / "kvcourse" / "inbound"
    older, newer = "2024-03-01 09:00:00.000000 UTC", "2024-03-02 08:30:00.123456 UTC"
    folders = {
        f"ada+{A0}+{newer}+Xy_z": NB2,
        f"ada+{A0}+{older}+AbCd": NB,
        f"bea+{A0}+{older}": NB,
        f"ada+a1_buddy_allocator+{newer}+Q": NB,  # another assignment: left alone
        f"cy+{A0}+not a time": NB,
        f"dee+{A0}+{older}+R": b"not json",
    }
    for name, data in folders.items():
        (inbound / name).mkdir(parents=True)
        (inbound / name / f"{A0}.ipynb").write_bytes(data)
        (inbound / name / "timestamp.txt").write_text(name.split("+")[2])
    status, out = grading(
        "collect", "--assignment", A0, str(tmp_path / "exchange"), root=course.root, capsys=capsys
    )
    assert status == 1 and "nbgrader exchange" in out
    assert submitted(course, "ada") == NB2 and submitted(course, "bea") == NB
    stamp = (course.submitted / "ada" / A0 / "timestamp.txt").read_text()
    assert stamp == newer
    dirs = CourseDirectory()
    assert dirs.get_existing_timestamp(str(course.submitted / "ada" / A0)) == parse_utc(newer)
    assert re.search(
        r"^ada\s+a0_kv_sizing\s+collected  kvcourse/inbound/ada\+a0_kv_sizing\+"
        r"2024-03-02 08:30:00\.123456 UTC\+Xy_z -> \S+  \[newest of 2\]  "
        rf"submitted {re.escape(newer)}$",
        out,
        re.M,
    )
    assert re.search(r"^cy .*NOT COLLECTED  cy\+a0_kv_sizing\+not a time: cannot read", out, re.M)
    assert re.search(r"^dee .*NOT COLLECTED  .*not a readable notebook", out, re.M)
    assert sorted(p.name for p in course.submitted.iterdir()) == ["ada", "bea"]
    # --exchange says it outright; a symbolic link in a submission is refused
    shutil.rmtree(inbound / f"dee+{A0}+{older}+R")
    shutil.rmtree(inbound / f"cy+{A0}+not a time")
    (inbound / f"bea+{A0}+{older}" / f"{A0}.ipynb").unlink()
    (inbound / f"bea+{A0}+{older}" / f"{A0}.ipynb").symlink_to(ROOT / "pyproject.toml")
    status, out = grading(
        "collect",
        "--assignment",
        A0,
        "--exchange",
        str(tmp_path / "exchange"),
        root=course.root,
        capsys=capsys,
    )
    assert status == 1 and "a0_kv_sizing.ipynb is a symbolic link, not a file" in out
    status, out = grading(
        "collect",
        "--assignment",
        A0,
        str(tmp_path),
        "--exchange",
        "x",
        root=course.root,
        capsys=capsys,
    )
    assert status == 2


# -------------------------------------------------------------------------------------- export
def graded_course(course: Course) -> None:
    """Grades in the gradebook: 12345 (Canvas) 3.5 + 6, 813 (Moodle) 1 + 0 with a late penalty
    of 0.5, ada (an inbox) 4 + 6, 900 with no submission."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with course.gradebook() as gb:
            gb.add_student("12345", last_name="doejane")
            gb.add_student("813", first_name="Li", last_name="Wei", email="li@uni.example")
            gb.add_student("ada")
            gb.add_student("900", first_name="No", last_name="Show")
            for student, (t1, t2) in {"12345": (3.5, 6), "813": (1, 0), "ada": (4, 6)}.items():
                gb.add_submission(A0, student)
                gb.find_grade("t1", A0, A0, student).manual_score = t1
                gb.find_grade("t2", A0, A0, student).manual_score = t2
            gb.find_submission_notebook(A0, A0, "813").late_submission_penalty = 0.5
            gb.db.commit()


def test_export_to_canvas_and_moodle(course, tmp_path, capsys):
    graded_course(course)
    status, out = grading("export", "--lms", "canvas", root=course.root, capsys=capsys)
    assert status == 0 and "wrote 5 row(s) for canvas's import to grading/grades-canvas.csv" in out
    with open(course.grading / "grades-canvas.csv", newline="") as handle:
        rows = list(csv.reader(handle))
    assert rows[0] == ["Student", "ID", "SIS User ID", "SIS Login ID", "Section", A0]
    assert rows[1] == ["    Points Possible", "", "", "", "", "10"]
    assert rows[2:] == [
        ["doejane", "12345", "", "", "", "9.5"],
        ["Wei, Li", "813", "", "", "", "0.5"],
        ["Show, No", "900", "", "", "", ""],
        ["ada", "", "", "ada", "", "10"],
    ]
    with course.gradebook() as gb:
        grades = {g.student: g for g in lms_out.read_grades(gb)}
        for row in rows[2:]:
            sub = grades[row[1] or row[3]]
            assert row[5] == ("" if sub.score is None else f"{sub.score:g}")
        assert grades["813"].score == float(gb.find_submission(A0, "813").score) - 0.5

    target = tmp_path / "moodle.csv"
    status, out = grading(
        "export",
        "--lms",
        "moodle",
        "--assignment",
        A0,
        "--to",
        str(target),
        root=course.root,
        capsys=capsys,
    )
    assert status == 1  # ada has no Moodle participant id
    assert re.search(r"^ada\s+a0_kv_sizing  NOT EXPORTED  not a Moodle participant id", out, re.M)
    with open(target, newline="") as handle:
        sheet = list(csv.DictReader(handle))
    assert list(sheet[0]) == list(lms_out.MOODLE_COLUMNS)
    assert [(r["Identifier"], r["Full name"], r["Grade"], r["Maximum Grade"]) for r in sheet] == [
        ("Participant 12345", "doejane", "9.50", "10.00"),
        ("Participant 813", "Li Wei", "0.50", "10.00"),
        ("Participant 900", "No Show", "", "10.00"),
    ]
    assert sheet[1]["Email address"] == "li@uni.example"
    assert [r["Status"] for r in sheet] == ["Submitted for grading"] * 2 + ["No submission"]
    assert datetime.strptime(sheet[0]["Last modified (grade)"], "%A, %d %B %Y, %I:%M %p")
    status, out = grading("export", "--lms", "moodle", root=course.root, capsys=capsys)
    assert status == 2 and "a Moodle worksheet holds one assignment: say which" in out


def test_tables_check_their_input():
    grade = lms_out.Grade("1", "", "", "", A0, None, 10.0)
    with pytest.raises(ValueError, match="no grades for 'a9'"):
        lms_out.moodle_table([grade], "a9")
    assert lms_out.canvas_table([grade])[2] == ["1", "1", "", "", "", ""]


@pytest.mark.slow
def test_release_collect_and_plain_export_end_to_end(tmp_path):
    root = copy_course(tmp_path / "course")
    assert cli("release", A0, cwd=root).returncode == 0
    zipped = make_zip(tmp_path / "c.zip", CANVAS)
    result = cli("collect", str(zipped), "--lms", "canvas", "--assignment", A0, cwd=root)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "recorded the names of 3 student(s)" in result.stdout
    result = cli("export", "--assignment", A0, "--to", str(tmp_path / "g.csv"), cwd=root)
    assert result.returncode == 0, result.stdout + result.stderr
    with open(tmp_path / "g.csv", newline="") as handle:
        rows = {r["student_id"]: r for r in csv.DictReader(handle)}
    assert rows["12345"]["last_name"] == "doejane" and rows["12345"]["assignment"] == A0
