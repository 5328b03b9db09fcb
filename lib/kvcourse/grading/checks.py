"""Helpers for the assignments' visible test cells, so that each cell reads as the checks it makes.

A visible test cell imports what it needs from here, then checks the student's code against
literals from the worked answers. Every helper that can fail says what was expected, what came
back and, where one helps, a hint. Three kinds of helper:

* the harness: :func:`switched_off` (the library's reference raises while the student's code
  runs), :func:`module_of`, :func:`stand_in` (the test's own step inside the student's walk) and
  :func:`fresh_copy` (a private copy of library modules, built from their source files, that
  nothing done in the kernel has touched);
* plain values: :func:`as_int`, :func:`as_float`, :func:`as_int_or_none`, :func:`as_int_list`,
  :func:`as_int_pairs` turn what came back into plain Python values (or fail saying what it was),
  so comparisons never run an ``__eq__`` the student wrote; :func:`expect_equal` and
  :func:`expect_error` fail with the course's message shape;
* readers of the course's interfaces: :func:`arena_state` (a contiguous allocator),
  :func:`table_state` (a block table), :func:`manager_state`, :func:`block_tables` and
  :func:`cow_count` (a block manager with fork and copy-on-write).

Only the visible cells use this module. A student can rebind anything here before the visible
tests run, so what protects the grade stays where a student cannot reach it: the hidden-test cells
carry their own copy of the harness, and the grader's review flags code that rewrites modules.
"""

from __future__ import annotations

import contextlib
import importlib
import importlib.util
import numbers
import pkgutil
import sys
import types
from collections.abc import Callable, Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any

_PLACEHOLDER = "<the refusal>"


def _refuse(*args, **kwargs):
    raise AssertionError("<the refusal>")


