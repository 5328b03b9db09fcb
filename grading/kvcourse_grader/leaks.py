"""Keep the text of hidden tests out of everything a student gets back.

The hidden tests never run in the kernel whose outputs the student gets back:
:class:`~kvcourse_grader.preprocessors.RobustExecute` runs each one, once every cell of the
notebook has run, in a *snapshot* of the kernel taken where the cell stands, or in the grader
itself (:mod:`kvcourse_grader.remote`). Whatever the student's code reads there (a trace function,
the caller's frame) goes nowhere: the snapshot's output is dropped and it ends right after. Their
text never enters the kernel's input history or ``linecache`` either. Two more layers stay:

1. **In the outputs** (:func:`redact_notebook`, at autograde): every output of every cell that ran
   after the first hidden cell is searched for the hidden cells' distinctive lines and literals
   (:class:`HiddenText`), also base64- or hex-encoded, reversed or escaped; an output that holds one
   is replaced by :data:`REMOVED`, and the submission is flagged for review
   (:func:`removal_flags`). With the tests outside the kernel nothing of them should ever be
   found there; the search stays as a second line (a hidden line that a visible cell also
   printed, an autograde run with an older grader).
2. **In the feedback**: the hidden cells' own outputs never reach it at all
   (:class:`~kvcourse_grader.preprocessors.RedactHiddenTests`).
"""

from __future__ import annotations

import ast
import base64
import binascii
import codecs
import functools
import html
import importlib.util
import io
import re
import tokenize
from dataclasses import dataclass
from pathlib import Path

from nbformat.notebooknode import NotebookNode
from nbformat.v4 import new_output

__all__ = [
    "REMOVED",
    "declared_properties",
    "HiddenText",
    "hidden_text",
    "is_hidden_cell",
    "redact_notebook",
    "removal_flags",
    "strip_ansi",
]

BEGIN, END = "BEGIN HIDDEN TESTS", "END HIDDEN TESTS"

#: The output that replaces one that quoted a hidden test.
REMOVED = (
    "[grader: this output was removed because it held text of a hidden test; the submission is "
    "flagged for review]\n"
)

#: Shortest hidden line (after squeezing spaces), number (significant digits) and string that
#: count as distinctive: shorter ones are everyday text ("assert ok", "16", "block").
MIN_LINE, MIN_DIGITS, MIN_STRING = 12, 5, 8

_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")
# A line that is one name (a name of a long import, an argument on a line of its own): it tells
# nothing, and the library's own code, which a traceback may show, is full of them.
_NAME_ONLY = re.compile(r"[A-Za-z_][\w.]*,?\)?")
_BASE64 = re.compile(r"[A-Za-z0-9+/_-]{16,}={0,2}")
_HEX = re.compile(r"(?:[0-9a-fA-F]{2}){8,}")


def strip_ansi(text: str) -> str:
    """``text`` without the terminal colour codes IPython puts in tracebacks and error names."""
    return _ANSI.sub("", text)


def _squeeze(text: str) -> str:
    return " ".join(text.split())


def is_hidden_cell(source: str) -> bool:
    """True for a test cell with a hidden-test region."""
    return BEGIN in source


def declared_properties(source: str) -> set[str]:
    """The property names a hidden cell declares: the string given to each
    ``checking("...")`` in its hidden regions (see ``kvcourse.assignment_checks.harness``)."""
    hidden, _ = _regions(source)
    try:
        tree = ast.parse(_dedented("\n".join(hidden)))
    except SyntaxError:
        return set()
    return {
        node.args[0].value
        for node in ast.walk(tree)
        if isinstance(node, ast.Call)
        and getattr(node.func, "id", getattr(node.func, "attr", None)) == "checking"
        and node.args
        and isinstance(node.args[0], ast.Constant)
        and isinstance(node.args[0].value, str)
    }


def _regions(source: str) -> tuple[list[str], list[str]]:
    """The lines of ``source`` inside hidden regions, and those outside."""
    inside, hidden, visible = False, [], []
    for line in source.split("\n"):
        if BEGIN in line:
            inside = True
        elif END in line:
            inside = False
        else:
            (hidden if inside else visible).append(line)
    return hidden, visible


