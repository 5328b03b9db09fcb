"""The cluster package's documentation cannot drift: its docstring names every module of the
package, and every number a module's docstring shows in an example is what the code computes."""

from __future__ import annotations

import doctest
import importlib
import pkgutil

import pytest

import kvcourse.cluster as cluster

MODULES = sorted(info.name for info in pkgutil.iter_modules(cluster.__path__))


def test_the_package_docstring_names_every_module():
    missing = [m for m in MODULES if f":mod:`kvcourse.cluster.{m}`" not in cluster.__doc__]
    assert not missing, f"kvcourse.cluster's docstring does not list {missing}: add a line each"
    assert len(MODULES) >= 11


@pytest.mark.parametrize("name", MODULES)
def test_the_docstring_examples_hold(name):
    module = importlib.import_module(f"kvcourse.cluster.{name}")
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS)
    assert result.failed == 0, f"kvcourse.cluster.{name}: {result.failed} docstring example(s) fail"
