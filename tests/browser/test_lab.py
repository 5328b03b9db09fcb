"""The assignments as students meet them: each released notebook opened and run in a real
JupyterLab (token-less, on 127.0.0.1, with the students' settings of ``grading/student_lab``).

* run as released, the first visible test fails, in the student's own stub, with no library frames
  in the traceback;
* with the solution cells filled in, every cell runs clean and the plug-in figures show;
* the student sees none of nbgrader's instructor tools, and no news prompt.

Screenshots go to ``_build/test-artifacts/lab/``.
"""

import itertools
import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import nbformat
import pytest

from kvcourse_grader.samples import Sample, build_sample

pytestmark = [pytest.mark.slow, pytest.mark.e2e]

ROOT = Path(__file__).resolve().parents[2]
ASSIGNMENTS = sorted(
    p.name for p in (ROOT / "notebooks").iterdir() if (p / f"{p.name}.ipynb").exists()
)
ANSI = re.compile(r"\x1b\[[0-9;]*m")
#: A library frame in a traceback: a file of the installed course package.
LIBRARY_FRAME = re.compile(r"(lib/kvcourse/|site-packages/kvcourse/)\S+\.py")
INSTRUCTOR_TOOLS = ("Create Assignment", "Formgrader", "Course List", "Assignment List", "Nbgrader")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    """A student's JupyterLab over a folder with each assignment as released and as solved."""
    work = tmp_path_factory.mktemp("lab")
    for assignment in ASSIGNMENTS:
        released = nbformat.read(ROOT / "notebooks" / assignment / f"{assignment}.ipynb", 4)
        solved = build_sample(ROOT, assignment, Sample(about="every part solved"))
        for kind, notebook in (("released", released), ("solved", solved)):
            (work / kind / assignment).mkdir(parents=True)
            nbformat.write(notebook, work / kind / assignment / f"{assignment}.ipynb")
    port = free_port()
    env = {
        **os.environ,
        "JUPYTER_CONFIG_PATH": str(ROOT / "grading" / "student_lab"),
        "JUPYTER_RUNTIME_DIR": str(work / ".runtime"),
        "JUPYTERLAB_SETTINGS_DIR": str(work / ".settings"),
        "JUPYTERLAB_WORKSPACES_DIR": str(work / ".workspaces"),
    }
    command = [
        sys.executable, "-m", "jupyterlab", "--no-browser",
        "--ServerApp.ip=127.0.0.1", f"--ServerApp.port={port}", "--ServerApp.port_retries=0",
        "--IdentityProvider.token=", "--ServerApp.password=", f"--ServerApp.root_dir={work}",
        "--LabApp.expose_app_in_browser=True",
    ]  # fmt: skip
    if hasattr(os, "geteuid") and os.geteuid() == 0:
        command.append("--allow-root")
    log = open(work / "lab.log", "w")  # noqa: SIM115 (closed below)
    server = subprocess.Popen(
        command, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
    )
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 90
    while True:
        try:
            with urllib.request.urlopen(f"{url}/api/status", timeout=2) as response:
                if response.status == 200:
                    break
        except OSError:
            pass
        if server.poll() is not None or time.monotonic() > deadline:
            log.close()
            pytest.fail(f"JupyterLab did not start:\n{(work / 'lab.log').read_text()[-3000:]}")
        time.sleep(0.5)
    yield url
    os.killpg(server.pid, signal.SIGTERM)
    try:
        server.wait(timeout=20)
    except subprocess.TimeoutExpired:
        os.killpg(server.pid, signal.SIGKILL)
    log.close()


_WORKSPACES = itertools.count()

READ_CELLS = """() => {
    const notebook = window.jupyterapp.shell.currentWidget.content.model;
    const cells = [];
    for (let i = 0; i < notebook.cells.length; i++) {
        const cell = notebook.cells.get(i);
        const meta = cell.sharedModel.getMetadata();
        cells.push({
            type: cell.type,
            gradeId: meta.nbgrader ? meta.nbgrader.grade_id : null,
            outputs: cell.type === 'code' ? cell.outputs.toJSON() : [],
        });
    }
    return cells;
}"""