def _literals(code: str) -> set[str]:
    """The distinctive number and string literals of ``code``, in the spellings they print in:
    numbers of at least :data:`MIN_DIGITS` significant digits (round numbers are everyday
    text), strings of at least :data:`MIN_STRING`
    characters."""
    found: set[str] = set()
    try:
        tokens = list(tokenize.generate_tokens(io.StringIO(code).readline))
    except (tokenize.TokenError, SyntaxError):
        return found
    for token in tokens:
        if token.type not in (tokenize.NUMBER, tokenize.STRING):
            continue
        try:
            value = ast.literal_eval(token.string)
        except (ValueError, SyntaxError):
            continue
        if isinstance(value, int | float) and not isinstance(value, bool):
            digits = re.sub(r"[^0-9]", "", repr(value).lower().split("e")[0]).strip("0")
            if len(digits) >= MIN_DIGITS:
                found |= {token.string, repr(value)}
        elif isinstance(value, str) and len(value.strip()) >= MIN_STRING:
            found.add(value)
    return found


@dataclass(frozen=True)
class HiddenText:
    """The distinctive pieces of a notebook's hidden tests: lines (spaces squeezed) and literals
    that occur in no visible part of the notebook."""

    lines: frozenset[str]
    literals: frozenset[str]

    def found_in(self, text: str) -> list[str]:
        """The pieces that occur in ``text`` (or in a decoded form of it), sorted."""
        forms = _readings(text)
        hits = {piece for piece in self.lines if any(piece in form for form in forms)}
        hits |= {piece for piece in self.literals if any(piece in form for form in forms)}
        return sorted(hits)


def hidden_text(nb: NotebookNode) -> HiddenText:
    """The :class:`HiddenText` of a notebook whose test cells carry their hidden regions (the
    source notebook, or an autograded one): the pieces found in no visible cell and not in the
    grader's code the kernel is shown (:func:`~kvcourse_grader.snapshots.kernel_visible_source`)."""
    hidden_code, visible_code = [], []
    for cell in nb.cells:
        hidden, visible = _regions(cell.source) if cell.cell_type == "code" else ([], [])
        hidden_code.append("\n".join(hidden))
        visible_code.append("\n".join(visible if cell.cell_type == "code" else [cell.source]))
    # What the kernel is shown of the grader's own code counts as visible too (a student who
    # prints it shows no hidden test, though a number in it may equal one of the tests').
    from kvcourse_grader.snapshots import kernel_visible_source

    visible_all = "\n".join(visible_code) + "\n" + kernel_visible_source()
    visible_squeezed = _squeeze(visible_all)  # a hidden line inside a visible one tells nothing
    lines = {_squeeze(line) for code in hidden_code for line in code.split("\n")}
    lines = {
        line
        for line in lines
        if len(line) >= MIN_LINE
        and line not in visible_squeezed
        and line not in library_lines()  # a traceback through the library shows it too
        and not line.startswith(("import ", "from "))
        and not _NAME_ONLY.fullmatch(line)
    }
    literals = set()
    names = library_names()
    for code in hidden_code:
        found = _literals(_dedented(code))
        # A method or attribute of the library named as a string (``("fork_sequence", ...)``
        # for calls_on) is the library's, which the student reads and prints freely.
        literals |= {text for text in found if text not in visible_all and text not in names}
    return HiddenText(frozenset(lines), frozenset(literals))


@functools.cache
def library_lines() -> frozenset[str]:
    """Every line of the course library's source, spaces squeezed: a hidden test's line that the
    library also has (``k = len(parents[0])``) shows in any traceback through the library, so it
    tells nothing of the tests."""
    return frozenset(
        _squeeze(line) for path in _library_files() for line in path.read_text("utf-8").split("\n")
    )


def _library_files() -> list[Path]:
    spec = importlib.util.find_spec("kvcourse")
    folders = (spec.submodule_search_locations or []) if spec else []
    return [path for folder in folders for path in sorted(Path(folder).rglob("*.py"))]


