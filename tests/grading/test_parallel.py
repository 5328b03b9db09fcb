"""Grading many students at once: ``--workers`` on one SQLite gradebook, a real PostgreSQL server
(Debian's package, started by these tests), and a local Dask cluster writing to it. Every run must
give each student the grade a serial run gives, leave one consistent gradebook, and survive
submissions that are not notebooks at all."""

from __future__ import annotations

import os
import re
import shutil
import signal
import sqlite3
import sys
import uuid
from pathlib import Path

import pytest
from grading_course import A0, LINUX, autograde_line, cli, expected_for

from kvcourse_grader import fanout, gradebook_lock
from kvcourse_grader.sandbox import sandbox_problem

slow = pytest.mark.slow  # runs nbgrader
sys.path.insert(0, str(Path(__file__).resolve().parent))
from postgres_server import postgres_server  # noqa: E402

#: Sample students of a0 for these runs: full marks, none, one mistake, some, a 64 MiB flood, a
#: kernel that kills itself.
STUDENTS = ("correct", "untouched", "no_kv_factor", "partial", "floods", "crashes")
#: Submissions that nbgrader cannot even read: bytes that are not JSON, and half a notebook.
BROKEN = ("garbled", "truncated")
SANDBOX = [] if sandbox_problem() is None else ["--unsandboxed"]


