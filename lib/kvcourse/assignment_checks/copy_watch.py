"""Copies of the library's reference: how the harness knows one, and how it switches them off.

A student who pastes the reference's source into a cell, or rebuilds a function from its code,
has a *copy*: code that is the reference's with its location and its names of its own taken out
(:func:`code_fingerprint`). :func:`~kvcourse.assignment_checks.harness.switched_off` with
``watch`` sweeps the live functions for copies when its block starts (:class:`CopySweep`) and
stands a refusal in for each, as it does for the reference itself; it sweeps again when the block
ends for copies made meanwhile. A sweep costs a tenth of a second or so with torch loaded (a
third of that once an earlier block of the same reference has seen the kernel's code objects:
what it found is kept per code object), where a profiler watching every call made the
simulations it guards four times slower. A check that enters many blocks in a row still pays
for each: :func:`~kvcourse.assignment_checks.paging.paged_decode` runs a whole decode in one.

The grader's private copies of the harness (:mod:`kvcourse_grader.hidden_harness`) inline this
module's text where the harness imports it, so it too imports nothing but the standard library.
"""

from __future__ import annotations

import dis
import gc
import sys
import sysconfig
import types
from pathlib import Path

_PLACEHOLDER = "<the refusal>"


def _refuse(*args, **kwargs):
    raise AssertionError("<the refusal>")


def refusal_code(message: str) -> types.CodeType:
    """The code of a function that raises ``AssertionError(message)``, with no free variables, so
    it can stand in for any function's code (it reads nothing but builtins)."""
    code = _refuse.__code__
    consts = tuple(message if c == _PLACEHOLDER else c for c in code.co_consts)
    return code.replace(co_consts=consts)


#: A function this short is a copy of the reference's only if it is the very same code.
COPY_MIN_INSTRUCTIONS = 16


def code_fingerprint(code: types.CodeType) -> tuple:
    """``code`` with its location and its names of its own taken out: its instructions, each
    local variable by the order of its first use instead of its name, each constant by value
    (nested functions by their fingerprints; the docstring, which the body never loads, is left
    out), and the global and attribute names it uses. The reference's source pasted anywhere,
    under another function name or with other names for its local variables, compiles to code
    with the same fingerprint."""
    arguments = code.co_argcount + code.co_kwonlyargcount
    arguments += bool(code.co_flags & 0x04) + bool(code.co_flags & 0x08)  # *args, **kwargs
    local: dict[str, int] = {name: i for i, name in enumerate(code.co_varnames[:arguments])}
    kept = [step for step in dis.get_instructions(code) if step.opname not in _PLUMBING]
    place = {step.offset: index for index, step in enumerate(kept)}
    steps = []
    for step in kept:
        if step.opcode in dis.haslocal or step.opcode in dis.hasfree:
            argument: object = local.setdefault(step.argval, len(local))
        elif step.opcode in dis.hasjrel or step.opcode in dis.hasjabs:
            argument = place.get(step.argval)  # by instruction, not by byte: see _SAME_STEP
        elif step.opcode in dis.hasconst:
            value = step.argval
            if isinstance(value, types.CodeType):
                argument = code_fingerprint(value)
            else:
                argument = (type(value).__name__, value)
        else:
            argument = step.argval
        steps.append((_SAME_STEP.get(step.opname, step.opname), argument))
    return (tuple(steps), code.co_names, code.co_argcount, code.co_kwonlyargcount)


def _copy_key(code: types.CodeType) -> tuple:
    """What a copy shares with its original and is cheap to read: a first sieve before
    :func:`code_fingerprint`."""
    return (code.co_names, code.co_argcount, code.co_kwonlyargcount)


#: One step compiled two ways: ``module.function(...)`` calls its function by ``LOAD_ATTR`` when
#: the compiler saw ``import module`` in the same file, by ``LOAD_METHOD`` in a notebook cell,
#: which IPython compiles one statement at a time.
_SAME_STEP = {"LOAD_METHOD": "LOAD_ATTR"}


#: Instructions that only move closure cells around, in the order of their names.
_PLUMBING = frozenset(
    {"RESUME", "CACHE", "NOP", "EXTENDED_ARG", "MAKE_CELL", "COPY_FREE_VARS", "LOAD_CLOSURE"}
)


def _instructions(code: types.CodeType) -> int:
    """How many instructions ``code`` has, its nested functions' included."""
    own = sum(1 for i in dis.get_instructions(code) if i.opname not in ("CACHE", "RESUME"))
    return own + sum(_instructions(c) for c in code.co_consts if isinstance(c, types.CodeType))


