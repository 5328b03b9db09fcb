"""The student bundle (kvcourse_grader.bundle): the released notebooks and the library, never the
solutions, the grading files or the tests; the same bytes from every build; refused when a release
is missing, stale or leaks, or when it would land among the instructor's files."""

from __future__ import annotations

import argparse
import hashlib
import io
import json
import os
import re
import shutil
import subprocess
import sys
import time
import zipfile
from pathlib import Path

import pytest
from grading_course import A0, ASSIGNMENTS, ROOT, copy_course, hidden_lines, notebook
from hypothesis import given, settings
from hypothesis import strategies as st

from kvcourse_grader import bundle
from kvcourse_grader.course import CommandError, Course
from kvcourse_grader.samples import solution_code

TOP = "kvcourse-student"
#: nbgrader's region markers as a comment line (the test's own spelling of them).
MARKER_LINE = re.compile(r"^\s*#+\s*(BEGIN|END) (SOLUTION|HIDDEN TESTS)")
JUNK = ("__pycache__", ".pyc", ".egg-info", ".ipynb_checkpoints")


def student_course(target: Path) -> Path:
    """A course copy with what the bundle takes besides the notebooks (:func:`bundle_inputs`),
    and a data file and a checkpoint beside a release."""
    root = bundle_inputs(copy_course(target))
    (root / "notebooks" / A0 / "sizes.csv").write_text("model,bytes\nOPT-13B,819200\n")
    checkpoints = root / "notebooks" / A0 / ".ipynb_checkpoints"
    checkpoints.mkdir()
    shutil.copy2(root / "solutions" / A0 / f"{A0}.ipynb", checkpoints / f"{A0}-checkpoint.ipynb")
    return root


def bundle_inputs(root: Path) -> Path:
    """``root`` with the library (a compiled cache and build metadata in it, to be left out),
    pyproject.toml, the students' lab settings, a LICENSE and a gradebook."""
    shutil.copytree(
        ROOT / "lib" / "kvcourse",
        root / "lib" / "kvcourse",
        ignore=shutil.ignore_patterns("__pycache__", "*.pyc"),
    )
    (root / "lib" / "kvcourse" / "__pycache__").mkdir()
    (root / "lib" / "kvcourse" / "__pycache__" / "sizing.cpython-311.pyc").write_bytes(b"\0")
    (root / "lib" / "kvcourse.egg-info").mkdir()
    (root / "lib" / "kvcourse.egg-info" / "PKG-INFO").write_text("Name: kvcourse\n")
    shutil.copy2(ROOT / "pyproject.toml", root)
    shutil.copytree(ROOT / "grading" / "student_lab", root / "grading" / "student_lab")
    (root / "LICENSE").write_text("MIT License\n")
    if not (root / "grading" / "gradebook.db").exists():
        (root / "grading" / "gradebook.db").write_bytes(b"SQLite format 3\0")
    return root.resolve()


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    """One course copy, bundled twice as a zip and once as a folder."""
    root = student_course(tmp_path_factory.mktemp("bundle") / "course")
    course = Course.load(root)
    out = root.parent / "out"
    reports = [
        bundle.build_bundle(course, out / "first" / "kvcourse-student.zip"),
        bundle.build_bundle(course, out / "second" / "other-name.zip"),
        bundle.build_bundle(course, out / "hub" / "kvcourse-student"),
    ]
    return root, reports


@pytest.fixture
def course(tmp_path) -> Course:
    return Course.load(student_course(tmp_path / "course"))


def members(zip_path: Path) -> dict[str, bytes]:
    with zipfile.ZipFile(zip_path) as archive:
        return {info.filename: archive.read(info) for info in archive.infolist()}


