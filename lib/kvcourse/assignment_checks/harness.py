"""The test harness: the library's reference switched off while a student's code runs, and fresh
copies of library modules that nothing done in the kernel has touched.

* :func:`switched_off`: while a block runs, the library's functions of the given modules, classes
  or functions raise ("your code called the course library's reference ..."); with ``watch``,
  so do *copies* of them (:mod:`~kvcourse.assignment_checks.copy_watch`);
* :func:`fresh_copy`: private copies of library modules compiled from their source files (a
  simulator the student's class is run on, whatever the kernel did to the library);
* :func:`stand_in`: the test's own online-softmax step inside a student's blockwise attention
  (:mod:`~kvcourse.assignment_checks.stand_ins`; :func:`stand_in_calls` makes many calls under
  it, and notes reads of several K/V blocks at once);
* :func:`module_of`: the module that defines a library object, wherever the library keeps it;
* :func:`checking`: names, in words, the property the checks inside it test, so that a failed
  hidden test tells the student which property failed and nothing else (:class:`PropertyFailed`);
* :func:`each`, :func:`contained` and :func:`calls_on`: many calls of a student's function, many
  ``in`` tests on a student's object, or a sequence of method calls with readings after each
  (:func:`reading`: a length, attributes, a method's answer, a whole tree), at once;
  :func:`attach`, :func:`stub`, :func:`kernel_object`, :func:`calls_on_result` and
  :func:`calls_on_reading` plant a node, hand over a stand-in or a library object, or change what
  the student's code handed out where it keeps it (one exchange each for a hidden test that runs
  in the grader, :mod:`kvcourse_grader.remote`); :func:`kernel_copy` and :func:`kept` run a
  simulator where the student's code is, so that only its results cross to such a test.

Visible and hidden test cells use this one module. A visible cell imports it like any other. A
hidden cell imports it too (``from kvcourse.assignment_checks.harness import ...``), but at
autograde the grader replaces that import with a private instance of this file, compiled from the
grading machine's copy: whatever the student's code did to the kernel's modules, the hidden tests
run the harness as written here. So this module imports nothing but the standard library (torch
only inside :func:`stand_in`), and a test holds it to that; the private copy inlines the two
modules of the course library it imports (``copy_watch`` and ``stand_ins``).
"""

from __future__ import annotations

import contextlib
import copy
import importlib
import importlib.util
import pkgutil
import sys
import types
from collections.abc import Callable, Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any

from kvcourse.assignment_checks.copy_watch import (  # private copies inline the module
    _FRESH_GLOBALS,
    COPY_MIN_INSTRUCTIONS,  # noqa: F401 - named in switched_off's docstring, read by tests
    CopySweep,
    code_fingerprint,  # noqa: F401
    refusal_code,
)
from kvcourse.assignment_checks.stand_ins import (  # private copies inline it too
    stand_in,  # noqa: F401 - the harness's, for the hidden cells
    stand_in_calls,  # noqa: F401
)


def _library_functions(owner: object) -> list[types.FunctionType]:
    """The library's own functions reachable from ``owner`` (a module: those defined in it or,
    for a package, below it; a class: its methods and property getters; a function: itself)."""
    if isinstance(owner, types.FunctionType):
        members: Iterable[tuple[str, Any]] = [(owner.__name__, owner)]
    else:
        members = list(vars(owner).items())
    found = []
    for name, member in members:
        member = getattr(member, "fget", member)  # a property's getter
        if not isinstance(member, types.FunctionType) or member.__code__.co_freevars:
            continue
        module = member.__module__ or ""
        if isinstance(owner, types.ModuleType):
            if name.startswith("__"):  # the module's own __getattr__ and __dir__ keep working
                continue
            if module != owner.__name__ and not module.startswith(owner.__name__ + "."):
                continue
        elif not module.startswith("kvcourse."):
            continue
        if all(member is not f for f in found):
            found.append(member)
    return found


