"""The hidden tests' harness, delivered at autograde: a private copy that student code cannot reach.

Visible and hidden test cells share one harness, :mod:`kvcourse.assignment_checks.harness` (the
library's reference and copies of it switched off, fresh copies of library modules). A hidden
cell names it with one import, ``from kvcourse.assignment_checks.harness import switched_off``,
which works as it stands wherever the course library is installed (an instructor running a
solution notebook). At autograde that import would hand the hidden tests the kernel's module, which
the student's code, run before them, may have rewritten. So :func:`with_private_harness` replaces
the import, in the source that runs and nowhere else, with code that compiles the harness from
the grading machine's own file into a fresh module object that is in no registry the student's
code could have reached, and binds the imported names from it.

:class:`~kvcourse_grader.preprocessors.RobustExecute` runs every hidden cell this way, in the
snapshot of the kernel taken where the cell stands (:mod:`kvcourse_grader.hidden_runs`); the
notebook keeps the cell's source as written, so the autograded copy and the feedback show only
the import line (and the feedback removes hidden regions altogether). The snapshot's server uses
the same private copy for the ``switched_off`` of hidden cells that run in the grader.
"""

from __future__ import annotations

import ast
import importlib.util
from functools import cache
from pathlib import Path

__all__ = ["HARNESS_MODULE", "harness_imports", "harness_source", "with_private_harness"]

#: The module a hidden cell imports the harness from.
HARNESS_MODULE = "kvcourse.assignment_checks.harness"

_BEGIN, _END = "BEGIN HIDDEN TESTS", "END HIDDEN TESTS"


@cache
def harness_source() -> str:
    """The text of the harness module as installed beside this grader (never the student's), with
    its one import from the course library (:mod:`kvcourse.assignment_checks.copy_watch`) replaced
    by that module's own text, so that the private copy is one file that imports nothing the
    student's code could have rewritten."""
    text = _module_text(HARNESS_MODULE)
    lines = text.split("\n")
    for node in reversed(ast.parse(text).body):
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("kvcourse."):
            inlined = _module_text(node.module).replace(_FUTURE, "", 1)
            lines[node.lineno - 1 : node.end_lineno] = inlined.rstrip("\n").split("\n")
    return "\n".join(lines)


_FUTURE = "from __future__ import annotations\n"


def _module_text(name: str) -> str:
    """The source text of the installed module ``name``."""
    spec = importlib.util.find_spec(name)
    if spec is None or not spec.origin:
        raise RuntimeError(f"cannot find {name}: install the course library (kvcourse)")
    return Path(spec.origin).read_text(encoding="utf-8")


def _hidden_lines(lines: list[str]) -> set[int]:
    """Line numbers (from 1) that lie inside a hidden-test region."""
    inside, found = False, set()
    for number, line in enumerate(lines, start=1):
        if _BEGIN in line:
            inside = True
        elif _END in line:
            inside = False
        elif inside:
            found.add(number)
    return found


def harness_imports(source: str) -> list[tuple[int, int, tuple[str, ...]]]:
    """The harness imports inside the hidden regions of a cell's ``source``: ``(first line, last
    line, imported names)`` of each ``from kvcourse.assignment_checks.harness import ...``.

    Raises ``ValueError`` for an import of the harness that renames a name (``as``) or imports it
    as a module, which the replacement could not honour."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return []
    hidden = _hidden_lines(source.split("\n"))
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import) and any(a.name == HARNESS_MODULE for a in node.names):
            raise ValueError(f"line {node.lineno}: import names from {HARNESS_MODULE}, not it")
        if not (isinstance(node, ast.ImportFrom) and node.module == HARNESS_MODULE):
            continue
        if node.lineno not in hidden:
            continue
        if any(alias.asname or alias.name == "*" for alias in node.names):
            raise ValueError(f"line {node.lineno}: import the harness's names as they are")
        end = node.end_lineno or node.lineno
        found.append((node.lineno, end, tuple(alias.name for alias in node.names)))
    return found


def _private_import(names: tuple[str, ...], indent: str) -> list[str]:
    """Code that binds ``names`` from a private copy of the harness compiled from its source."""
    source = harness_source()
    lines = [
        "def _kvcourse_private_harness():",
        "    import types",
        "",
        "    module = types.ModuleType('kvcourse_private_harness')",
        f"    code = compile({source!r}, {HARNESS_MODULE!r}, 'exec', dont_inherit=True)",
        "    exec(code, vars(module))",
        "    return module",
        "",
        "",
        "_kvcourse_harness = _kvcourse_private_harness()",
        f"{', '.join(names)}, = " + "".join(f"_kvcourse_harness.{n}, " for n in names).rstrip(),
        "del _kvcourse_private_harness, _kvcourse_harness",
    ]
    return [f"{indent}{line}" if line else "" for line in lines]


def with_private_harness(source: str) -> str:
    """``source`` with each harness import in its hidden regions replaced by a private copy of
    the harness (module docstring); a cell without one comes back unchanged."""
    imports = harness_imports(source)
    if not imports:
        return source
    lines = source.split("\n")
    for first, last, names in sorted(imports, reverse=True):
        indent = lines[first - 1][: len(lines[first - 1]) - len(lines[first - 1].lstrip())]
        lines[first - 1 : last] = _private_import(names, indent)
    return "\n".join(lines)
