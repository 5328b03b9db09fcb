"""kvcourse_grader.audit: the kernel-side hook, run in this process (no kernel), and its words."""

from __future__ import annotations

import json
import sys
import threading

import pytest

from kvcourse_grader import audit

TOKEN = "t0ken"


@pytest.fixture(scope="module")
def hook():
    """One hook for the module (audit hooks stay for the process): returns ``run(cell, kind,
    source)`` that runs ``source`` as cell ``cell`` and ``read()`` for the record so far."""
    source = audit._KERNEL.replace("AUDIT_FILE", repr(audit.AUDIT_FILE))
    source = source.replace("RULES", repr(audit._RULES))
    space, namespace = {}, {}
    import builtins

    original = builtins.__import__
    exec(compile(source, audit.AUDIT_FILE, "exec"), space)
    space["_kvcourse_audit_install"](TOKEN, audit.ALLOWED_MODULES, namespace)
    files = iter(range(1000))
    user = {"__name__": "__main__"}  # the kernel's namespace, shared by the cells

    def grader(code: str) -> None:
        compile(code, f"/tmp/ipykernel_0/grader{next(files)}.py", "exec")

    def run(cell: int, kind: str, code: str, grade_id: str = "g") -> dict:
        grader(audit.enter_code(TOKEN, cell, kind, grade_id))
        name = f"/tmp/ipykernel_0/cell{cell}_{next(files)}.py"
        # IPython compiles from its own frames; the cell then runs from them too
        code_object = _system_compile(code, name)
        _system_exec(code_object, user)

    def read() -> dict:
        grader(audit.read_code(TOKEN))
        text = namespace.pop(f"_kvcourse_audit_{TOKEN}", "")
        return audit.parse_read(text)

    yield run, read
    builtins.__import__ = original
    # the hook stays, paused for good: every later compile is the grader's
    compile(f"{audit.marker(TOKEN)} read\n", "/tmp/ipykernel_0/end.py", "exec")


# Stand-ins for IPython's frames: compiled under the standard library's path, so the hook
# treats them as the system's, as it does IPython's.
_SYSTEM = {}
exec(
    compile(
        "def _system_compile(code, name):\n    return compile(code, name, 'exec')\n"
        "def _system_exec(code, space):\n    exec(code, space)\n",
        __import__("sysconfig").get_path("stdlib") + "/_kvcourse_stand_in.py",
        "exec",
    ),
    _SYSTEM,
)
_system_compile, _system_exec = _SYSTEM["_system_compile"], _SYSTEM["_system_exec"]


def test_records_behaviour_per_cell_and_not_the_allowed_or_the_instructors(hook, tmp_path):
    run, read = hook
    target = tmp_path / "out.txt"
    run(1, "student", "import math, collections\nx = sum(range(3))")
    run(
        2,
        "student",
        "m = __import__('line' + 'cache')\nimport sys\nsys.settrace(None)\n"
        f"open({str(target)!r}, 'w').close()\nexec('y = 1')\nsys._getframe()",
        grade_id="sol_x",
    )
    run(3, "instructor", "import sys\nsys.setprofile(None)\nimport linecache")
    cells = read()["cells"]
    assert "1" not in cells and "3" not in cells  # ordinary modules; the instructor's own code
    did = cells["2"]["did"]
    assert did["import"] == ["linecache"]
    assert "sys.settrace" in did and did["write"] == [str(target)]
    assert set(did["compile"]) == {"compile", "exec"} and did["frames"] == ["sys._getframe"]
    words = audit.describe({"cells": cells})
    assert words[0].startswith("cell 2 (grade_id sol_x): imported linecache; wrote files ")
    assert "turned on a tracer (sys.settrace)" in words[0]


def test_a_student_function_called_by_a_test_is_the_students(hook):
    run, read = hook
    run(4, "student", "def peek():\n    import sys\n    sys.setprofile(None)")
    assert "4" not in read()["cells"]
    run(5, "instructor", "peek()")
    assert "sys.setprofile" in read()["cells"]["4"]["did"]


def test_a_function_given_other_code_is_reported_and_a_class_attribute_is_not(hook):
    run, read = hook
    run(10, "student", "class C:\n    pass\nC.x = 1\ndef f():\n    pass\nf.__doc__ = 'f'")
    assert "10" not in read()["cells"]
    run(11, "student", "def g():\n    return 2\nf.__code__ = g.__code__")
    assert read()["cells"]["11"]["did"]["code"] == ["a function given other code (__code__)"]


def test_reads_of_the_python_installation_are_not_counted(hook):
    run, read = hook
    run(6, "student", f"open({json.__file__!r}).read()\nopen('/etc/hostname')")
    assert read()["cells"]["6"]["did"]["read"] == ["/etc/hostname"]


def test_a_repeated_event_is_kept_once_and_threads_run_on(hook):
    run, read = hook
    code = "import sys\nfor _ in range(1000):\n    sys._getframe()"
    run(8, "student", code)
    assert read()["cells"]["8"]["did"]["frames"] == ["sys._getframe"]  # seen once
    box = []
    thread = threading.Thread(target=lambda: box.append(sys._getframe()))
    thread.start()
    thread.join()
    assert box  # the hook never blocks or breaks the event


def test_a_replaced_import_function_is_reported(hook):
    run, read = hook
    import builtins

    mine = builtins.__import__
    builtins.__import__ = lambda *a, **k: mine(*a, **k)
    try:
        run(9, "student", "x = 1")
        found = read()["cells"]["9"]["did"]["tamper"]
    finally:
        builtins.__import__ = mine
    assert found == ["replaced the import function (builtins.__import__)"]


def test_unreadable_record_and_notebook_flags(tmp_path):
    assert audit.parse_read("") is None and audit.parse_read("{}") is None
    behaviour = audit.metadata(None, 7)
    assert audit.describe(behaviour) == [
        "cell 7: the behaviour record could not be read after it (the kernel or IPython was "
        "changed); later cells' behaviour is unknown"
    ]
    nb = {"metadata": {"kvcourse": {"behaviour": behaviour}}, "cells": []}
    folder = tmp_path / "alice" / "a0"
    folder.mkdir(parents=True)
    (folder / "a0.ipynb").write_text(json.dumps(nb))
    assert audit.notebook_flags(folder / "a0.ipynb") == audit.describe(behaviour)
    rows = audit.behaviour_table(tmp_path)
    assert rows[1][:2] == ["alice", "a0"] and "could not be read" in rows[1][2]
    assert audit.notebook_flags({"metadata": {}}) == []
