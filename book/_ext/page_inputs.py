"""What each page of the book reads, fingerprinted: a page re-executes, and Sphinx reads it again,
exactly when something it reads has changed.

MyST-NB's execution cache knows a page only by the text of its code cells, and Sphinx re-reads
only pages whose own source changed; a page that imports a library module shows that module's
old outputs until both are told. :func:`page_fingerprints` says, per page, what it reads now:

* the ``kvcourse`` modules whose code its cells use, found by reading the code (``ast``): a
  module imported whole, or the module that defines a name imported from a package (following
  the package's re-exports), then everything such a module imports in turn, and the packages
  above each (their ``__init__`` runs first); ``importlib.import_module("kvcourse....")``
  counts as an import; a data folder a module reads (:data:`DATA_OF`); the whole grader when a
  page imports ``kvcourse_grader``;
* the files and folders of the checkout its code names as a path (``root / "bench" /
  "results"``), and what :data:`PAGE_EXTRAS` lists for the pages that read more than their code
  can show (the contributors' map reads every module; the instructors' page grades a0 with the
  grader, the samples and the assignments);
* what every page runs on (:data:`EVERY_PAGE`: the pinned dependencies).

Its own text is not among them: the cache already knows its code, and Sphinx its prose. What it
cannot see: a module that only a package's ``__init__`` imports, whose import does something a
page shows (the library's modules define things and do nothing when imported).

``book/editions.py`` drops a page's record from the execution cache when its fingerprint moves
(``_build/page-inputs.json``); this extension makes Sphinx read such a page again in every
build folder, whatever that folder's environment remembers (``env-get-outdated``).
"""

from __future__ import annotations

import ast
import hashlib
import re
from functools import cache
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
LIBRARY = Path("lib")
GRADER = "grading/kvcourse_grader"
#: What every executed page runs on.
EVERY_PAGE = ("pyproject.toml", "requirements")
#: The data folders of the library and the module that reads each.
DATA_OF = {
    "kvcourse.traces": "lib/kvcourse/data/mooncake",
    "kvcourse.trained_model": "lib/kvcourse/data/tiny_model",
}
#: What a page reads beyond what its code shows, by page.
PAGE_EXTRAS = {
    "book/contributors.md": ("lib/kvcourse",),
    "book/instructors.md": (
        "lib/kvcourse",
        GRADER,
        "grading/nbgrader_config.py",
        "grading/samples",
        "grading/student_lab",
        "solutions",
        "notebooks",
    ),
}
_CODE_CELL = re.compile(r"^```\{code-cell\}[^\n]*\n(.*?)^```", re.M | re.S)


def code_of(page: Path) -> str:
    """The Python of a MyST page's code cells, their options and IPython magics left out."""
    cells = []
    for body in _CODE_CELL.findall(page.read_text(encoding="utf-8")):
        lines = body.split("\n")
        if lines and lines[0].strip() == "---":  # options as a YAML block
            end = next((i for i, line in enumerate(lines[1:], 1) if line.strip() == "---"), 0)
            lines = lines[end + 1 :]
        while lines and lines[0].startswith(":"):  # options as ":tags: [...]" lines
            lines = lines[1:]
        cells.append("\n".join(line for line in lines if not line.lstrip().startswith(("%", "!"))))
    return "\n\n".join(cells)


def _module_file(name: str, root: Path) -> Path | None:
    if name != "kvcourse" and not name.startswith("kvcourse."):
        return None
    base = root / LIBRARY / Path(*name.split("."))
    for file in (base.with_suffix(".py"), base / "__init__.py"):
        if file.is_file():
            return file
    return None


