"""Plain values and the course's failure messages for test cells.

:func:`as_int`, :func:`as_float`, :func:`as_int_or_none`, :func:`as_int_list` and
:func:`as_int_pairs` turn what a student's code returned into plain Python values (or fail saying
what it was), so a comparison never runs an ``__eq__`` the student wrote; :func:`expect_equal` and
:func:`expect_error` fail with the course's message shape: what was checked, what was expected,
what came back, and a hint.
"""

from __future__ import annotations

import numbers
from collections.abc import Callable


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