# ------------------------------------------------------------------------------- what is in it
def test_bundle_holds_the_releases_the_library_and_nothing_else(built):
    root, (report, _, _) = built
    files = members(report.path)
    assert all(name.startswith(f"{TOP}/") for name in files)
    inside = {name.removeprefix(f"{TOP}/"): data for name, data in files.items()}
    assert {name.split("/")[0] for name in inside} == {
        "README.md", "Makefile", "pyproject.toml", "MANIFEST.sha256", "LICENSE",
        "notebooks", "lib", "lab",
    }  # fmt: skip
    notebooks = {name for name in inside if name.startswith("notebooks/")}
    assert notebooks == {f"notebooks/{a}/{a}.ipynb" for a in ASSIGNMENTS} | {
        f"notebooks/{A0}/sizes.csv"
    }
    for assignment in ASSIGNMENTS:
        name = f"notebooks/{assignment}/{assignment}.ipynb"
        assert inside[name] == (ROOT / name).read_bytes()
    library = {
        p.relative_to(ROOT).as_posix()
        for p in (ROOT / "lib" / "kvcourse").rglob("*")
        if p.is_file() and not any(j in p.as_posix() for j in JUNK)
    }
    assert {name for name in inside if name.startswith("lib/")} == library
    assert "lib/kvcourse/assignment_checks/harness.py" in library
    assert "lib/kvcourse/data/mooncake/conversation_trace.jsonl.gz" in library
    assert {name for name in inside if name.startswith("lab/")} == {
        "lab/jupyter_server_config.json",
        "lab/jupyter_server_config.py",
        "lab/labconfig/page_config.json",
        "lab/labconfig/default_setting_overrides.json",
    }
    assert inside["pyproject.toml"] == (ROOT / "pyproject.toml").read_bytes()
    for name in inside:
        assert not any(j in name for j in JUNK), name
        assert not name.startswith(("solutions/", "grading/", "tests/", "bench/", "book/")), name
        assert not name.endswith((".db", ".db.lock")) and "samples/" not in name, name
    assert report.kind == "zip" and report.assignments == tuple(ASSIGNMENTS)
    assert report.files == tuple(sorted(inside)) and report.size == report.path.stat().st_size


def test_no_grader_module_or_sample_ships(built):
    """The instructor's grader is a package of its own: none of its modules, none of the sample
    submissions (hostile ones included) and nothing that imports the grader is in the bundle."""
    root, (report, _, _) = built
    inside = {n.removeprefix(f"{TOP}/"): d for n, d in members(report.path).items()}
    grader = sorted((ROOT / "grading" / "kvcourse_grader").rglob("*.py"))
    samples = sorted((ROOT / "grading" / "samples").glob("*.py"))
    assert len(grader) > 10 and len(samples) >= 7
    shipped = set(inside.values())
    for path in grader + samples:
        assert path.read_bytes() not in shipped, path
    for name, data in inside.items():
        assert "kvcourse_grader" not in name and "samples" not in name, name
        if name.endswith((".py", ".ipynb")):
            text = data.decode("utf-8").replace('\\n",', "\n")  # a notebook's lines, too
            assert not re.search(r"^\W*(from|import) kvcourse_grader", text, re.M), name


def test_no_solution_code_hidden_tests_or_markers_in_it(built):
    root, (report, _, _) = built
    inside = {n.removeprefix(f"{TOP}/"): d for n, d in members(report.path).items()}
    texts = {}
    for name, data in inside.items():
        try:
            texts[name] = data.decode("utf-8")
        except UnicodeDecodeError:
            assert name.endswith((".gz", ".npz")), name  # traces and the trained model's weights
    for name, text in texts.items():
        assert not any(MARKER_LINE.match(line) for line in text.splitlines()), name
    for assignment in ASSIGNMENTS:
        release = texts[f"notebooks/{assignment}/{assignment}.ipynb"]
        lines = {
            line.strip()
            for cell in json.loads(release)["cells"]
            for line in "".join(cell["source"]).splitlines()
        }
        assert "BEGIN SOLUTION" not in release and "HIDDEN TESTS" not in release
        source = notebook(root, "solutions", assignment)
        assert not set(hidden_lines(source)) & lines, assignment
        # The lines a solution writes that the notebook has nowhere else (the release keeps all
        # the rest, and has `raise NotImplementedError("...")` where a solution was).
        inside, elsewhere = set(), set()
        for cell in source.cells:
            region = False
            for line in cell.source.splitlines():
                if MARKER_LINE.match(line):
                    region = "BEGIN SOLUTION" in line or (region and "END" not in line)
                elif line.strip():
                    (inside if region else elsewhere).add(line.strip())
        assert inside - elsewhere and not (inside - elsewhere) & lines, assignment
        assert release.count("raise NotImplementedError(") >= 1