class CopySweep:
    """The copies of ``saved`` (the reference's code objects) among the live functions: every
    function outside the course library's and the standard library's own modules whose code, or
    a function nested in it, is a copy. The reference's own modules (``owners_modules``) and their
    fresh copies are searched too: a copy may run in the reference's own globals."""

    def __init__(self, saved: list[types.CodeType], owners_modules: set, reference: str) -> None:
        facts = [_saved_facts(code) for code in saved]
        long_enough = [fact for fact in facts if fact[0] >= COPY_MIN_INSTRUCTIONS]
        self.saved, self.reference, self.owners_modules = saved, reference, owners_modules
        self.prints = {fingerprint for _, fingerprint, _ in long_enough}
        self.keys = {key for _, _, key in long_enough}
        # What an earlier block of the same reference worked out about each code object.
        self.known = _KNOWN.setdefault((reference, tuple(map(id, saved))), ({}, saved))[0]
        self.trusted = {n: g for n, g in _trusted_globals().items() if n not in owners_modules}
        self.trusted[__name__] = globals()  # this module, also inside a private harness

    def is_copy(self, code: types.CodeType) -> bool:
        """Whether ``code`` is one of the reference's, or a copy of a long enough one."""
        return code in self.saved or (
            _copy_key(code) in self.keys and code_fingerprint(code) in self.prints
        )

    def stand_in(self, code: types.CodeType) -> types.CodeType | None:
        """``code`` with each copy in it (itself, or a function nested in it) replaced by a
        refusal that names the copy; None when it holds none. Remembered per code object (by
        identity; the entry keeps the object, so its id is not reused while it is there)."""
        entry = self.known.get(id(code))
        if entry is not None and entry[0] is code:
            return entry[1]
        if self.is_copy(code):
            message = (
                f"your code ran the course library's {self.reference} or a copy of it "
                f"({code.co_name}), which the tests switch off: write it yourself"
            )
            found = refusal_code(message).replace(co_freevars=code.co_freevars)
        else:
            consts, changed = list(code.co_consts), False
            for i, const in enumerate(consts):
                if isinstance(const, types.CodeType):
                    inner = self.stand_in(const)
                    if inner is not None:
                        consts[i], changed = inner, True
            found = code.replace(co_consts=tuple(consts)) if changed else None
        self.known[id(code)] = (code, found)
        return found

    def find(self, skip: set) -> list[tuple[types.FunctionType, types.CodeType]]:
        """``(function, its stand-in)`` for each live function not in ``skip`` that holds a copy.
        Functions are read by their globals first, as ``__code__`` raises an audit event."""
        found = []
        functions = [f for f in gc.get_objects() if type(f) is types.FunctionType]
        for f in functions:
            if f in skip:
                continue
            scope = f.__globals__
            try:
                name = dict.get(scope, "__name__")
                if self.trusted.get(name) is scope or (
                    _FRESH_GLOBALS.get(name) is scope and name not in self.owners_modules
                ):
                    continue
            except TypeError:  # a ``__name__`` that is not a string
                pass
            stand_in = self.stand_in(f.__code__)
            if stand_in is not None:
                found.append((f, stand_in))
        return found


#: Module name -> globals of the latest :func:`fresh_copy` of that library module.
_FRESH_GLOBALS: dict[str, dict] = {}
#: (reference, its code objects' ids) -> ({id(code): (code, stand-in or None)}, the codes, kept
#: alive so that their ids stay theirs): a sweep costs a dictionary look-up per function once an
#: earlier block of the same reference has seen its code.
_KNOWN: dict[tuple, tuple[dict, list]] = {}
#: id(saved code) -> (the code, its instructions, fingerprint and key).
_FACTS: dict[int, tuple] = {}
#: A module's file -> whether it is in the standard library.
_IN_STDLIB: dict[str, bool] = {}


def _saved_facts(code: types.CodeType) -> tuple[int, tuple, tuple]:
    """``(instructions, fingerprint, key)`` of one of the reference's code objects, worked out
    once per code object."""
    entry = _FACTS.get(id(code))
    if entry is None or entry[0] is not code:
        entry = (code, _instructions(code), code_fingerprint(code), _copy_key(code))
        _FACTS[id(code)] = entry
    return entry[1], entry[2], entry[3]


def _trusted_globals() -> dict[str, dict]:
    """Module name -> globals of the course library's and the standard library's modules in
    ``sys.modules``, whose functions the sweep passes over (fresh copies: :data:`_FRESH_GLOBALS`).
    Code runs in them only if compiled or built into them, which the grader's audit reports."""
    stdlib = str(Path(sysconfig.get_paths()["stdlib"]).resolve()) + "/"
    trusted = {}
    for name, module in list(sys.modules.items()):
        scope = getattr(module, "__dict__", None)
        if not isinstance(scope, dict) or scope.get("__name__") != name:
            continue
        if name == "kvcourse" or name.startswith("kvcourse."):
            trusted[name] = scope
            continue
        where = scope.get("__file__")
        if isinstance(where, str) and "-packages/" not in where:
            inside = _IN_STDLIB.get(where)
            if inside is None:
                try:
                    inside = str(Path(where).resolve()).startswith(stdlib)
                except (OSError, RuntimeError):
                    inside = False
                _IN_STDLIB[where] = inside
            if inside:
                trusted[name] = scope
    return trusted