@contextlib.contextmanager
def switched_off(*owners: object, reference: str, watch: bool = False) -> Iterator[None]:
    """While the block runs, the library's functions in ``owners`` raise ``AssertionError``:
    "your code called the course library's ``reference``, which this test switches off: write it
    yourself".

    An owner is a module (every function defined in it, or below it for a package), a class (its
    methods and property getters) or a function. With ``watch``, *copies* of those functions are
    switched off too: every live function (or function nested in one) whose code is the
    reference's with its location taken out (:func:`code_fingerprint`), when the block starts: a
    function rebuilt from the reference's code, a reloaded module, the reference's source pasted
    into a cell (other file, other lines, another function name) or retyped with other names for
    its local variables. A copy made while the block runs, or a switched-off function given its
    code back, fails the block when it ends (the grader's audit also reports code built at run
    time). Short functions (fewer than :data:`COPY_MIN_INSTRUCTIONS` instructions: a getter, a
    one-line wrapper) count only as exact copies, since anyone may write them the same way.
    """
    functions = [f for owner in owners for f in _library_functions(owner)]
    told = "the tests switch" if watch else "this test switches"
    message = f"your code called the course library's {reference}, which {told} off: write it"
    refusal = refusal_code(message + " yourself")
    saved = [f.__code__ for f in functions]
    for f in functions:
        f.__code__ = refusal
    owners_modules = {f.__globals__.get("__name__") for f in functions}
    sweep = CopySweep(saved, owners_modules, reference) if watch else None
    armed, unarmed = [], []  # (copy, its code, its stand-in); names of copies that refused one
    for f, refuser in sweep.find(set(functions)) if sweep else ():
        try:
            armed.append((f, f.__code__, refuser))
            f.__code__ = refuser
        except ValueError:  # a closure the stand-in cannot take: the block fails instead
            unarmed.append(armed.pop()[0].__name__)
    try:
        yield
    finally:
        kept = all(f.__code__ is refusal for f in functions)
        kept = kept and all(f.__code__ is refuser for f, _, refuser in armed)
        for f, code, _ in armed:
            f.__code__ = code
        for f, code in zip(functions, saved, strict=True):
            f.__code__ = code
    if sweep:
        made = unarmed + [f.__name__ for f, _ in sweep.find({*functions, *(a[0] for a in armed)})]
        assert kept and not made, (
            "your code ran the course library's reference or a copy of it "
            f"({', '.join(sorted(set(made))) or 'and turned off the check for it'}), which the "
            "tests switch off: write it yourself"
        )


#: What :func:`case_seed` mixes in outside a grading run (a solution notebook run by hand).
BY_HAND = "by hand"


def case_seed(fixed: int) -> str:
    """The seed of a hidden test's random cases beyond its fixed ones (``random.Random(fixed)``):
    at autograde, for a hidden test that runs in the grader, ``fixed`` mixed with a seed drawn
    for the grading run (``kvcourse-grade autograde --seed``), so no two runs try the same cases;
    anywhere else ``fixed`` mixed with :data:`BY_HAND`, the same cases every time."""
    return f"{int(fixed)}/{BY_HAND}"


class PropertyFailed(AssertionError):
    """A property the hidden tests check does not hold; the message is the property in words
    ("ties between instances"), never the test's code or values."""


@contextlib.contextmanager
def checking(what: str) -> Iterator[None]:
    """Run checks of one property, named in words (``what``): any failure inside (a failed
    assertion, or an error raised by the student's code) becomes :class:`PropertyFailed(what)
    <PropertyFailed>`, chained to the original. The feedback then says which property failed
    (the grader shows names written in the hidden cell and no other text), while the graded
    notebook keeps the whole traceback for the instructor."""
    try:
        yield
    except Exception as err:
        if isinstance(err, PropertyFailed):
            raise
        raise PropertyFailed(what) from err


def each(function: Callable, arguments: Iterable[tuple]) -> list:
    """``function`` called once per tuple in ``arguments``, in order: the results as a list (the
    first error stops the calls and is raised). The arguments are the test's own copies: check a
    caller's list with a plain call."""
    return [function(*args) for args in arguments]


def contained(container: object, items: Iterable[object]) -> list[bool]:
    """``[item in container for item in items]``: which items a student's object holds."""
    return [item in container for item in items]  # type: ignore[operator]


#: What :func:`reading` accepts, in words, for its error message.
READINGS = (
    "'len', ('in', items), ('call', method), ('call', method, args), "
    "('tree', root, children, fields), an attribute's name or ('of', another_object, reading)"
)


