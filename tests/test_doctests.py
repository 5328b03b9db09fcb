"""Every example in a library docstring runs and shows what it says (``>>>`` lines are doctests).

A docstring's example is part of the library's documentation: if the code changes what it prints,
this fails, so no example drifts from the code. Modules are found by their source, so a new
module with examples is covered without being listed here."""

import doctest
import importlib

import pytest

from kvcourse.layers import module_files

WITH_EXAMPLES = sorted(
    name for name, path in module_files().items() if ">>> " in path.read_text(encoding="utf-8")
)


def test_the_library_has_examples():
    assert len(WITH_EXAMPLES) >= 10, WITH_EXAMPLES


@pytest.mark.parametrize("name", WITH_EXAMPLES)
def test_docstring_examples_run(name):
    module = importlib.import_module(name)
    flags = doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE
    result = doctest.testmod(module, optionflags=flags, verbose=False, report=True)
    assert result.attempted > 0, f"{name}: its '>>> ' lines are not doctests doctest can find"
    assert result.failed == 0, f"{name}: {result.failed} docstring example(s) failed (see above)"