def _imports(tree: ast.AST) -> set[tuple[str, str | None]]:
    """What code imports, anywhere in it: ``(module, None)`` for ``import module`` or a module
    named as a string (``import_module("kvcourse....")``), ``(module, name)`` for ``from module
    import name``."""
    found: set[tuple[str, str | None]] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update((alias.name, None) for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            found.update((node.module, alias.name) for alias in node.names)
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            if re.fullmatch(r"kvcourse(_grader)?(\.\w+)*", node.value):
                found.add((node.value, None))
    return found


def _bound_by_import(tree: ast.AST, name: str) -> tuple[str, str] | None:
    """Where a module's top-level ``from X import n [as name]`` takes ``name`` from: ``(X, n)``."""
    for node in getattr(tree, "body", []):
        if isinstance(node, ast.ImportFrom) and node.module and not node.level:
            for alias in node.names:
                if (alias.asname or alias.name) == name and alias.name != "*":
                    return node.module, alias.name
    return None


def _named_paths(tree: ast.AST) -> set[str]:
    """The relative paths the code spells as ``x / "a" / "b"`` (``a/b``) or as one string."""
    paths = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            if "/" in node.value and re.fullmatch(r"[\w.\-/]{1,200}", node.value):
                paths.add(node.value)
        parts: list[str] = []
        while isinstance(node, ast.BinOp) and isinstance(node.op, ast.Div):
            if not (isinstance(node.right, ast.Constant) and isinstance(node.right.value, str)):
                break
            parts.insert(0, node.right.value)
            node = node.left
        if parts and all(re.fullmatch(r"[\w.\-]{1,100}", part) for part in parts):
            paths.add("/".join(parts))
    # root / "bench" / "results" names bench/results, not the root / "bench" inside it
    return {p for p in paths if not any(q.startswith(p + "/") for q in paths)}


@cache
def _tree_of(file: Path) -> ast.AST:
    return ast.parse(file.read_text(encoding="utf-8"))


def modules_read(code: str, root: Path = ROOT) -> set[str]:
    """The library modules whose code running ``code`` uses: a module it imports whole, or the
    module that defines a name it imports (a package's ``__init__`` that only re-exports the name
    counts for itself, not for everything it imports), and in turn what those use; with every
    package above them, whose ``__init__`` runs first."""
    counted: set[str] = set()  # modules whose source counts
    whole: set[str] = set()  # modules whose code runs: what they import counts too
    seen: set[tuple[str, str | None]] = set()
    todo = sorted(_imports(ast.parse(code)), key=str)
    while todo:
        module, name = todo.pop()
        if (module, name) in seen or _module_file(module, root) is None:
            continue
        seen.add((module, name))
        parts = module.split(".")
        counted.update(".".join(parts[: i + 1]) for i in range(len(parts)))
        tree = _tree_of(_module_file(module, root))
        if name is not None and _module_file(f"{module}.{name}", root) is not None:
            todo.append((f"{module}.{name}", None))  # from a package, a module
        elif name is not None and (source := _bound_by_import(tree, name)) is not None:
            todo.append(source)  # a name the module re-exports: where it comes from counts
        elif module not in whole:
            whole.add(module)
            todo.extend(sorted(_imports(tree) - seen, key=str))
    return counted


def inputs_of(page: Path, root: Path = ROOT) -> list[str]:
    """What ``page`` reads, as paths relative to ``root`` (files and folders), sorted."""
    relative = page.relative_to(root).as_posix()
    # Not the page itself: the cache knows its code, and Sphinx its text.
    found = {*EVERY_PAGE, *PAGE_EXTRAS.get(relative, ())}
    try:
        tree = ast.parse(code_of(page))
    except SyntaxError:  # code this reader cannot follow: the page reads the whole library
        tree, found = ast.parse(""), found | {"lib/kvcourse"}
    for module in modules_read(ast.unparse(tree), root):
        found.add(_module_file(module, root).relative_to(root).as_posix())
        if module in DATA_OF:
            found.add(DATA_OF[module])
    if any(module.split(".")[0] == "kvcourse_grader" for module, _ in _imports(tree)):
        found.add(GRADER)
    for path in _named_paths(tree):
        named = (root / path).resolve()
        if named.is_relative_to(root) and named != root and named.exists():
            found.add(named.relative_to(root).as_posix())
    return sorted(p for p in found if (root / p).exists())


def _files(path: Path) -> list[Path]:
    files = sorted(path.rglob("*")) if path.is_dir() else [path]
    return [
        f
        for f in files
        if f.is_file()
        and "__pycache__" not in f.parts
        and f.suffix != ".pyc"
        and not any(part.endswith(".egg-info") for part in f.parts)
    ]


def fingerprint(inputs: list[str], root: Path = ROOT) -> str:
    """One fingerprint of the named files and folders: their files' names and contents."""
    digest = hashlib.sha256()
    for top in inputs:
        for file in _files(root / top):
            digest.update(file.relative_to(root).as_posix().encode() + b"\0")
            digest.update(hashlib.sha256(file.read_bytes()).digest())
    return digest.hexdigest()[:16]


def executed_pages(root: Path = ROOT) -> list[Path]:
    """The book's pages that have code cells (the ones MyST-NB executes)."""
    pages = sorted((root / "book").glob("*.md"))
    return [p for p in pages if _CODE_CELL.search(p.read_text(encoding="utf-8"))]


def page_fingerprints(root: Path = ROOT) -> dict[str, str]:
    """Each executed page (its path relative to ``root``) and the fingerprint of what it reads."""
    _tree_of.cache_clear()
    return {
        page.relative_to(root).as_posix(): fingerprint(inputs_of(page, root), root)
        for page in executed_pages(root)
    }


def _outdated(app: Any, env: Any, added: set, changed: set, removed: set) -> list[str]:
    """Sphinx's ``env-get-outdated``: the pages whose inputs moved since this environment read
    them, to be read again (their fingerprints are remembered as they are read)."""
    current = page_fingerprints(ROOT)
    remembered = getattr(env, "kvcourse_page_inputs", {})
    env.kvcourse_page_inputs = remembered
    moved = []
    for docname in env.found_docs:
        path = Path(env.doc2path(docname)).resolve()
        key = path.relative_to(ROOT).as_posix() if path.is_relative_to(ROOT) else None
        if key in current:
            if remembered.get(docname) != current[key] and docname not in added:
                moved.append(docname)
            remembered[docname] = current[key]
    return moved


def setup(app: Any) -> dict[str, Any]:
    """Register the check with Sphinx."""
    app.connect("env-get-outdated", _outdated)
    return {"parallel_read_safe": True, "parallel_write_safe": True, "env_version": 1}