@functools.cache
def library_names() -> frozenset[str]:
    """Every name the course library defines or reads as an attribute (``def fork_sequence``,
    ``pool.num_used``): names a traceback through the library shows, so never a hidden test's."""
    found: set[str] = set()
    for path in _library_files():
        found |= set(re.findall(r"(?:\bdef\s+|\.)([A-Za-z_]\w*)", path.read_text("utf-8")))
    return frozenset(found)


def _dedented(code: str) -> str:
    """Hidden regions sit inside blocks; tokenize them as a block of their own."""
    lines = [line for line in code.split("\n") if line.strip()]
    indent = min((len(line) - len(line.lstrip()) for line in lines), default=0)
    return "\n".join(line[indent:] if len(line) >= indent else line for line in lines)


def _readings(text: str) -> list[str]:
    """``text`` as printed and in the forms code most easily disguises it in: without terminal
    colours and HTML entities, with Python escapes undone, reversed, and with each long base64
    or hex run decoded. Each form has its spaces squeezed, like the hidden lines."""
    plain = html.unescape(_ANSI.sub("", text))
    forms = [plain, plain[::-1]]
    try:
        forms.append(codecs.decode(plain.encode("latin-1", "ignore"), "unicode_escape"))
    except (UnicodeDecodeError, ValueError):
        pass
    for run in _BASE64.findall(plain):
        for decode in (base64.b64decode, base64.urlsafe_b64decode):
            try:
                forms.append(decode(run + "=" * (-len(run) % 4)).decode("utf-8", "ignore"))
            except (binascii.Error, ValueError):
                pass
    for run in _HEX.findall(plain):
        forms.append(bytes.fromhex(run).decode("utf-8", "ignore"))
    return [_squeeze(form) for form in forms]


def _output_text(output: NotebookNode) -> str:
    parts = [str(output.get("text", "")), str(output.get("ename", ""))]
    parts += [str(output.get("evalue", "")), *map(str, output.get("traceback", []) or [])]
    parts += [str(value) for value in (output.get("data") or {}).values()]
    return "\n".join(parts)


def _removed(output: NotebookNode) -> NotebookNode:
    if output.get("output_type") == "error":  # still an error, so the cell still fails
        return new_output("error", ename="Removed", evalue=REMOVED.strip(), traceback=[REMOVED])
    name = output.get("name", "stdout") if output.get("output_type") == "stream" else "stdout"
    return new_output("stream", name=name, text=REMOVED)


def redact_notebook(nb: NotebookNode, hidden: HiddenText | None = None) -> dict[int, list[str]]:
    """Replace, in place, every output that quotes ``hidden`` (default: the notebook's own
    :func:`hidden_text`) in the cells that ran after the first hidden cell, hidden cells aside.
    Returns, for each cell changed, the hidden pieces its outputs quoted."""
    hidden = hidden_text(nb) if hidden is None else hidden
    first = next((i for i, c in enumerate(nb.cells) if is_hidden_cell(c.source)), None)
    if first is None:
        return {}
    changed: dict[int, list[str]] = {}
    for index, cell in enumerate(nb.cells[first + 1 :], start=first + 1):
        if cell.cell_type != "code" or is_hidden_cell(cell.source):
            continue
        outputs = []
        for output in cell.outputs:
            found = hidden.found_in(_output_text(output))
            outputs.append(_removed(output) if found else output)
            if found:
                changed.setdefault(index, []).extend(found)
        cell.outputs = outputs
    return changed


def removal_flags(nb_json: dict) -> list[str]:
    """Review findings for the outputs :func:`redact_notebook` replaced in an autograded
    notebook (read as plain JSON)."""
    cells = [
        index
        for index, cell in enumerate(nb_json.get("cells", []))
        for output in cell.get("outputs", [])
        if REMOVED.strip() in _output_text(output)
    ]
    if not cells:
        return []
    where = ", ".join(str(index) for index in dict.fromkeys(cells))
    return [f"cell {where}: printed text of a hidden test (removed from its output)"]
