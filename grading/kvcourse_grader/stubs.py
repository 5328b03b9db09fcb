"""The stubs a release puts where a solution was, each naming what the student writes there.

nbgrader's ``ClearSolutions`` replaces every solution region with one fixed stub, ``# YOUR CODE
HERE`` and ``raise NotImplementedError()``; a student who runs a test cell early then reads
``NotImplementedError`` with no word of which of a class's methods is missing. :class:`NamedStubs`
is ``ClearSolutions`` (same settings, same regions) whose stub inside a function says which one:
``raise NotImplementedError("write MyBlockTable.append here")``.
``grading/nbgrader_config.py`` puts it in ``generate_assignment``'s pipeline in place of
``ClearSolutions``.
"""

from __future__ import annotations

import re

from nbformat import NotebookNode
from nbgrader.preprocessors import ClearSolutions

__all__ = ["PLAIN_STUB", "NamedStubs", "is_stub_line", "named_stubs"]

#: The line nbgrader's stub raises with.
PLAIN_STUB = "raise NotImplementedError()"
_STUB_LINE = re.compile(r'^raise NotImplementedError\(("[^"\\]*")?\)$')
_DEF = re.compile(r"^(\s*)(?:async\s+)?def\s+(\w+)\s*\(")
_CLASS = re.compile(r"^(\s*)class\s+(\w+)\b")


def is_stub_line(line: str) -> bool:
    """Whether ``line`` (stripped) is a release's stub raise, plain or naming its function."""
    return bool(_STUB_LINE.match(line.strip()))


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip())


def _owner(lines: list[str], index: int) -> str | None:
    """The dotted name of the function (with its classes) that line ``index`` lies in."""
    names, depth = [], _indent(lines[index])
    for line in reversed(lines[:index]):
        if not line.strip() or _indent(line) >= depth:
            continue
        found = _DEF.match(line) or _CLASS.match(line)
        if found is None:
            continue
        if names or _DEF.match(line):  # the innermost owner is a function
            names.append(found.group(2))
        depth = _indent(line)
    return ".".join(reversed(names)) or None


def named_stubs(source: str) -> str:
    """``source`` with each plain stub raise inside a function replaced by one that names it; a
    stub outside any function stays as nbgrader wrote it."""
    lines = source.split("\n")
    for index, line in enumerate(lines):
        if line.strip() != PLAIN_STUB:
            continue
        owner = _owner(lines, index)
        if owner is not None:
            message = f"write {owner} here"
            lines[index] = f'{line[: _indent(line)]}raise NotImplementedError("{message}")'
    return "\n".join(lines)


class NamedStubs(ClearSolutions):
    """nbgrader's ``ClearSolutions``, whose stub in a function names that function."""

    def _replace_solution_region(self, cell: NotebookNode, language: str) -> bool:
        replaced = super()._replace_solution_region(cell, language)
        if replaced and cell.cell_type == "code" and language == "python":
            cell.source = named_stubs(cell.source)
        return replaced