def _refusal_code(message: str) -> types.CodeType:
    """The code of a function that raises ``AssertionError(message)``, with no free variables, so
    it can stand in for any function's code (it reads nothing but builtins)."""
    code = _refuse.__code__
    consts = tuple(message if c == _PLACEHOLDER else c for c in code.co_consts)
    return code.replace(co_consts=consts)


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
    methods and property getters) or a function. With ``watch``, calls into a *copy* of those
    functions (a reloaded module, a function rebuilt from their code) are noticed as well, and so
    is code that unhooks the watch; the block then fails when it ends.
    """
    functions = [f for owner in owners for f in _library_functions(owner)]
    message = (
        f"your code called the course library's {reference}, which "
        f"{'the tests switch' if watch else 'this test switches'} off: write it yourself"
    )
    refusal = _refusal_code(message)
    saved = [f.__code__ for f in functions]
    names = {code.co_name for code in saved}
    calls: list[str] = []

    def note(frame, event, arg):
        code = frame.f_code
        if event == "call" and (code is refusal or (code.co_name in names and code in saved)):
            calls.append("a switched-off function" if code is refusal else code.co_name)

    for f in functions:
        f.__code__ = refusal
    outer = sys.getprofile()
    if watch:
        sys.setprofile(note)
    try:
        yield
    finally:
        watched = sys.getprofile() is note
        if watch:
            sys.setprofile(outer)
        for f, code in zip(functions, saved, strict=True):
            f.__code__ = code
    if watch:
        assert watched and not calls, (
            "your code ran the course library's reference or a copy of it "
            f"({', '.join(sorted(set(calls))) or 'and turned off the check for it'}), which the "
            "tests switch off: write it yourself"
        )


def module_of(obj: object) -> types.ModuleType:
    """The module that defines ``obj`` (a class or function of the library), wherever the library
    keeps it: ``module_of(kvcourse.blocks.BuddyAllocator)``."""
    return sys.modules[obj.__module__]


@contextlib.contextmanager
def stand_in(function: Callable, name: str = "online_softmax_update") -> Iterator[list[int]]:
    """While the block runs, ``function`` (blockwise attention) calls the test's own online-softmax
    step as ``name``: it checks that each call gets the state the one before returned (the start
    state first), computes the state from its definition over the blocks so far (``scores [H, b]``,
    ``values [H, b, D]``) and appends ``b`` to the list it yields."""
    import torch  # only the attention tests use this helper

    namespace, keys, seen, last = function.__globals__, [], [], []

    def update(running_max, running_sum, acc, scores, values):
        call = f"{function.__name__}'s call {len(keys) + 1} of {name}"
        heads, count = scores.shape
        assert values.shape == (heads, count, acc.shape[-1]), (
            f"{call}: expected values of shape [heads, keys, head_dim] = "
            f"{[heads, count, acc.shape[-1]]}, got {list(values.shape)}. Hint: heads first."
        )
        state = (running_max, running_sum, acc)
        before = last or (running_max, torch.zeros_like(running_sum), torch.zeros_like(acc))
        pairs = zip(state, before, strict=True)  # NaN counts as equal to NaN
        assert all(a.shape == b.shape and a.allclose(b, 0, 0, True) for a, b in pairs), (
            f"{call}: got a running state that is not "
            + ("the one the call before returned" if last else "the start state (sum and acc 0)")
            + ". Hint: start from (-inf, 0, 0) and pass each call's result on to the next block."
        )
        keys.append(int(count))
        seen.append((scores.clone(), values.clone()))
        s, v = (torch.cat([x[i] for x in seen], dim=1) for i in (0, 1))
        weights = torch.exp(s - s.amax(dim=-1, keepdim=True))
        last[:] = s.amax(dim=-1), weights.sum(dim=-1), torch.einsum("hb,hbd->hd", weights, v)
        return tuple(x.clone() for x in last)

    saved = namespace.pop(name, None)
    namespace[name] = update
    try:
        yield keys
    finally:
        namespace.pop(name)
        namespace.update({} if saved is None else {name: saved})


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
    they import, except those under ``share`` (and :mod:`kvcourse.grading`), which stay the
    kernel's own: ``fresh_copy("kvcourse.serving", "kvcourse.workloads")`` is a simulator, with
    the allocators, sizes and request generators it imports, as the source files say, whatever
    was done to the library in this kernel. The copies import each other; the kernel's modules are
    left exactly as they were (``sys.modules`` and the ``kvcourse`` package's attributes included).
    """

    keep = ("kvcourse.grading", *share)

    def copied(name: str) -> bool:
        return name.startswith("kvcourse.") and not any(
            name == k or name.startswith(k + ".") for k in keep
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
    return FreshCopy(copies)


# ------------------------------------------------------------------------------------ plain values
def _fail(what: str, expected: str, value: object, hint: str | None = None) -> AssertionError:
    return AssertionError(
        f"{what}: expected {expected}, got {value!r}" + (f". Hint: {hint}" if hint else "")
    )


def _is_int(value: object) -> bool:
    return isinstance(value, numbers.Integral) and not isinstance(value, bool)


def _not_a(kind: str, value: object, what: str, hint: str | None) -> AssertionError:
    return AssertionError(
        f"{what}: expected {kind}, got {value!r} of type {type(value).__name__}."
        + (f" Hint: {hint}" if hint else "")
    )


def as_int(value: object, what: str, hint: str | None = None) -> int:
    """``value`` as a plain ``int``; fails unless it is an integer (``bool`` is not one): "{what}:
    expected an int, got {value!r} of type {type}. Hint: {hint}"."""
    if not _is_int(value):
        raise _not_a("an int", value, what, hint)
    return int(value)


def as_float(value: object, what: str, hint: str | None = None) -> float:
    """``value`` as a plain ``float``; fails unless it is a real number (not a ``bool``): "{what}:
    expected a float, got {value!r} of type {type}. Hint: {hint}"."""
    if not isinstance(value, numbers.Real) or isinstance(value, bool):
        raise _not_a("a float", value, what, hint)
    return float(value)


def as_int_or_none(value: object, what: str, hint: str | None = None) -> int | None:
    """``value`` as a plain ``int``, or ``None``; fails for anything else."""
    if value is not None and not _is_int(value):
        raise _fail(what, "an int or None", value, hint)
    return None if value is None else int(value)


def as_int_list(
    value: object, what: str, kind: str = "a list of int", hint: str | None = None
) -> list[int]:
    """``value`` (a list or tuple of integers) as a list of plain ``int``; fails otherwise,
    saying that ``kind`` was expected."""
    if not isinstance(value, list | tuple) or not all(_is_int(x) for x in value):
        raise _fail(what, kind, value, hint)
    return [int(x) for x in value]


def as_int_pairs(
    value: object,
    what: str,
    kind: str = "a list of (offset, size) tuples of int",
    hint: str | None = None,
) -> list[tuple[int, int]]:
    """``value`` (a list of 2-tuples of integers) as a list of plain ``(int, int)``; fails
    otherwise, saying that ``kind`` was expected."""
    if not isinstance(value, list | tuple) or not all(
        isinstance(p, tuple) and len(p) == 2 and all(_is_int(x) for x in p) for p in value
    ):
        raise _fail(what, kind, value, hint)
    return [(int(a), int(b)) for a, b in value]


def expect_equal(got: object, expected: object, what: str, hint: str, *, label: str = "") -> None:
    """Fail unless ``got == expected`` (give plain values: ``expected`` is a literal and ``got``
    comes from the helpers above): "{what}: expected {label}{expected}, got {got}. Hint: {hint}"."""
    if not got == expected:
        raise AssertionError(f"{what}: expected {label}{expected}, got {got}. Hint: {hint}")


def expect_error(error: type[BaseException], call: Callable[[], object], what: str, hint: str):
    """Run ``call()``; fail unless it raises ``error``: "{what}: expected {error}, but it
    returned. Hint: {hint}". Another exception propagates, with its own traceback."""
    try:
        call()
    except error:
        return
    raise AssertionError(f"{what}: expected {error.__name__}, but it returned. Hint: {hint}")


# ---------------------------------------------------------------------- readers of the interfaces
def arena_state(arena: object, what: str) -> tuple[int, list[tuple[int, int]]]:
    """``(free_slots(), free_blocks())`` of a contiguous allocator, in plain ints."""
    blocks = as_int_pairs(arena.free_blocks(), f"{what}: free_blocks()")
    return as_int(arena.free_slots(), f"{what}: free_slots()"), blocks


def table_state(table: object, what: str) -> tuple[int, list[int], int]:
    """``(num_tokens, block_ids, wasted_slots)`` of a block table, in plain ints."""
    return (
        as_int(table.num_tokens, f"{what}: num_tokens"),
        as_int_list(table.block_ids, f"{what}: block_ids", "a list of int block ids"),
        as_int(table.wasted_slots, f"{what}: wasted_slots"),
    )


def manager_state(manager: object, seq_id: object, what: str) -> tuple[int, list[int]]:
    """``(num_tokens(seq_id), block_ids(seq_id))`` of a block manager, in plain ints."""
    ids = as_int_list(
        manager.block_ids(seq_id), f"{what}: block_ids({seq_id!r})", "a list of int block ids"
    )
    return as_int(manager.num_tokens(seq_id), f"{what}: num_tokens({seq_id!r})"), ids


def block_tables(manager: object, seq_ids: Iterable[object], what: str) -> list[list[int]]:
    """Each sequence's ``block_ids``, as lists of plain ints."""
    return [
        as_int_list(
            manager.block_ids(seq_id), f"{what}: block_ids({seq_id!r})", "a list of int block ids"
        )
        for seq_id in seq_ids
    ]


def cow_count(manager: object, what: str) -> int:
    """A block manager's ``cow_count``, as a plain int."""
    return as_int(manager.cow_count, f"{what}: cow_count")
