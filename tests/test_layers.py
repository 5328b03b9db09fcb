"""The library keeps its shape: every module in a layer, imports pointing downward only, small
modules, a docstring on every module."""

import ast
import re
import warnings

import pytest

from kvcourse.layers import LAYERS, first_sentence, layer_of, module_files, module_summaries

#: Past this many lines a module gets a warning: split it along its jobs when you next touch it.
WARN_LINES = 400
#: Past this many lines the test fails (CONTRIBUTING.md, "Rules the tests hold").
MAX_LINES = 600


def imported_kvcourse_modules(path):
    """The kvcourse modules a source file imports, with the line of each import."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names = [node.module]
        elif isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        else:
            continue
        found += [(name, node.lineno) for name in names if name.startswith("kvcourse.")]
    return found


MODULES = module_files()


def test_every_module_has_a_layer_and_a_docstring():
    for name, path in MODULES.items():
        if name != "kvcourse":
            layer_of(name)  # raises for a module outside every layer
        assert ast.get_docstring(ast.parse(path.read_text(encoding="utf-8"))), (
            f"{path} has no module docstring: say in one sentence what the module is for"
        )


@pytest.mark.parametrize("name", [n for n in MODULES if n != "kvcourse"])
def test_imports_point_downward(name):
    own = layer_of(name)
    for imported, line in imported_kvcourse_modules(MODULES[name]):
        assert layer_of(imported) <= own, (
            f"{MODULES[name]}:{line} imports {imported} ({LAYERS[layer_of(imported)][0]}) from "
            f"the lower layer {LAYERS[own][0]!r}; move the shared piece down, or pass it in"
        )


@pytest.mark.parametrize("name", list(MODULES))
def test_modules_stay_small(name):
    source = MODULES[name].read_text(encoding="utf-8")
    lines = len(source.splitlines())
    assert lines <= MAX_LINES, (
        f"{MODULES[name]} has {lines} lines (at most {MAX_LINES}): split it along one of its jobs"
    )
    if lines > WARN_LINES:
        warnings.warn(
            f"{MODULES[name]} has {lines} lines (more than {WARN_LINES}): does it hold more than "
            "one job?",
            stacklevel=1,
        )
    assert "fmt: skip" not in source, f"{MODULES[name]}: let ruff format it (no # fmt: skip)"


PACKAGES = {name: path for name, path in MODULES.items() if path.name == "__init__.py"}


@pytest.mark.parametrize("package", list(PACKAGES))
def test_each_package_map_names_every_module(package):
    """A package's docstring is its map: it names every public module below it (the top package
    names every package and foundation module), so the map cannot drift from the files."""
    doc = ast.get_docstring(ast.parse(PACKAGES[package].read_text(encoding="utf-8"))) or ""
    children = sorted(
        name
        for name in MODULES
        if name.rpartition(".")[0] == package and not name.rpartition(".")[2].startswith("_")
    )
    children = [c for c in children if c != "kvcourse.layers"]
    missing = [c for c in children if not re.search(rf"{re.escape(c)}\b", doc)]
    assert not missing, (
        f"{PACKAGES[package]}'s docstring does not name {missing}: say in a line what each is for"
    )


def test_layer_order_and_summaries():
    assert (
        layer_of("kvcourse.blocks.pool") < layer_of("kvcourse.kv.cache") < layer_of("kvcourse.viz")
    )
    with pytest.raises(ValueError, match="belongs to no layer"):
        layer_of("kvcourse.nowhere")
    with pytest.raises(ValueError, match="not a module"):
        layer_of("numpy.linalg")
    rows = module_summaries()
    assert [r.name for r in rows][:1] == ["kvcourse.layers"]
    assert all(r.summary.endswith((".", ")", ":")) or r.summary for r in rows)
    assert not any(r.name.rsplit(".", 1)[-1].startswith("_") for r in rows)
    assert first_sentence("One sentence. Another.\n\nMore.") == "One sentence."
    assert first_sentence("As in the paper's Fig. 3, e.g. here. Next.") == (
        "As in the paper's Fig. 3, e.g. here."
    )
    assert (
        first_sentence("A sentence that goes\non over lines")
        == "A sentence that goes on over lines"
    )
    assert first_sentence(None) == ""
    assert first_sentence("A :class:`~kvcourse.blocks.pool.BlockPool`.") == "A `BlockPool`."
    assert first_sentence("See :mod:`kvcourse.kv` and ``x``.") == "See `kvcourse.kv` and `x`."
