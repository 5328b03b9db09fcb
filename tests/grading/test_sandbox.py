"""The sandbox of student kernels (bubblewrap): a kernel started by SandboxedKernelManager runs
notebook code that cannot see the course's solutions, gradebook or tests, cannot write outside
its folder or reach the network, and can still import the library, write its own folder and be
interrupted. Skipped, saying why, where bubblewrap is unavailable."""

from __future__ import annotations

import ast
import shutil
import socket
import sys
import threading
import uuid
from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient

import kvcourse
from kvcourse_grader import sandbox

slow = pytest.mark.slow
PROBLEM = sandbox.sandbox_problem()
needs_sandbox = pytest.mark.skipif(PROBLEM is not None, reason=f"no sandbox: {PROBLEM}")


def run(cells: list[str], workdir: Path, course: Path, sandboxed: bool = True) -> list[str]:
    """Run ``cells`` in a (sandboxed) kernel in ``workdir``; each cell's text output or error."""
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(c) for c in cells])
    options = {}
    if sandboxed:
        options["kernel_manager_class"] = sandbox.SandboxedKernelManager
    client = NotebookClient(
        nb,
        timeout=20,
        allow_errors=True,
        interrupt_on_timeout=True,
        resources={"metadata": {"path": str(workdir)}},
        **options,
    )
    if sandboxed:
        client.config.SandboxedKernelManager.course_root = str(course)
    client.execute()
    texts = []
    for cell in nb.cells:
        out = [o.get("text") or f"{o.get('ename')}: {o.get('evalue')}" for o in cell.outputs]
        texts.append("".join(out).strip())
    return texts


@pytest.fixture
def course(tmp_path):
    """A course folder with a solution, a gradebook and a student's folder inside grading/."""
    root = tmp_path / "course"
    (root / "solutions" / "a0").mkdir(parents=True)
    (root / "solutions" / "a0" / "a0.ipynb").write_text("THE SOLUTION")
    (root / "grading" / "autograded" / "ada" / "a0").mkdir(parents=True)
    (root / "grading" / "autograded" / "bob").mkdir(parents=True)
    (root / "grading" / "gradebook.db").write_text("SCORES")
    (root / "README.md").write_text("the course")
    return root


@slow
@needs_sandbox
def test_the_kernel_sees_and_writes_only_its_folder(course):
    workdir = course / "grading" / "autograded" / "ada" / "a0"
    got = run(
        [
            "import os; print(sorted(os.listdir('../../..')))",
            f"print(os.listdir({str(course / 'solutions')!r}))",
            f"open({str(course / 'grading' / 'gradebook.db')!r}).read()",
            f"open({str(course / 'README.md')!r}, 'a').write('x')",
            f"open({str(course / 'grading' / 'autograded' / 'bob' / 'x')!r}, 'w').write('x')",
            "open('answer.txt', 'w').write('mine'); print(os.listdir('.'))",
            "import kvcourse.sizing; print(kvcourse.sizing.kv_bytes_per_token.__name__)",
            "import time; time.sleep(60)",
            "print('still alive')",
        ],
        workdir,
        course,
    )
    assert got[0] == "['autograded']"  # grading/ holds nothing but the way to its own folder
    assert got[1].startswith("FileNotFoundError")
    assert got[2].startswith("FileNotFoundError")
    assert got[3].startswith("OSError: [Errno 30] Read-only file system")  # only a way through
    assert got[4].startswith(("FileNotFoundError", "OSError"))
    assert got[5] == "['answer.txt']"
    assert got[6] == "kv_bytes_per_token"
    assert got[7].startswith("KeyboardInterrupt")  # interrupted by message, kernel kept
    assert got[8] == "still alive"
    assert (course / "README.md").read_text() == "the course"
    assert (workdir / "answer.txt").read_text() == "mine"
    assert not (course / "grading" / "autograded" / "bob" / "x").exists()


@slow
@needs_sandbox
def test_no_network_not_even_loopback(course, tmp_path):
    listener = socket.create_server(("127.0.0.1", 0))
    port = listener.getsockname()[1]
    accepted = []
    threading.Thread(target=lambda: accepted.append(listener.accept()), daemon=True).start()
    probe = (
        "import socket\n"
        "try:\n"
        f"    socket.create_connection(('127.0.0.1', {port}), timeout=3); print('connected')\n"
        "except OSError as err:\n"
        "    print('blocked', type(err).__name__)"
    )
    workdir = tmp_path / "ada"
    workdir.mkdir()
    assert run([probe], workdir, course, sandboxed=False) == ["connected"]  # the control
    assert run([probe], workdir, course)[0].startswith("blocked")
    listener.close()


def test_problems_are_named(monkeypatch, tmp_path):
    monkeypatch.setenv(sandbox.BWRAP_ENV, str(tmp_path / "no-bwrap"))
    assert sandbox.bwrap_binary() is None
    assert "apt-get install bubblewrap" in sandbox.sandbox_problem()
    with pytest.raises(RuntimeError, match="--unsandboxed"):
        sandbox.SandboxedKernelManager()
    fake = tmp_path / "bwrap"
    fake.write_text("#!/bin/sh\necho 'No permissions to create new namespace' >&2\nexit 1\n")
    fake.chmod(0o755)
    monkeypatch.setenv(sandbox.BWRAP_ENV, str(fake))
    assert "cannot create its namespaces here: No permissions" in sandbox.sandbox_problem()


