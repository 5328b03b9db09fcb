"""The student's feedback page: readable on a phone, offline, and named by part and function.

nbgrader's feedback template lists every test as "Test cell", sets no viewport, lets a long
expected/got line run off to the right, and loads MathJax from a CDN. The course's template
(``templates/kvcourse_feedback``, extending nbgrader's) names each link by its part and function
("Part 1 · hidden tests · kv_bytes_per_token"), lays the parts out as a spaced table, wraps
output lines, and loads nothing from the network. :class:`FailureFirst` puts what each test cell
that lost points said (its error's message, or the hidden tests' one-line note) first: in the
table of parts, under the part, and at the top of the cell, above its code and traceback.
:class:`MathToMathML` turns the notebook's TeX into MathML at feedback time (with
``latex2mathml``), which browsers draw themselves. ``grading/nbgrader_config.py`` puts these
into ``nbgrader generate_feedback``.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from nbformat.notebooknode import NotebookNode
from nbgrader.preprocessors import NbGraderPreprocessor

from kvcourse_grader.leaks import strip_ansi

__all__ = [
    "TEMPLATE_DIR",
    "TEMPLATE_FILE",
    "TEMPLATE_NAME",
    "FailureFirst",
    "MathToMathML",
    "failure_message",
    "template_dirs",
    "tex_to_mathml",
]

#: The folder that holds the course's nbconvert templates, and the feedback template's name.
TEMPLATE_DIR = Path(__file__).resolve().parent / "templates"
TEMPLATE_NAME = "kvcourse_feedback"
#: Its file; not ``index.html.j2``, which names nbgrader's feedback page that it extends.
TEMPLATE_FILE = "kvcourse_feedback.html.j2"

#: How many characters of a failure message the table of parts shows (the cell shows it all).
SHORT_FAILURE = 240

_CODE = re.compile(r"(```.*?```|`[^`\n]*`)", re.S)
_DISPLAY = re.compile(r"\$\$(.+?)\$\$", re.S)
_INLINE = re.compile(r"(?<![\\$])\$(?![\s$])(.+?)(?<![\s\\])\$", re.S)


def template_dirs() -> list[str]:
    """nbconvert's ``extra_template_basedirs`` for the feedback: the course's templates, then
    nbgrader's (which the course's template extends)."""
    import nbgrader

    formgrader = Path(nbgrader.__file__).parent / "server_extensions" / "formgrader" / "templates"
    return [str(TEMPLATE_DIR), str(formgrader)]


def tex_to_mathml(tex: str, display: bool = False) -> str:
    """MathML for one TeX formula; the TeX itself, in a ``<code>``, if it cannot be converted."""
    from latex2mathml.converter import convert

    try:
        return convert(tex.strip(), display="block" if display else "inline")
    except Exception:  # an unsupported command: show the source rather than nothing
        return f"<code>{tex.replace('<', '&lt;')}</code>"


def _convert_text(text: str) -> str:
    text = _DISPLAY.sub(lambda m: tex_to_mathml(m.group(1), display=True), text)
    return _INLINE.sub(lambda m: tex_to_mathml(m.group(1)), text)


def markdown_with_mathml(source: str) -> str:
    """Markdown with each ``$…$`` and ``$$…$$`` outside code turned into MathML."""
    parts = _CODE.split(source)
    return "".join(part if i % 2 else _convert_text(part) for i, part in enumerate(parts))


class MathToMathML(NbGraderPreprocessor):
    """Feedback: TeX in markdown cells becomes MathML, so the page needs no script to show it."""

    def preprocess_cell(self, cell: NotebookNode, resources: Any, index: int):
        if cell.cell_type == "markdown" and "$" in cell.source:
            cell.source = markdown_with_mathml(cell.source)
        return cell, resources


def failure_message(cell: NotebookNode) -> str | None:
    """What a test cell that lost points said about why, in one piece of text: its error's
    message (the ``AssertionError``'s text alone; other errors with their name), the hidden
    tests' note that replaced its outputs ("Hidden tests: failed: ..."), or what it wrote to
    stderr (which nbgrader scores as a failure). None for a cell that kept its points, or one
    that said nothing."""
    grading = cell.get("metadata", {}).get("nbgrader", {})
    if not grading.get("grade") or grading.get("solution"):
        return None
    try:
        if float(grading.get("score", 0)) >= float(grading.get("points", 0)):
            return None
    except (TypeError, ValueError):
        return None
    outputs = cell.get("outputs", [])
    for output in outputs:
        if output.get("output_type") == "error":
            name = strip_ansi(str(output.get("ename", ""))).strip()
            value = strip_ansi(str(output.get("evalue", ""))).strip()
            if name == "AssertionError" and value:
                return value
            return f"{name}: {value}" if value else name or None
    for output in outputs:
        text = strip_ansi(str(output.get("text", ""))).strip()
        if output.get("output_type") != "stream" or not text:
            continue
        if text.startswith("Hidden tests:"):
            return text
        if output.get("name") == "stderr":
            return f"it wrote to stderr, which counts as a failure: {text}"
    return None


class FailureFirst(NbGraderPreprocessor):
    """Feedback: every test cell that lost points carries what it said about why
    (:func:`failure_message`) in ``metadata.kvcourse.failure``, and its first
    :data:`SHORT_FAILURE` characters in ``metadata.kvcourse.failure_short`` (a hidden tests' note
    without its "Hidden tests: ", which the row already says), for the template to show first.
    Runs after the hidden tests' outputs were replaced by their note."""

    def preprocess_cell(self, cell: NotebookNode, resources: Any, index: int):
        mine = cell.metadata.get("kvcourse")
        if not isinstance(mine, dict):  # only what this step finds is shown, never a planted note
            cell.metadata["kvcourse"] = {}
            mine = cell.metadata["kvcourse"]  # the node stores a converted copy of the dict
        mine.pop("failure", None)
        mine.pop("failure_short", None)
        message = failure_message(cell) if cell.cell_type == "code" else None
        if message:
            # In the table the row already says "hidden tests": its note starts at "failed".
            short = message.removeprefix("Hidden tests: ")
            if len(short) > SHORT_FAILURE:
                short = short[: SHORT_FAILURE - 1] + "…"
            mine["failure"], mine["failure_short"] = message, short
        return cell, resources