def _is_reading(what: object) -> bool:
    if isinstance(what, list):
        return all(_is_reading(w) and not isinstance(w, list) for w in what)
    if isinstance(what, str):
        return True
    if isinstance(what, tuple) and len(what) == 2 and what[0] == "in":
        return True
    if isinstance(what, tuple) and len(what) == 3 and what[0] == "of":
        return _is_reading(what[2])
    if isinstance(what, tuple) and len(what) in (2, 3) and what[0] == "call":
        return isinstance(what[1], str) and (len(what) == 2 or isinstance(what[2], tuple))
    return (
        isinstance(what, tuple)
        and len(what) == 4
        and what[0] == "tree"
        and all(isinstance(name, str) for name in (what[1], what[2], *what[3]))
    )


def tree_rows(obj: object, root: str, children: str, fields: Iterable[str]) -> list[tuple]:
    """A student's tree read top down: from ``obj.<root>``, each node's ``<children>`` mapping in
    sorted key order, parents before their children; one ``(key, [child.<field>, ...])`` per
    child. What a test compares a tree by, read in one go."""
    fields, rows = tuple(fields), []

    def visit(node: object) -> None:
        below = getattr(node, children)
        for key in sorted(below):
            child = below[key]
            rows.append((key, [getattr(child, field) for field in fields]))
            visit(child)

    visit(getattr(obj, root))
    return rows


def reading(obj: object, what: object) -> Any:
    """One reading of a student's object: ``"len"``, ``("in", items)`` (:func:`contained`),
    ``("call", method)`` or ``("call", method, args)`` (what the method returns, called with no
    arguments or with the tuple ``args``), ``("of", other, reading)`` (a reading of another
    object, such as the pool a student's table draws on, in the same exchange),
    ``("tree", root, children, fields)`` (:func:`tree_rows`) or an attribute's name; or a list of
    these, read in order."""
    if not _is_reading(what):
        raise ValueError(f"a reading is {READINGS}, or a list of them, not {what!r}")
    if isinstance(what, list):
        return [reading(obj, w) for w in what]
    if what == "len":
        return len(obj)  # type: ignore[arg-type]
    if isinstance(what, str):
        return getattr(obj, what)
    assert isinstance(what, tuple)
    if what[0] == "of":
        return reading(what[1], what[2])
    if what[0] == "in":
        return contained(obj, what[1])
    if what[0] == "call":
        return getattr(obj, what[1])(*(what[2] if len(what) == 3 else ()))
    return tree_rows(obj, what[1], what[2], what[3])


class Stub:
    """A stand-in object a test hands to a student's function: each method named in ``answers``
    returns a fresh copy of its value; calling one named in ``refuse`` fails the test (the
    function under test must not change what it was given). Made with :func:`stub`."""

    def __init__(self, answers: Mapping[str, object], refuse: Iterable[str] = ()) -> None:
        self._answers, self._refuse = dict(answers), frozenset(refuse)

    def __getattr__(self, name: str) -> Callable:
        if name.startswith("_"):
            raise AttributeError(name)
        if name in self._refuse:

            def refused(*args: object, **kwargs: object) -> None:
                raise AssertionError(f"{name}() was called, and must not be")

            return refused
        if name in self._answers:
            value = self._answers[name]
            return lambda: copy.deepcopy(value)
        raise AttributeError(f"this stand-in has no {name!r}")


def stub(answers: Mapping[str, object], refuse: Iterable[str] = ()) -> Stub:
    """A :class:`Stub` with these fixed ``answers`` and ``refuse``d methods (made in the student's
    kernel when the test runs in the grader)."""
    return Stub(answers, refuse)


def kernel_object(cls: type, *args: object, **kwargs: object) -> Any:
    """``cls(*args, **kwargs)`` for a class of the course library (a ``BlockPool``) that the test
    hands to the student's code and reads back; a test in the grader gets it made in the
    student's kernel and holds a handle."""
    module = getattr(cls, "__module__", "") or ""
    if not (isinstance(cls, type) and (module == "kvcourse" or module.startswith("kvcourse."))):
        raise TypeError(f"kernel_object makes objects of the course library's classes, not {cls!r}")
    return cls(*args, **kwargs)