def test_two_builds_are_byte_identical_and_the_manifest_checks_out(built):
    _, (first, second, folder) = built
    assert first.path.read_bytes() == second.path.read_bytes()
    assert first.digest == second.digest == hashlib.sha256(first.path.read_bytes()).hexdigest()
    with zipfile.ZipFile(first.path) as archive:
        infos = archive.infolist()
        assert [i.filename for i in infos] == sorted(i.filename for i in infos)
        dates = {i.date_time for i in infos}
        assert len(dates) == 1 and min(dates)[0] >= 2026, f"one real date for every file: {dates}"
        manifest = archive.read(f"{TOP}/MANIFEST.sha256").decode()
        listed = dict(reversed(line.split("  ", 1)) for line in manifest.splitlines())
        assert set(listed) == {i.filename.removeprefix(f"{TOP}/") for i in infos} - {
            "MANIFEST.sha256"
        }
        for name, digest in listed.items():
            assert hashlib.sha256(archive.read(f"{TOP}/{name}")).hexdigest() == digest, name
    on_disk = {
        p.relative_to(folder.path).as_posix(): p.read_bytes()
        for p in folder.path.rglob("*")
        if p.is_file()
    }
    assert on_disk == {n.removeprefix(f"{TOP}/"): d for n, d in members(first.path).items()}
    assert folder.kind == "folder" and folder.files == first.files


def test_the_student_readme_and_makefile(built):
    _, (report, _, folder) = built
    readme = (folder.path / "README.md").read_text()
    for assignment in ASSIGNMENTS:
        assert f"`notebooks/{assignment}/{assignment}.ipynb`" in readme
    for words in ("make lab", "Validate", "<student>.ipynb", "JUPYTER_CONFIG_PATH=lab", "LMS"):
        assert words in readme, words
    assert "{{" not in readme and "grading/" not in readme and "solutions" not in readme
    if shutil.which("make") is None:
        pytest.skip("no make on this machine")
    dry = subprocess.run(["make", "-n", "lab"], cwd=folder.path, capture_output=True, text=True)
    assert dry.returncode == 0, dry.stderr
    assert f'JUPYTER_CONFIG_PATH="{folder.path}/lab"' in dry.stdout
    assert "pip install --quiet -e ." in dry.stdout and "jupyter lab" in dry.stdout


@pytest.mark.parametrize("uid", ["0", "1000"])
def test_the_student_lab_starts_as_root_too(built, tmp_path, uid):
    """Jupyter refuses to start as root unless told to (containers, some JupyterHubs): `make lab`
    passes --allow-root exactly when it runs as root."""
    _, (_, _, folder) = built
    if shutil.which("make") is None:
        pytest.skip("no make on this machine")
    fake = tmp_path / "bin"
    fake.mkdir()
    (fake / "id").write_text(f"#!/bin/sh\necho {uid}\n")
    (fake / "id").chmod(0o755)
    env = {**os.environ, "PATH": f"{fake}:{os.environ['PATH']}"}
    command = ["make", "-n", "-W", ".venv/.installed", "lab"]
    dry = subprocess.run(command, cwd=folder.path, capture_output=True, text=True, env=env)
    assert dry.returncode == 0, dry.stderr
    lab = next(line for line in dry.stdout.splitlines() if "jupyter lab" in line)
    assert ("--allow-root" in lab) == (uid == "0"), lab


