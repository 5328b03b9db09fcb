"""The student's feedback page: readable on a phone, offline, and named by part and function.

nbgrader's feedback template lists every test as "Test cell", sets no viewport, lets a long
expected/got line run off to the right, and loads MathJax from a CDN. The course's template
(``templates/kvcourse_feedback``, extending nbgrader's) names each link by its part and function
("Part 1 · hidden tests · kv_bytes_per_token"), lays the parts out as a spaced table, wraps
output lines, and loads nothing from the network. :class:`MathToMathML` turns the notebook's TeX
into MathML at feedback time (with ``latex2mathml``), which browsers draw themselves.
``grading/nbgrader_config.py`` puts both into ``nbgrader generate_feedback``.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from nbformat.notebooknode import NotebookNode
from nbgrader.preprocessors import NbGraderPreprocessor

__all__ = [
    "TEMPLATE_DIR",
    "TEMPLATE_FILE",
    "TEMPLATE_NAME",
    "MathToMathML",
    "template_dirs",
    "tex_to_mathml",
]

#: The folder that holds the course's nbconvert templates, and the feedback template's name.
TEMPLATE_DIR = Path(__file__).resolve().parent / "templates"
TEMPLATE_NAME = "kvcourse_feedback"
#: Its file; not ``index.html.j2``, which names nbgrader's feedback page that it extends.
TEMPLATE_FILE = "kvcourse_feedback.html.j2"

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
