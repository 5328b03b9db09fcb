"""The library's layers, lowest first, and what each of its modules is for.

The library is a stack: a module imports only from its own layer or the layers below it, so each
layer can be read, tested and taught without the ones above. ``tests/test_layers.py`` holds the
library to that rule (and to small modules); the book's page for contributors
(``book/contributors.md``) prints :func:`module_summaries` as the map of the library.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass
from pathlib import Path

#: The layers, lowest first: each entry names the top-level modules or packages it holds.
LAYERS: tuple[tuple[str, tuple[str, ...]], ...] = (
    (
        "foundations",
        (
            "_checks",
            "layers",
            "specs",
            "sizing",
            "kv_formats",
            "workloads",
            "token_workloads",
            "traces",
            "os_paging",
        ),
    ),
    ("block bookkeeping", ("blocks",)),
    ("KV tensors", ("kv",)),
    ("attention", ("attention",)),
    ("model", ("model",)),
    ("generation", ("generation",)),
    ("serving", ("serving",)),
    ("cluster", ("cluster",)),
    ("drawings", ("viz",)),
    ("assignment checks", ("assignment_checks",)),
)

PACKAGE_DIR = Path(__file__).resolve().parent


@dataclass(frozen=True)
class ModuleSummary:
    """One module of the library: its dotted name, its layer, its size and its first sentence."""

    name: str
    layer: str
    lines: int
    summary: str


def layer_of(module: str) -> int:
    """The layer number (0 = lowest) of a dotted module name such as ``kvcourse.blocks.pool``."""
    parts = module.split(".")
    if parts[0] != "kvcourse" or len(parts) < 2:
        raise ValueError(f"{module!r} is not a module of the kvcourse library")
    for number, (_, members) in enumerate(LAYERS):
        if parts[1] in members:
            return number
    raise ValueError(
        f"kvcourse.{parts[1]} belongs to no layer; add it to kvcourse.layers.LAYERS "
        f"(lowest first) before using it"
    )


def module_files(root: Path = PACKAGE_DIR) -> dict[str, Path]:
    """Every module of the library as ``{dotted name: source file}``, packages as their
    ``__init__.py``, in layer order and then by name."""
    found = {}
    for path in root.rglob("*.py"):
        parts = path.relative_to(root).with_suffix("").parts
        if parts[-1] == "__init__":
            parts = parts[:-1]
        found[".".join(("kvcourse", *parts))] = path
    return dict(sorted(found.items(), key=lambda item: (item[0] != "kvcourse", _sort_key(item[0]))))


#: A Sphinx cross-reference such as :class:`~kvcourse.blocks.pool.BlockPool`.
_ROLE = re.compile(r":[a-z]+:`(~?)([^`]+)`")
#: A full stop that ends a sentence: not the one of an abbreviation the docstrings use ("the
#: paper's Fig. 3", "e.g. a block", "Ex. 6", "vs. LRU").
_SENTENCE_END = re.compile(
    r"(?<!\bFig)(?<!\bFigs)(?<!\be\.g)(?<!\bi\.e)(?<!\bEx)(?<!\bEq)(?<!\bvs)\. "
)


def first_sentence(docstring: str | None) -> str:
    """The first sentence of a docstring's first paragraph, joined onto one line, as Markdown:
    Sphinx roles become inline code (``:class:`~a.b.C``` → ```C```)."""
    if not docstring:
        return ""
    paragraph = " ".join(docstring.strip().split("\n\n")[0].split())
    paragraph = _ROLE.sub(
        lambda m: f"`{m.group(2).rsplit('.', 1)[-1] if m.group(1) else m.group(2)}`", paragraph
    )
    paragraph = paragraph.replace("``", "`")
    end = _SENTENCE_END.search(paragraph)
    return paragraph if end is None else paragraph[: end.start() + 1]


def module_summaries(root: Path = PACKAGE_DIR, *, private: bool = False) -> list[ModuleSummary]:
    """Each module's name, layer, line count and first docstring sentence, read from the source
    files without importing them (so listing the library never starts torch or Triton)."""
    rows = []
    for name, path in module_files(root).items():
        if name == "kvcourse" or (not private and name.rsplit(".", 1)[-1].startswith("_")):
            continue
        source = path.read_text(encoding="utf-8")
        layer = LAYERS[layer_of(name)][0]
        summary = first_sentence(ast.get_docstring(ast.parse(source)))
        rows.append(ModuleSummary(name, layer, len(source.splitlines()), summary))
    return rows


def _sort_key(name: str) -> tuple[int, int, str]:
    if name == "kvcourse":
        return (-1, 0, name)
    layer = layer_of(name)
    return (layer, LAYERS[layer][1].index(name.split(".")[1]), name)