#: Make cell ``i`` the active one and scroll to it (JupyterLab renders only the cells in view,
#: so the page's own scrolling cannot reach the others).
SHOW_CELL = """i => {
    const notebook = window.jupyterapp.shell.currentWidget.content;
    notebook.activeCellIndex = i;
    return notebook.scrollToItem(i, 'start');
}"""


def open_notebook(browser, lab, path: str, watch):
    """Open ``path`` in JupyterLab and wait until its kernel is idle; return the page and its
    problems."""
    page = browser.new_page(viewport={"width": 1280, "height": 900})
    problems = watch(page)
    # A workspace of its own, so JupyterLab does not reopen the notebooks of earlier tests.
    workspace = f"test-{next(_WORKSPACES)}"
    page.goto(f"{lab}/lab/workspaces/{workspace}/tree/{path}?reset", wait_until="domcontentloaded")
    page.wait_for_function(
        "path => window.jupyterapp?.shell.currentWidget?.context?.path === path"
        " && window.jupyterapp.shell.currentWidget.sessionContext.session?.kernel"
        "?.status === 'idle'",
        arg=path,
        timeout=90000,
    )
    return page, problems


def run_notebook(browser, lab, path: str, watch):
    """Open ``path`` in JupyterLab, run all cells, wait until the kernel is done; return the page,
    its problems and the cells (type, grade id, outputs)."""
    page, problems = open_notebook(browser, lab, path, watch)
    # The command's promise settles when the last cell has run (or the first error stopped it).
    page.evaluate("() => window.jupyterapp.commands.execute('notebook:run-all-cells')")
    page.wait_for_function(
        "() => window.jupyterapp.shell.currentWidget.sessionContext.session.kernel.status"
        " === 'idle'",
        timeout=240000,
        polling=500,
    )
    return page, problems, page.evaluate(READ_CELLS)


def errors(cells):
    """(index, grade id, traceback text) of every error output, in notebook order."""
    found = []
    for index, cell in enumerate(cells):
        for output in cell["outputs"]:
            if output.get("output_type") == "error":
                text = ANSI.sub("", "\n".join(output.get("traceback", [])))
                found.append((index, cell["gradeId"], f"{output.get('ename')}: {text}"))
    return found


@pytest.mark.parametrize("assignment", ASSIGNMENTS)
def test_released_notebook_fails_first_in_the_students_own_code(
    browser, lab, assignment, watch, shoot
):
    page, problems, cells = run_notebook(
        browser, lab, f"released/{assignment}/{assignment}.ipynb", watch
    )
    first_test = next(c["gradeId"] for c in cells if (c["gradeId"] or "").startswith("test_"))
    found = errors(cells)
    assert found, f"{assignment} as released ran without any error: the visible tests pass on stubs"
    index, grade_id, text = found[0]
    page.evaluate(SHOW_CELL, index)  # the screenshot shows the failure the student sees first
    page.wait_for_timeout(800)
    shoot(page, f"lab/{assignment}-released")
    assert grade_id == first_test, (
        f"{assignment}: the first error is in cell {index} ({grade_id}), not in the first visible "
        f"test {first_test}:\n{text[-1500:]}"
    )
    assert "NotImplementedError" in text and "YOUR CODE HERE" in text, (
        f"{assignment}: the first visible test should fail in the student's own stub:\n{text}"
    )
    assert not LIBRARY_FRAME.search(text), (
        f"{assignment}: the first failure shows library frames:\n{text}"
    )
    assert not [m for m in problems.messages if "api/" not in m], problems.messages
    page.close()


