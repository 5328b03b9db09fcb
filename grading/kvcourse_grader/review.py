"""Point an instructor at submission code that tampers with the grading.

nbgrader runs the tests in the student's own kernel, so a determined student can reach anything
the tests use. The tests resist the cheap tricks (always-equal objects, a rewritten library, a
forged partial score, swallowed assertion errors); this scan names the code that tries such things,
or anything stranger, so a person can look. It only reads the notebook: it never changes a grade.
Names can be computed (``__import__("line" + "cache")``), so :func:`behaviour_flags` adds what
the code was seen doing while it was graded (:mod:`kvcourse_grader.audit`).
"""

from __future__ import annotations

import ast
from pathlib import Path

import nbformat

#: Special methods that change how a value compares or converts.
COMPARISON_METHODS = frozenset(
    {
        "__eq__",
        "__ne__",
        "__int__",
        "__float__",
        "__index__",
        "__bool__",
        "__instancecheck__",
        "__subclasscheck__",
        "__getattribute__",
    }
)

#: Names whose use in a submission deserves a look, with what they allow.
SUSPICIOUS = {
    "builtins": "reaches the builtins",
    "__builtins__": "reaches the builtins",
    "globals": "rewrites globals",
    "sys.modules": "reaches loaded modules",
    "sys.displayhook": "writes cell results (forged scores)",
    "displayhook": "writes cell results (forged scores)",
    "set_custom_exc": "intercepts exceptions",
    "sys.excepthook": "intercepts exceptions",
    "inspect": "inspects the calling code",
    "ctypes": "pokes at memory",
    "gc": "walks live objects",
    "os._exit": "ends the kernel",
    "os.kill": "sends signals",
    "signal": "handles signals",
    "subprocess": "starts processes",
    "sqlite3": "opens databases (the gradebook is one)",
    "importlib": "reloads or re-imports modules (can bring back switched-off references)",
    "reload": "reloads modules (can bring back switched-off references)",
    "setprofile": "hooks every call (can unhook the tests' guards)",
    "settrace": "hooks every line (can unhook the tests' guards)",
    "__code__": "swaps a function's code",
    "FunctionType": "builds functions from code objects (copies of library functions)",
    "__dict__": "reaches an object's attributes directly (rewrites them unseen)",
    "__setattr__": "sets attributes past the usual assignment",
    "get_ipython": "reaches the IPython shell (its history, hooks and callbacks)",
    "In": "reads the input history (earlier cells' code)",
    "_ih": "reads the input history (earlier cells' code)",
    "Out": "reads earlier cells' results",
    "history_manager": "reads the input history (earlier cells' code)",
    "linecache": "reads cached source code (earlier cells' code)",
    "_getframe": "reads the calling code's frames (the tests' values)",
    "f_back": "reads the calling code's frames (the tests' values)",
    "f_locals": "reads another frame's variables (the tests' values)",
    "co_consts": "reads the constants of compiled code (the tests' values)",
    "threading": "runs code in the background (beside the tests)",
    "addaudithook": "watches every compile and import (the tests' code)",
    "__delattr__": "deletes attributes past the usual statement",
}

#: Builtins and modules the tests rely on; rebinding them at top level shadows them in tests.
TEST_NAMES = frozenset(
    {
        "int",
        "float",
        "isinstance",
        "type",
        "abs",
        "math",
        "numbers",
        "print",
        "AssertionError",
        "ValueError",
        "range",
        "len",
    }
)


def _dotted(node: ast.AST) -> str | None:
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        parts.append(node.id)
        return ".".join(reversed(parts))
    return None


_DICT_WRITES = frozenset({"update", "setdefault", "pop", "popitem", "clear", "__setitem__"})


def _is_vars_call(node: ast.AST) -> bool:
    """``vars(x)``: a module's or an object's attribute dict, writable."""
    return isinstance(node, ast.Call) and _dotted(node.func) == "vars" and bool(node.args)


def _strip_magics(source: str) -> str:
    return "\n".join(
        "" if line.lstrip().startswith(("%", "!")) else line for line in source.split("\n")
    )