def _class(released_root: Path, target: Path, *global_args: str) -> Path:
    """A copy of the released course with STUDENTS and BROKEN collected into it."""
    root = target / "course"
    shutil.copytree(released_root, root)
    inbox = target / "inbox"
    assert cli(*global_args, "samples", A0, "--out", str(inbox), cwd=root).returncode == 0
    for path in inbox.iterdir():
        if path.stem not in STUDENTS:
            path.unlink()
    assert cli(*global_args, "collect", str(inbox), "--assignment", A0, cwd=root).returncode == 0
    good = (inbox / "correct.ipynb").read_bytes()
    for student, data in {"garbled": b"\x00{not json", "truncated": good[: len(good) // 2]}.items():
        folder = root / "grading" / "submitted" / student / A0
        folder.mkdir(parents=True)
        (folder / f"{A0}.ipynb").write_bytes(data)
    return root


def _check_run(result, what: str) -> None:
    assert result.returncode == 1, what + result.stdout + result.stderr  # the broken two
    for student in STUDENTS:
        total = sum(expected_for(student).values())
        line = autograde_line(result.stdout, student)
        assert re.search(rf"\s{total:g} / 10\s", line), f"{what} {student}: {line}"
    for student in BROKEN:
        assert "NOT GRADED" in autograde_line(result.stdout, student), what
    assert f"graded {len(STUDENTS)} submission(s); 2 could not be graded" in result.stdout


def _grades(url: str) -> dict[tuple[str, str], float]:
    """(student, grade cell) → score, read through nbgrader's API from the gradebook at url."""
    from nbgrader.api import Gradebook

    with Gradebook(url, "kvcourse") as gb:
        return {
            (g.student.id, g.name): float(g.score)
            for sub in gb.assignment_submissions(A0)
            for nb in sub.notebooks
            for g in nb.grades
            if sub.student.id in STUDENTS
        }


# ------------------------------------------------------------------------------ no nbgrader here
def test_default_workers_is_a_positive_count_within_the_cpus():
    import os

    assert 1 <= fanout.default_workers() <= (os.cpu_count() or 1)
    with pytest.raises(ValueError, match="positive whole number"):
        list(fanout.run_local([], 0))


def test_lock_path_only_for_sqlite_files(tmp_path):
    db = tmp_path / "gradebook.db"
    assert gradebook_lock.lock_path(f"sqlite:///{db}") == db.with_name("gradebook.db.lock")
    assert gradebook_lock.lock_path("sqlite:///:memory:") is None
    assert gradebook_lock.lock_path("postgresql://u@h/db") is None


@slow  # the released course
def test_workers_must_be_a_positive_whole_number(released):
    result = cli("autograde", "--workers", "0", cwd=released[0])
    assert result.returncode == 2 and "--workers takes a whole number" in result.stderr


@slow
def test_dask_refuses_a_sqlite_gradebook(released, tmp_path):
    root = _class(released[0], tmp_path)
    result = cli("autograde", "--dask", "tcp://127.0.0.1:1", *SANDBOX, cwd=root)
    assert result.returncode == 2 and "PostgreSQL" in result.stderr, result.stderr


# --------------------------------------------------------------------------- graded by nbgrader
@slow
@pytest.mark.e2e
def test_parallel_grades_equal_serial_ones_in_one_consistent_sqlite_gradebook(released, tmp_path):
    serial = _class(released[0], tmp_path / "serial")
    parallel = _class(released[0], tmp_path / "parallel")
    one = cli("autograde", A0, "--workers", "1", *SANDBOX, cwd=serial)
    many = cli("autograde", A0, "--workers", "3", "--progress", *SANDBOX, cwd=parallel)
    _check_run(one, "serial")
    _check_run(many, "parallel")
    assert "3 at a time" in many.stdout and "autograde" in many.stderr  # the progress bar
    db = parallel / "grading" / "gradebook.db"
    with sqlite3.connect(db) as con:
        assert con.execute("PRAGMA integrity_check").fetchone() == ("ok",)
    urls = [f"sqlite:///{root / 'grading' / 'gradebook.db'}" for root in (serial, parallel)]
    assert _grades(urls[0]) == _grades(urls[1]) != {}
    flooded = parallel / "grading" / "autograded" / "floods" / A0 / f"{A0}.ipynb"
    assert flooded.stat().st_size < 8 * 2**20 and "the rest was dropped" in flooded.read_text()


@pytest.fixture(scope="module")
def postgres(tmp_path_factory):
    """A PostgreSQL server from Debian's package, for this module's tests only."""
    with postgres_server(tmp_path_factory.mktemp("pg")) as url:
        yield url


@slow
@pytest.mark.e2e
def test_postgres_gradebook_and_a_dask_cluster_grade_like_sqlite(released, postgres, tmp_path):
    pytest.importorskip("distributed")
    from distributed import LocalCluster

    db = ["--db-url", postgres]
    root = _class(released[0], tmp_path / "pg", *db)
    release = cli(*db, "release", A0, cwd=root)
    assert release.returncode == 0, release.stdout + release.stderr
    local = cli(*db, "autograde", A0, "--workers", "2", *SANDBOX, cwd=root)
    _check_run(local, "postgres")
    by_workers = _grades(postgres)
    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True) as cluster:
        spread = cli(*db, "autograde", A0, "--dask", cluster.scheduler_address, *SANDBOX, cwd=root)
    _check_run(spread, "dask")
    assert "on the Dask cluster" in spread.stdout and "2 worker thread(s)" in spread.stdout
    assert _grades(postgres) == by_workers != {}
    exported = cli(*db, "export", "--to", str(tmp_path / "grades.csv"), cwd=root)
    assert exported.returncode == 0 and "correct" in (tmp_path / "grades.csv").read_text()


@slow
@pytest.mark.skipif(not LINUX, reason="signals and process groups as on Linux")
@pytest.mark.parametrize("stop", [signal.SIGINT, signal.SIGTERM], ids=["ctrl-c", "sigterm"])
def test_ctrl_c_stops_the_running_graders_and_their_kernels(released, tmp_path, stop):
    """Ctrl-C in a terminal, or SIGTERM from a job scheduler or `kill`: the same clean stop."""
    import subprocess
    import time

    import psutil

    root = tmp_path / "course"
    shutil.copytree(released[0], root)
    inbox = tmp_path / "inbox"
    assert cli("samples", A0, "--out", str(inbox), cwd=root).returncode == 0
    for path in inbox.iterdir():
        if path.stem not in ("loops", "correct"):
            path.unlink()
    for name in ("loops2", "loops3"):  # three students whose cells never end
        shutil.copy2(inbox / "loops.ipynb", inbox / f"{name}.ipynb")
    assert cli("collect", str(inbox), "--assignment", A0, cwd=root).returncode == 0
    command = [sys.executable, "-m", "kvcourse_grader.cli", "autograde", A0, "--workers", "2"]
    # Every process this run starts inherits this mark, so the test watches those and no other
    # grading on the machine (another course, or another test run, may be grading beside it).
    ours = {"KVCOURSE_TEST_RUN": uuid.uuid4().hex}
    run = subprocess.Popen(
        [*command, "--cell-timeout", "600", *SANDBOX],
        cwd=root,
        env={**os.environ, **ours},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        # A shell without job control starts background commands with SIGINT ignored, and the
        # child would inherit that (CI may run so): give it the default, as in a terminal.
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    logs = root / "grading" / "logs" / A0
    try:
        deadline = time.monotonic() + 120
        # Interrupt once two never-ending students are being graded (a loaded machine is slow).
        while len(list(logs.glob("loops*.log"))) < 2 and time.monotonic() < deadline:
            time.sleep(0.5)
        time.sleep(3)
        run.send_signal(stop)
        out, err = run.communicate(timeout=60)
    finally:
        if run.poll() is None:  # never leave graders running into the next tests
            for child in psutil.Process(run.pid).children(recursive=True):
                child.kill()
            run.kill()
            run.communicate()
    assert run.returncode == 130, out + err
    assert "interrupted: graded" in out and "Traceback" not in err
    time.sleep(1)
    left = []
    for proc in psutil.process_iter(["cmdline", "environ"]):
        try:
            environ = proc.info["environ"] or {}
            if environ.get("KVCOURSE_TEST_RUN") == ours["KVCOURSE_TEST_RUN"]:
                left.append(proc.info["cmdline"])
        except (psutil.Error, OSError):
            continue
    assert not left, f"still running after {stop.name}: {left}"