def kernel_copy(*names: str, share: Iterable[str] = ()) -> FreshCopy:
    """:func:`fresh_copy`, made where the student's code runs: the simulator a test runs the
    student's class on. A test in the grader gets the copy made in the student's kernel and holds
    handles to its modules; the simulation runs there, and only what it returns crosses."""
    return fresh_copy(*names, share=share)


def kept(function: Callable, *args: object, **kwargs: object) -> Any:
    """``function(*args, **kwargs)``, a function of the library or of the student's, whose result
    stays where the student's code runs: a test in the grader holds a handle to it (a workload of
    thousands of requests, handed back to a simulation there) instead of a copy."""
    return function(*args, **kwargs)


def attach(parent: object, attribute: str, key: object, child: object) -> None:
    """``getattr(parent, attribute)[key] = child``: a test that plants a student's tree by hand
    hangs a node under its parent (one exchange when the test runs in the grader)."""
    getattr(parent, attribute)[key] = child


def calls_on(
    obj: object, calls: Iterable[tuple], after: Iterable[object] = ()
) -> tuple[list[tuple[Any, list]], Exception | None]:
    """Call ``obj``'s methods in order, each ``(name, args)`` of ``calls``, and after each call take
    the readings ``after`` of ``obj`` (:func:`reading`), or the call's own, ``(name, args,
    readings)`` (a sequence added by the call is read after it, and a freed one no longer).
    Returns the calls made, each as ``(result, readings)``, and the error that stopped them (None
    when every call was made): the test raises it where it checks that call, so a failure names
    the same property as a call made there would. Results and readings are taken as they are
    right after their call (:func:`_as_now`). The arguments are the test's own objects: a call
    that changes one changes it."""
    after = list(after)
    calls = [(call[0], call[1], list(call[2]) if len(call) > 2 else after) for call in calls]
    for what in [after, *(readings for _, _, readings in calls)]:
        if not _is_reading(what):
            raise ValueError(f"a reading is {READINGS}, not {what!r}")
    made: list[tuple[Any, list]] = []
    for name, args, readings in calls:
        try:
            result = getattr(obj, name)(*args)
            made.append((_as_now(result), [_as_now(reading(obj, what)) for what in readings]))
        except Exception as err:
            return made, err
    return made, None


def _as_now(value: Any) -> Any:
    """``value`` as it is now: the lists, tuples, dicts and sets in it (exactly those types, so no
    student code runs) copied, so that a list the student's object keeps and changes later (its
    own table, handed out) is read as it was after this call."""
    kind = type(value)
    if kind in (list, tuple):
        return kind(_as_now(v) for v in value)
    if kind is dict:
        return {k: _as_now(v) for k, v in value.items()}
    return set(value) if kind is set else value


def calls_on_result(function: Callable, args: Iterable[object], calls: Iterable[tuple]) -> int:
    """Call ``function(*args)``, then make ``calls`` (``(method, args)`` pairs) on what it returned,
    in the student's kernel: a test that changes a returned list, to see that the student's code
    did not keep it and hand it out again. Returns how many of the calls were made (a call the
    result has no method for stops them)."""
    made, _ = calls_on(function(*args), calls)
    return len(made)


def calls_on_reading(obj: object, what: object, calls: Iterable[tuple]) -> int:
    """Take the reading ``what`` of a student's object (an attribute, a method's answer) and make
    ``calls`` (``(method, args)`` pairs) on what came back, in the student's kernel: a test that
    changes a list the object handed out, to see it was not kept. Returns how many calls were
    made (one the value has no method for stops them)."""
    made, _ = calls_on(reading(obj, what), calls)
    return len(made)


def is_subclass(cls: type, of: type) -> bool:
    """``issubclass(cls, of)``: whether a student's class is the library's class ``of`` under
    another name (a test asks where the student's class lives, in the grader too)."""
    return issubclass(cls, of)


def module_of(obj: object) -> types.ModuleType:
    """The module that defines ``obj`` (a class or function of the library), wherever the library
    keeps it: ``module_of(kvcourse.blocks.BuddyAllocator)``."""
    return sys.modules[obj.__module__]


