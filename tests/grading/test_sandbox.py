"""The sandbox of student kernels (bubblewrap): a kernel started by SandboxedKernelManager runs
notebook code that cannot see the course's solutions, gradebook or tests, cannot write outside
its folder or reach the network, and can still import the library, write its own folder and be
interrupted. Skipped, saying why, where bubblewrap is unavailable."""

from __future__ import annotations

import socket
import threading
from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient

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
    assert got[1] == "[]"
    assert got[2].startswith("FileNotFoundError")
    assert got[3].startswith("OSError: [Errno 30] Read-only file system")
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


@needs_sandbox
def test_the_arguments_hide_the_course(tmp_path):
    (tmp_path / "solutions").mkdir()
    (tmp_path / "grading").mkdir()
    args = sandbox.sandbox_args(tmp_path, tmp_path / "grading" / "x", tmp_path / "sock")
    assert args[-1] == "--"
    assert "--unshare-net" in args and "--unshare-pid" in args
    hidden = [args[i + 1] for i, a in enumerate(args) if a == "--tmpfs"]
    assert hidden == [str(tmp_path / "solutions"), str(tmp_path / "grading")]
    binds = [args[i + 2] for i, a in enumerate(args) if a == "--bind"]
    assert binds == [str(tmp_path / "sock"), str(tmp_path / "grading" / "x")]