def review_source(source: str, modules: set[str]) -> list[str]:
    """Findings for one cell's code; ``modules`` collects imported names across cells."""
    try:
        tree = ast.parse(_strip_magics(source))
    except SyntaxError as err:
        return [f"syntax error (line {err.lineno})"]
    found: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import | ast.ImportFrom):
            for alias in node.names:
                modules.add((alias.asname or alias.name).split(".")[0])
                name = alias.name if isinstance(node, ast.Import) else node.module or ""
                for suspect, why in SUSPICIOUS.items():
                    if name == suspect or name.startswith(suspect + "."):
                        found.append(f"imports {name} ({why})")
        elif isinstance(node, ast.ClassDef):
            methods = sorted(
                item.name
                for item in node.body
                if isinstance(item, ast.FunctionDef | ast.AsyncFunctionDef)
                and item.name in COMPARISON_METHODS
            )
            if methods:
                found.append(f"class {node.name} defines {', '.join(methods)}")
        elif isinstance(node, ast.Assign | ast.AugAssign | ast.AnnAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for target in targets:
                name = _dotted(target)
                if isinstance(target, ast.Attribute) and name and name.split(".")[0] in modules:
                    found.append(f"assigns {name}")
                elif isinstance(target, ast.Name) and target.id in TEST_NAMES:
                    found.append(f"rebinds {target.id}")
                elif isinstance(target, ast.Subscript) and _is_vars_call(target.value):
                    found.append("assigns through vars() (rewrites attributes unseen)")
        elif isinstance(node, ast.ExceptHandler):
            caught = _dotted(node.type) if node.type is not None else None
            if caught in ("KeyboardInterrupt", "BaseException"):
                found.append(f"catches {caught} (survives interrupts)")
        elif isinstance(node, ast.Call):
            name = _dotted(node.func) or ""
            if name in ("setattr", "delattr") and node.args:
                found.append(f"calls {name}")
            elif name.endswith(".register") and name.split(".")[0] in ("numbers", "abc"):
                found.append(f"calls {name} (claims to be a number)")
            elif (
                isinstance(node.func, ast.Attribute)
                and node.func.attr in _DICT_WRITES
                and _is_vars_call(node.func.value)
            ):
                found.append("changes vars() (rewrites attributes unseen)")
        if isinstance(node, ast.Name | ast.Attribute):
            name = _dotted(node) or ""
            last = node.attr if isinstance(node, ast.Attribute) else ""
            if name in SUSPICIOUS:
                found.append(f"uses {name} ({SUSPICIOUS[name]})")
            elif last in SUSPICIOUS:
                found.append(f"uses .{last} ({SUSPICIOUS[last]})")
    return list(dict.fromkeys(found))


def behaviour_flags(autograded: Path | str) -> list[str]:
    """Findings from what the code did when it was graded: the audit hook's record in the
    autograded notebook (:mod:`kvcourse_grader.audit`), which sees what names hide, e.g.
    ``cell 7 (grade_id sol_x): imported linecache; read files /etc/passwd``."""
    from kvcourse_grader.audit import notebook_flags

    return notebook_flags(autograded)


def protected_ids(source_notebook: Path | str) -> set[str]:
    """``grade_id`` of the cells nbgrader restores from the source: test cells and locked cells."""
    notebook = nbformat.read(source_notebook, as_version=4)
    ids = set()
    for cell in notebook.cells:
        meta = cell.get("metadata", {}).get("nbgrader", {})
        if (meta.get("grade") and not meta.get("solution")) or meta.get("locked"):
            ids.add(meta.get("grade_id"))
    return ids


def review_notebook(path: Path | str, protected: set[str] | None = None) -> list[str]:
    """Findings for the code cells of a submitted notebook, in order, without repeats.

    Cells whose ``grade_id`` is in ``protected`` are skipped: nbgrader puts the instructor's copy
    back before grading, so what the student wrote there never runs.
    """
    try:
        notebook = nbformat.read(path, as_version=4)
    except Exception as err:  # a file that is not a notebook at all
        return [f"unreadable notebook ({type(err).__name__})"]
    protected = protected or set()
    modules: set[str] = set()
    found: list[str] = []
    present = set()
    for index, cell in enumerate(notebook.cells):
        grade_id = cell.get("metadata", {}).get("nbgrader", {}).get("grade_id")
        present.add(grade_id)
        if cell.cell_type != "code" or grade_id in protected:
            continue
        found.extend(f"cell {index}: {item}" for item in review_source(cell.source, modules))
    missing = sorted(protected - present)
    if missing:  # nbgrader scores a missing test cell 0 but does not say so
        found.append(f"missing locked cells: {', '.join(missing)}")
    return list(dict.fromkeys(found))