# ------------------------------------------------------------------------------------ fresh copies
class FreshCopy(Mapping[str, types.ModuleType]):
    """The modules :func:`fresh_copy` made, by dotted name (``copy["kvcourse.serving"]``) or by
    the name below ``kvcourse`` (``copy.serving``)."""

    def __init__(self, modules: dict[str, types.ModuleType]) -> None:
        self._modules = dict(modules)

    def __getitem__(self, name: str) -> types.ModuleType:
        return self._modules[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._modules)

    def __len__(self) -> int:
        return len(self._modules)

    def __getattr__(self, name: str) -> types.ModuleType:
        try:
            return self._modules[f"kvcourse.{name}"]
        except KeyError:
            raise AttributeError(f"kvcourse.{name} was not copied") from None

    def module_of(self, obj: object) -> types.ModuleType:
        """The copy of the module that defines ``obj`` (an object of the kernel's library)."""
        return self._modules[obj.__module__]


class _FromSource:
    """A loader that compiles a module's ``.py`` file itself (never a cached ``.pyc``)."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def create_module(self, spec):
        return None

    def exec_module(self, module: types.ModuleType) -> None:
        code = compile(self.path.read_bytes(), str(self.path), "exec", dont_inherit=True)
        exec(code, vars(module))


class _CopyFinder:
    """Finds the library modules that ``copied`` names in their source folders."""

    def __init__(self, copied: Callable[[str], bool]) -> None:
        self.copied = copied

    def find_spec(self, name: str, path=None, target=None):
        if not self.copied(name):
            return None
        for entry in path or ():
            base = Path(entry) / name.rpartition(".")[2]
            for file, package in ((base / "__init__.py", True), (base.with_suffix(".py"), False)):
                if file.is_file():
                    return importlib.util.spec_from_file_location(
                        name,
                        file,
                        loader=_FromSource(file),
                        submodule_search_locations=[str(base)] if package else None,
                    )
        return None


def fresh_copy(*names: str, share: Iterable[str] = ()) -> FreshCopy:
    """Private copies of library modules, run from their source files.

    Copies the modules ``names`` (a package with every module below it) and every library module
    they import, except those under ``share`` (and :mod:`kvcourse.assignment_checks`, unless a
    module of it is named), which stay the kernel's own: ``fresh_copy("kvcourse.serving",
    "kvcourse.workloads")`` is a simulator, with the allocators, sizes and request generators it
    imports, as the source files say, whatever was done to the library in this kernel. The copies
    import each other; the kernel's modules are left exactly as they were (``sys.modules`` and
    the packages' attributes included).
    """

    keep = ("kvcourse.assignment_checks", *share)
    asked = frozenset(names)

    def copied(name: str) -> bool:
        return name in asked or (
            name.startswith("kvcourse.")
            and not any(name == k or name.startswith(k + ".") for k in keep)
        )

    for name in keep:  # loaded first, so that their own imports are the kernel's modules
        importlib.import_module(name)
    top = sys.modules["kvcourse"]
    before = dict(vars(top))
    saved = {name: module for name, module in list(sys.modules.items()) if copied(name)}
    finder = _CopyFinder(copied)
    for name in saved:
        del sys.modules[name]
    sys.meta_path.insert(0, finder)
    try:
        for name in names:
            module = importlib.import_module(name)
            for info in pkgutil.walk_packages(getattr(module, "__path__", []), name + "."):
                importlib.import_module(info.name)
    finally:
        sys.meta_path.remove(finder)
        copies = {name: module for name, module in list(sys.modules.items()) if copied(name)}
        for name in copies:
            del sys.modules[name]
        sys.modules.update(saved)
        made = {id(module) for module in copies.values()}
        for attr, value in list(vars(top).items()):
            if id(value) in made:
                setattr(top, attr, before[attr]) if attr in before else delattr(top, attr)
        for name in copies:  # a named module below a kept package: the package's attribute
            package, _, attr = name.rpartition(".")
            parent = sys.modules.get(package)
            if parent is not top and id(getattr(parent, attr, None)) in made:
                setattr(parent, attr, saved[name]) if name in saved else delattr(parent, attr)
    _FRESH_GLOBALS.update((name, vars(module)) for name, module in copies.items())
    return FreshCopy(copies)