def test_a_notebook_opens_as_saved(browser, lab, watch):
    """Opening a notebook and starting its kernel changes nothing a student would have to save
    (grading/student_lab/jupyter_server_config.py fills in the language the kernel reports), and
    the file on disk stays as released."""
    assignment = ASSIGNMENTS[-1]
    path = f"released/{assignment}/{assignment}.ipynb"
    page, _ = open_notebook(browser, lab, path, watch)
    page.wait_for_timeout(2000)  # the kernel's info arrives after it is idle
    dirty = page.evaluate("() => window.jupyterapp.shell.currentWidget.context.model.dirty")
    title = page.evaluate("() => window.jupyterapp.shell.currentWidget.title.className")
    # The file on disk, read as text (not as a notebook, which the lab would fill in).
    raw = page.request.get(f"{lab}/api/contents/{path}?type=file&format=text&content=1")
    on_disk = json.loads(raw.json()["content"])
    page.close()
    assert not dirty and "jp-mod-dirty" not in title, f"{path} opened marked unsaved"
    assert on_disk["metadata"]["language_info"] == {"name": "python"}, "the file was rewritten"


@pytest.mark.parametrize("assignment", ASSIGNMENTS)
def test_solved_notebook_runs_clean_and_draws_its_figures(browser, lab, assignment, watch, shoot):
    page, problems, cells = run_notebook(
        browser, lab, f"solved/{assignment}/{assignment}.ipynb", watch
    )
    found = errors(cells)
    assert not found, f"{assignment} with the solutions filled in raised:\n{found[0][2][-2000:]}"
    plug_in = next(c for c in cells if c["gradeId"] == "plug_in")
    assert plug_in["outputs"], f"{assignment}: the plug-in cell shows nothing"
    images = [o for o in plug_in["outputs"] if "image/png" in o.get("data", {})]
    source = nbformat.read(ROOT / "notebooks" / assignment / f"{assignment}.ipynb", 4)
    draws = any(
        cell.get("metadata", {}).get("nbgrader", {}).get("grade_id") == "plug_in"
        and re.search(r"\bplt\.|Figure|Image\(|_plot\(|figure\(", cell.source)
        for cell in source.cells
    )
    assert images or not draws, f"{assignment}: the plug-in cell draws, but shows no figure"
    if images:
        page.locator(".jp-OutputArea-output img").last.scroll_into_view_if_needed()
    broken = page.evaluate(
        "() => [...document.querySelectorAll('.jp-OutputArea-output img')]"
        ".filter(i => !i.complete || i.naturalWidth === 0).length"
    )
    shoot(page, f"lab/{assignment}-solved")
    assert broken == 0, f"{assignment}: {broken} output images did not load"
    page.close()


def test_students_see_no_instructor_tools_and_no_news_prompt(browser, lab, shoot):
    page = browser.new_page(viewport={"width": 1280, "height": 900})
    path = f"released/{ASSIGNMENTS[0]}/{ASSIGNMENTS[0]}.ipynb"
    page.goto(f"{lab}/lab/workspaces/student-view/tree/{path}?reset")
    page.wait_for_selector(".jp-Notebook", timeout=90000)
    page.wait_for_timeout(4000)
    menus = page.locator(".lm-MenuBar-itemLabel").all_inner_texts()
    tabs = page.locator(".lm-TabBar-tab").evaluate_all(
        "tabs => tabs.map(t => t.title || t.textContent)"
    )
    text = page.locator("body").inner_text()
    shoot(page, "lab/student-view")
    shown = [tool for tool in INSTRUCTOR_TOOLS if any(tool in item for item in menus + tabs)]
    assert not shown, f"a student's JupyterLab shows {shown} (menus {menus}, tabs {tabs})"
    assert "Validate" in text, "the Validate button (check before you submit) should stay"
    assert "news" not in text.lower(), "JupyterLab asks about news on first start"
    with pytest.raises(urllib.error.HTTPError):
        urllib.request.urlopen(f"{lab}/formgrader", timeout=10)
    page.close()
