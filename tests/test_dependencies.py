"""Every import is declared, in the set of the package that makes it: the library's modules in its
base set (what a student installs), the grader's in grading/pyproject.toml, the book's code cells
in the base set or the book extra, and tests and benchmarks in any set of a developer's
environment. A module imported but not declared would work here and fail on a fresh machine that
installs only the set it needs."""

from __future__ import annotations

import ast
import re
import sys
import tomllib
from importlib.metadata import packages_distributions
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
#: The project's own modules: its packages, the tests' helpers and the book's Sphinx extensions.
OWN = {
    "kvcourse",
    "kvcourse_grader",
    "grading_course",
    "postgres_server",
    "conftest",
    "book_pages",
    "catalogs",
} | {extension.stem for extension in (ROOT / "book" / "_ext").glob("*.py")}


def _name(requirement: str) -> str:
    """The normalized distribution name of a requirement string."""
    return re.sub(r"[-_.]+", "-", re.split(r"[\s<>=!~;\[]", requirement, maxsplit=1)[0]).lower()


def declared(pyproject: Path, *extras: str) -> set[str]:
    project = tomllib.loads(pyproject.read_text(encoding="utf-8"))["project"]
    found = {_name(r) for r in project.get("dependencies", [])}
    for extra in extras:
        found |= {_name(r) for r in project["optional-dependencies"][extra]}
    return found


def imports(sources: list[str]) -> set[str]:
    """Top-level modules the sources import (at any depth), less the standard library's."""
    found = set()
    for source in sources:
        for node in ast.walk(ast.parse(source)):
            if isinstance(node, ast.Import):
                found |= {alias.name.split(".")[0] for alias in node.names}
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                found.add(node.module.split(".")[0])
    return found - set(sys.stdlib_module_names) - OWN - {"__future__"}


def distributions(modules: set[str]) -> dict[str, set[str]]:
    owners = packages_distributions()
    missing = sorted(m for m in modules if m not in owners)
    assert not missing, f"imported but not installed here: {missing}"
    return {m: {_name(d) for d in owners[m]} for m in modules}


def undeclared(modules: set[str], allowed: set[str]) -> list[str]:
    return sorted(m for m, dists in distributions(modules).items() if not dists & allowed)


def code_cells(page: Path) -> list[str]:
    """A MyST page's code cells, without their options (``:tags:`` lines or a ``---`` block) and
    IPython's ``%`` and ``!`` lines."""
    text = page.read_text(encoding="utf-8")
    cells = re.findall(r"```\{code-cell\}[^\n]*\n(.*?)```", text, re.S)
    cells = [re.sub(r"\A---\n.*?\n---\n", "", c, flags=re.S) for c in cells]
    return [
        "\n".join(ln for ln in c.splitlines() if not ln.startswith((":", "%", "!"))) for c in cells
    ]


LIBRARY = declared(ROOT / "pyproject.toml")
BOOK = LIBRARY | declared(ROOT / "pyproject.toml", "book")
GRADER = declared(ROOT / "grading" / "pyproject.toml")
EVERYTHING = BOOK | GRADER | declared(ROOT / "pyproject.toml", "dev")


def py_sources(*folders: str) -> list[str]:
    return [
        p.read_text(encoding="utf-8")
        for folder in folders
        for p in sorted((ROOT / folder).rglob("*.py"))
    ]


def book_cells() -> list[str]:
    return [cell for page in sorted((ROOT / "book").glob("*.md")) for cell in code_cells(page)]


SETS = {
    "the library (lib/kvcourse)": (lambda: py_sources("lib/kvcourse"), LIBRARY),
    "the grader (grading/kvcourse_grader)": (
        lambda: py_sources("grading/kvcourse_grader"),
        GRADER | LIBRARY,
    ),
    "the book's code cells": (book_cells, BOOK | GRADER),
    "tests and benchmarks": (lambda: py_sources("tests", "bench", "grading/samples"), EVERYTHING),
}


@pytest.mark.parametrize("what", list(SETS))
def test_every_import_is_declared_where_it_is_used(what):
    sources, allowed = SETS[what]
    missing = undeclared(imports(sources()), allowed)
    assert not missing, (
        f"{what} imports {missing}, which its dependency set does not declare: add the "
        "distribution to the right list in pyproject.toml or grading/pyproject.toml, then "
        "`make lock`"
    )


def test_the_constraints_pin_every_declared_distribution():
    pinned = {
        _name(line)
        for line in (ROOT / "requirements" / "constraints.txt").read_text().splitlines()
        if "==" in line and not line.startswith("#")
    }
    assert not (EVERYTHING - pinned - {"torch", "kvcourse"}), (
        "requirements/constraints.txt is older than the dependency lists: run `make lock`",
        sorted(EVERYTHING - pinned - {"torch", "kvcourse"}),
    )