def test_an_unreachable_pytorch_index_is_given_up_at_once(built):
    """The bundle's set-up asks PyTorch's CPU index first; where it cannot be reached the probe
    fails within seconds and PyPI's build is taken, instead of pip retrying for minutes."""
    _, (_, _, folder) = built
    if shutil.which("make") is None:
        pytest.skip("no make on this machine")
    makefile = (folder.path / "Makefile").read_text()
    probe = re.search(r"^REACHABLE := (.+)$", makefile, re.M).group(1)
    start = time.monotonic()
    for url in ("http://127.0.0.1:9/torch/", "https://unreachable.invalid/torch/"):
        result = subprocess.run([sys.executable, "-c", probe, url], capture_output=True, timeout=30)
        assert result.returncode != 0, url
    assert time.monotonic() - start < 15
    command = ["make", "-n", "-W", "pyproject.toml", "venv"]
    dry = subprocess.run(command, cwd=folder.path, capture_output=True, text=True)
    assert dry.returncode == 0, dry.stderr
    assert "cannot be reached; taking PyPI's build" in dry.stdout
    assert "--retries 1" in dry.stdout
    assert ("download.pytorch.org/whl/cpu" in dry.stdout) == sys.platform.startswith("linux")


def test_the_library_is_imported_from_the_bundle(built, tmp_path):
    """A6's given code cells, run from the bundle's folder with only PYTHONPATH=<bundle>/lib,
    import the bundle's library (not the repository's) and read its packaged traces."""
    _, (_, _, folder) = built
    a6 = "a6_conductor"
    cells = json.loads((folder.path / "notebooks" / a6 / f"{a6}.ipynb").read_text())["cells"]
    given_code = []
    for cell in cells:
        if cell.get("metadata", {}).get("nbgrader", {}).get("solution"):
            break
        if cell["cell_type"] == "code":
            given_code.append("".join(cell["source"]))
    assert any("from kvcourse.cluster import" in code for code in given_code)
    script = "\n".join(given_code) + (
        "\nimport kvcourse, kvcourse.assignment_checks, kvcourse.traces\n"
        "print(kvcourse.__file__)\nprint(kvcourse.assignment_checks.__file__)\n"
        "print(kvcourse.traces.load_mooncake_trace('conversation').num_requests)\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", script],
        cwd=folder.path / "notebooks" / a6,
        env={"PYTHONPATH": str(folder.path / "lib"), "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr
    init, checks, requests = result.stdout.split()[-3:]
    assert Path(init) == folder.path / "lib" / "kvcourse" / "__init__.py"
    assert Path(checks).is_relative_to(folder.path) and int(requests) > 0


def test_pip_installs_the_bundle(built, tmp_path):
    """`pip install` of the bundle (as `make lab` does, without the dependencies) installs the
    library with its packaged traces: pyproject.toml's paths fit the bundle's layout."""
    _, (_, _, folder) = built
    source = shutil.copytree(folder.path, tmp_path / "bundle")  # pip builds inside the tree
    target = tmp_path / "site"
    result = subprocess.run(
        [sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--no-build-isolation",
         "--target", str(target), str(source)],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert result.returncode == 0, result.stdout + result.stderr
    assert (target / "kvcourse" / "assignment_checks" / "harness.py").is_file()
    assert sorted(p.name for p in (target / "kvcourse" / "data" / "mooncake").glob("*.gz")) == [
        "conversation_trace.jsonl.gz",
        "synthetic_trace.jsonl.gz",
    ]
    assert not (target / "solutions").exists() and not (target / "grading").exists()


@pytest.mark.slow
def test_a_fresh_nbgrader_release_is_current(released, tmp_path):
    """What `kvcourse-grade release` writes now passes the bundle's checks (they mirror nbgrader's
    release: stubs for solutions, comments for hidden tests, everything else kept)."""
    root = bundle_inputs(shutil.copytree(released[0], tmp_path / "course"))
    report = bundle.build_bundle(Course.load(root), tmp_path / "out.zip")
    assert report.assignments == tuple(ASSIGNMENTS)


# ------------------------------------------------------------------------------------ refusals
def test_a_missing_release_is_refused(course, tmp_path):
    shutil.rmtree(course.release / "a3_cow_fork")
    with pytest.raises(CommandError, match=r"no student version of a3_cow_fork .*kvcourse-grade "):
        bundle.build_bundle(course, tmp_path / "out.zip")
    assert not (tmp_path / "out.zip").exists()


def test_a_stale_release_is_refused_and_a_solution_fix_is_not_stale(course, tmp_path):
    path = course.source_notebook(A0)
    source = json.loads(path.read_text())
    fixed = next(c for c in source["cells"] if "### BEGIN SOLUTION" in "".join(c["source"]))
    fixed["source"] = "".join(fixed["source"]).replace(
        "### END SOLUTION", "# (a clearer solution)\n    ### END SOLUTION"
    )
    path.write_text(json.dumps(source))  # newer than the release, and changed inside the region
    assert bundle.build_bundle(course, tmp_path / "fine.zip").kind == "zip"
    test_cell = next(c for c in source["cells"] if c["metadata"].get("nbgrader", {}).get("grade"))
    test_cell["source"] = "".join(test_cell["source"]) + "\nassert True  # one more visible check"
    path.write_text(json.dumps(source))
    with pytest.raises(CommandError, match=rf"notebooks/{A0}/{A0}.ipynb is stale: .*differs.*"
                       rf"kvcourse-grade release {A0}"):  # fmt: skip
        bundle.build_bundle(course, tmp_path / "out.zip")
    source["cells"].append({"cell_type": "markdown", "metadata": {}, "source": "Bonus"})
    path.write_text(json.dumps(source))
    with pytest.raises(CommandError, match=r"is stale: .*\(it has 33 cells, the source 34\)"):
        bundle.build_bundle(course, tmp_path / "out.zip")


@pytest.mark.parametrize("leak", ["solution", "hidden", "marker", "beside"])
def test_a_release_that_leaks_is_refused(course, tmp_path, leak):
    source = notebook(course.root, "solutions", A0)
    release_path = course.release / A0 / f"{A0}.ipynb"
    release = json.loads(release_path.read_text())
    first = next(
        i for i, c in enumerate(source.cells) if c.metadata.get("nbgrader", {}).get("solution")
    )
    hidden = next(i for i, c in enumerate(source.cells) if "BEGIN HIDDEN TESTS" in c.source)
    if leak == "solution":  # the release step skipped: the solution without its markers
        release["cells"][first]["source"] = solution_code(source.cells[first].source)
        expected = r"holds solution code from solutions/a0_kv_sizing/a0_kv_sizing.ipynb \(cell"
    elif leak == "hidden":  # hidden tests, in a cell's output
        body = source.cells[hidden].source.split("### BEGIN HIDDEN TESTS")[1].split("###")[0]
        output = {"output_type": "stream", "name": "stdout", "text": body}
        release["cells"][hidden]["outputs"] = [output]
        expected = "holds hidden-test code"
    elif leak == "marker":
        release["cells"][hidden]["source"] = source.cells[hidden].source
        expected = "holds nbgrader's solution or hidden-test markers"
    else:  # the source notebook copied beside the release
        shutil.copy2(course.source_notebook(A0), release_path.with_name("copy.ipynb"))
        expected = rf"notebooks/{A0}/copy.ipynb holds nbgrader's"
    release_path.write_text(json.dumps(release))
    with pytest.raises(CommandError, match=expected):
        bundle.build_bundle(course, tmp_path / "out.zip")


@pytest.mark.parametrize(
    "where", ["solutions/s.zip", f"solutions/{A0}", "grading/student.zip", "notebooks/b", "."]
)
def test_output_among_the_instructors_files_is_refused(course, where):
    with pytest.raises(CommandError, match="refusing to write the bundle"):
        bundle.build_bundle(course, course.root / where)
    assert not (course.root / where).is_file()


def test_a_folder_is_replaced_only_when_it_holds_a_bundle(course, tmp_path):
    hub = tmp_path / "hub"
    (hub / "notes").mkdir(parents=True)
    with pytest.raises(CommandError, match="holds other files"):
        bundle.build_bundle(course, hub)
    (hub / "notes").rmdir()
    bundle.build_bundle(course, hub)
    (hub / "notebooks" / A0 / "stale.txt").write_text("from an earlier bundle")
    bundle.build_bundle(course, hub)
    assert not (hub / "notebooks" / A0 / "stale.txt").exists()
    (tmp_path / "dir.zip").mkdir()
    with pytest.raises(CommandError, match="dir.zip is a folder; name a .zip file"):
        bundle.build_bundle(course, tmp_path / "dir.zip")
    (course.release / A0 / "link.ipynb").symlink_to(course.source_notebook(A0))
    with pytest.raises(CommandError, match=rf"notebooks/{A0}/link.ipynb is a symbolic link"):
        bundle.build_bundle(course, tmp_path / "out.zip")
    with pytest.raises(CommandError, match="out must be a path"):
        bundle.build_bundle(course, 42)


# -------------------------------------------------------------------------------- the command
def test_cmd_bundle_prints_what_it_wrote_and_the_next_step(course, capsys):
    parser = argparse.ArgumentParser()
    bundle.add_bundle_parser(parser.add_subparsers(dest="step"))
    args = parser.parse_args(["bundle"])
    assert args.out is None and args.run is bundle.cmd_bundle
    assert bundle.cmd_bundle(course, args) == 0
    out = capsys.readouterr().out
    assert f"wrote {bundle.DEFAULT_OUT} (zip, " in out
    assert (course.root / bundle.DEFAULT_OUT).is_file()
    # one notebook per assignment, and the data file the course fixture gives a0 (sizes.csv)
    files = len(ASSIGNMENTS) + 1
    assert re.search(rf"notebooks/\s+{files} files", out) and "assignments: a0_kv_sizing, " in out
    assert "next: upload kvcourse-student.zip to your LMS" in out
    assert bundle.cmd_bundle(course, argparse.Namespace(out=str(course.root.parent / "hub"))) == 0
    assert "next: put hub/ where students work" in capsys.readouterr().out


@settings(max_examples=30, deadline=None)
@given(
    st.dictionaries(
        st.from_regex(r"[a-z]{1,8}(/[a-z]{1,8}){0,2}(\.py|\.gz|\.txt)", fullmatch=True),
        st.binary(max_size=300),
        min_size=1,
        max_size=8,
    )
)
def test_zip_holds_the_files_in_order_and_the_same_bytes_every_time(files):
    when = (2026, 12, 7, 6, 27, 0)
    data = bundle._zip_bytes(files, when)
    assert data == bundle._zip_bytes(dict(reversed(list(files.items()))), when)
    with zipfile.ZipFile(io.BytesIO(data)) as archive:
        assert archive.namelist() == [f"{TOP}/{name}" for name in sorted(files)]
        assert all(archive.read(f"{TOP}/{name}") == files[name] for name in files)
        assert {info.date_time for info in archive.infolist()} == {when}


def test_kvcourse_grade_bundle_runs_from_the_command_line(course, tmp_path, capsys):
    from kvcourse_grader.cli import main

    out = tmp_path / "hand-out" / "kvcourse-student.zip"
    assert main(["--course-root", str(course.root), "bundle", "--out", str(out)]) == 0
    assert zipfile.is_zipfile(out) and "next:" in capsys.readouterr().out
    refused = ["--course-root", str(course.root), "bundle", "--out", str(course.grading / "b")]
    assert main(refused) == 2