def plant_solutions(folder: Path) -> Path:
    """A copy of the course's solutions tree in ``folder``; the path of its notebook."""
    path = folder / "solutions" / "a0_kv_sizing" / "a0_kv_sizing.ipynb"
    path.parent.mkdir(parents=True)
    path.write_text("THE SOLUTION")
    return path


@slow
@needs_sandbox
def test_no_other_copy_of_the_course_is_readable(course, tmp_path):
    """Three copies planted where the old sandbox (the whole disk read-only, four folders of
    this course hidden) showed them: beside the environment that runs the grader, in a clone two
    levels above the submission, in the home folder."""
    workdir = tmp_path / "clone" / "grading" / "autograded" / "ada" / "a0"
    workdir.mkdir(parents=True)
    mark = uuid.uuid4().hex
    beside_venv = Path(sys.prefix).resolve().parent / f".kvcourse-test-{mark}"
    in_home = Path.home() / f".kvcourse-test-{mark}"
    try:
        planted = [
            plant_solutions(beside_venv),
            plant_solutions(tmp_path / "clone" / "grading"),
            plant_solutions(in_home),
        ]
        probe = [f"print(open({str(path)!r}).read())" for path in planted]
        probe.append(
            "import os; print(sorted(p for p in os.listdir('/') if p not in "
            "('bin', 'lib', 'lib32', 'lib64', 'libx32', 'sbin')))"
        )
        assert run(probe, workdir, course, sandboxed=False)[:3] == ["THE SOLUTION"] * 3
        got = run(probe, workdir, course)
    finally:
        shutil.rmtree(beside_venv, ignore_errors=True)
        shutil.rmtree(in_home, ignore_errors=True)
    assert all(text.startswith("FileNotFoundError") for text in got[:3]), got
    top = set(ast.literal_eval(got[3]))
    allowed = {"dev", "etc", "proc", "sys", "tmp", "usr", workdir.parts[1]}
    allowed |= {folder.parts[1] for folder in sandbox.visible_folders()}
    assert top <= allowed, f"the kernel sees {sorted(top - allowed)} at the top of the disk"


def test_the_kernel_keeps_no_instructor_variable():
    env = {"PATH": "/usr/bin", "LC_ALL": "C", "KVCOURSE_DB": "postgresql://u:secret@db/x"}
    env |= {"KVCOURSE_GRADING_RUN": "run-1", "AWS_SECRET_ACCESS_KEY": "s"}
    kept = sandbox.kernel_environment(env)
    assert kept == {"PATH": "/usr/bin", "LC_ALL": "C", "KVCOURSE_GRADING_RUN": "run-1"}


@needs_sandbox
def test_the_arguments_mount_only_the_allowlist(tmp_path):
    workdir, sockets = tmp_path / "grading" / "x", tmp_path / "sock"
    args = sandbox.sandbox_args(tmp_path, workdir, sockets, {"PATH": "/bin", "SECRET": "s"})
    assert args[-1] == "--" and "--clearenv" in args
    assert "--unshare-net" in args and "--unshare-pid" in args
    assert ["--ro-bind", "/", "/"] not in [args[i : i + 3] for i in range(len(args))]
    readonly = {args[i + 1] for i, a in enumerate(args) if a in ("--ro-bind", "--ro-bind-try")}
    library = Path(kvcourse.__file__).resolve().parent
    assert str(library) in readonly and str(Path(sys.prefix).resolve()) in readonly
    assert not any(Path(p) in (tmp_path, *tmp_path.parents) for p in readonly if p != "/usr")
    binds = [args[i + 2] for i, a in enumerate(args) if a == "--bind"]
    assert binds == [str(sockets), str(workdir.resolve())]
    # The private /tmp is mounted before every bind: a venv or clone under /tmp stays visible.
    first_bind = min(i for i, a in enumerate(args) if a in ("--bind", "--ro-bind", "--ro-bind-try"))
    assert args.index("--tmpfs") < first_bind and args[args.index("--tmpfs") + 1] == "/tmp"
    variables = [args[i + 1] for i, a in enumerate(args) if a == "--setenv"]
    assert "PATH" in variables and "SECRET" not in variables


def test_a_python_that_holds_the_course_is_refused(tmp_path, monkeypatch):
    monkeypatch.setattr(sandbox, "visible_folders", lambda: [tmp_path])
    monkeypatch.setattr(sandbox, "bwrap_binary", lambda: "/usr/bin/bwrap")
    with pytest.raises(RuntimeError, match="contains the course"):
        sandbox.sandbox_args(tmp_path / "course", Path("/elsewhere"), tmp_path / "sock")
    with pytest.raises(RuntimeError, match="holds the submission folder"):
        sandbox.sandbox_args(None, tmp_path / "x", tmp_path / "sock")
